"""Committed offsets and group state with real clients: resume after a consumer restart, survive a broker
restart (clean and kill -9), and admin describe/list/delete of groups and offsets with lag."""

from __future__ import annotations

import time

import pytest
from conftest import broker_for, start_broker
from test_group_clients import BROKER_OVERRIDES, PARTITIONS, TOPIC, Consumer, create_topic, produce, unique, wait_until


def kp_consumer(bootstrap, group, **kw):
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300, **kw)


def kp_subscribed(bootstrap, group, topic=TOPIC):
    """A kafka-python consumer subscribed to TOPIC once it knows the topic's partitions: subscribed
    before, a kafka-python 3.0 leader can assign before the metadata arrives ("No partition metadata
    for topic"), hand out nothing and rejoin, one more rebalance for the client bug poll_until
    works around."""
    consumer = kp_consumer(bootstrap, group)
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer, predicate, timeout=15.0):
    records = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate(records):
        # kafka-python 3.0.12 can lose a rebalance when poll() times out between its JoinGroup and
        # SyncGroup: heartbeats never resume and the broker expires the member (seen under load, with
        # correct broker answers; see test_group_clients.Consumer).  Polls of a second stay clear of it.
        for recs in consumer.poll(timeout_ms=1000).values():
            records.extend(recs)
    assert predicate(records), f"only {len(records)} records"
    return records


def test_kafka_python_resumes_at_committed_offset_with_metadata(request, broker_kind, tmp_path):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    topic, group = unique("resume"), unique("resume")
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 40, topic)  # 10 per partition
        c = kp_subscribed(broker.bootstrap, group, topic)
        poll_until(c, lambda rs: len(rs) >= 40)
        # Commit a position behind what was consumed (an uncommitted tail of 5 per partition).
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(5, f"ckpt-{p}", -1) for p in range(PARTITIONS)})
        c.close()

        c2 = kp_subscribed(broker.bootstrap, group, topic)
        records = poll_until(c2, lambda rs: len(rs) >= 20)
        firsts = {}
        for r in records:
            firsts.setdefault(r.partition, r.offset)
        assert firsts == {p: 5 for p in range(PARTITIONS)}
        committed = c2.committed(TopicPartition(topic, 2), metadata=True)
        assert committed.offset == 5 and committed.metadata == "ckpt-2"
        c2.close()
    finally:
        broker.stop()


def test_confluent_commit_metadata_round_trip(request, broker_kind, tmp_path):
    from confluent_kafka import Consumer as CKConsumer, TopicPartition

    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    topic, group = unique("ck-meta"), unique("ck-meta")
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 40, topic)
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
        c = CKConsumer(conf)
        c.commit(offsets=[TopicPartition(topic, p, 7, metadata=f"m{p}") for p in range(PARTITIONS)],
                 asynchronous=False)
        c.close()
        c2 = CKConsumer(conf)
        got = c2.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [(tp.offset, tp.metadata) for tp in got] == [(7, f"m{p}") for p in range(PARTITIONS)]
        c2.subscribe([topic])
        firsts = {}
        deadline = time.monotonic() + 15
        while len(firsts) < PARTITIONS and time.monotonic() < deadline:
            m = c2.poll(0.2)
            if m is not None and m.error() is None:
                firsts.setdefault(m.partition(), m.offset())
        assert firsts == {p: 7 for p in range(PARTITIONS)}
        c2.close()
    finally:
        broker.stop()


@pytest.mark.minikafka_only(reason="restarts or kills the broker process")
@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_broker_restart_keeps_offsets_and_group_state(tmp_path, kill):
    from kafka.admin import KafkaAdminClient

    broker = start_broker(tmp_path, **BROKER_OVERRIDES)
    consumer = None
    try:
        create_topic(broker.bootstrap)
        produce(broker.bootstrap, 0, 40)
        consumer = Consumer("kafka-python", broker.bootstrap, "survivor", session_ms=15000)
        wait_until(lambda: len(set(consumer.values)) >= 40 and len(consumer.assigned) == PARTITIONS,
                   what="40 consumed and committed")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        # The consumer commits after it processes: wait for the commits rather than for time.
        wait_until(lambda: {om.offset for om in admin.list_group_offsets("survivor")["survivor"].values()} == {10},
                   what="every partition committed at 10")
        before = admin.describe_groups(["survivor"])["survivor"]
        offsets_before = admin.list_group_offsets("survivor")["survivor"]
        admin.close()
        assert before["group_state"] == "Stable"
        assert {tp.partition: om.offset for tp, om in offsets_before.items()} == {p: 10 for p in range(PARTITIONS)}

        consumer.paused.set()  # hold polls across the restart; its heartbeat thread keeps retrying
        broker.restart(kill=kill)

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        after = admin.describe_groups(["survivor"])["survivor"]
        offsets_after = admin.list_group_offsets("survivor")["survivor"]
        assert after["group_state"] == "Stable"
        assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
        assert after["members"][0]["member_assignment"] == before["members"][0]["member_assignment"]
        assert offsets_after == offsets_before

        # The member carries on in the same generation: no rebalance, and it consumes new records.
        changes = consumer.assignment_changes
        consumer.paused.clear()
        produce(broker.bootstrap, 40, 40)
        wait_until(lambda: {f"m{i}" for i in range(40, 80)} <= set(consumer.values), what="consuming after restart")
        assert consumer.assignment_changes == changes
        still = admin.describe_groups(["survivor"])["survivor"]
        assert [m["member_id"] for m in still["members"]] == [m["member_id"] for m in before["members"]]
        admin.close()
    finally:
        if consumer is not None:
            consumer._stop.set()
        broker.stop()


def test_admin_describe_list_delete_groups_and_offsets_with_lag(request, broker_kind, tmp_path):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    topic, group = unique("watched"), unique("watched")
    consumers = []
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 40, topic)  # 10 per partition
        a = Consumer("confluent", broker.bootstrap, group, topic=topic, name="alpha")
        b = Consumer("confluent", broker.bootstrap, group, topic=topic, name="beta")
        consumers += [a, b]
        wait_until(lambda: len(set(a.values) | set(b.values)) >= 40 and a.assigned and b.assigned
                   and len(a.assigned | b.assigned) == PARTITIONS, what="both members consuming")
        time.sleep(0.5)
        a.paused.set()
        b.paused.set()
        produce(broker.bootstrap, 40, 8, topic)  # lag: 2 per partition

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(request_timeout=10).result()
        assert {(g.group_id, str(g.state)) for g in listed.valid} >= {(group, "ConsumerGroupState.STABLE")}

        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        assert str(desc.state) == "ConsumerGroupState.STABLE"
        assert desc.partition_assignor == "range"
        members = {m.client_id: m for m in desc.members}
        assert set(members) == {"alpha", "beta"}
        assert all(m.host == "/127.0.0.1" for m in members.values())
        assigned = {cid: {tp.partition for tp in m.assignment.topic_partitions} for cid, m in members.items()}
        assert assigned == {"alpha": set(a.assigned), "beta": set(b.assigned)}

        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
        committed = {tp.partition: tp.offset for tp in res[group].result().topic_partitions}
        assert committed == {p: 10 for p in range(PARTITIONS)}
        probe = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        lag = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] - committed[p]
               for p in range(PARTITIONS)}
        probe.close()
        assert lag == {p: 2 for p in range(PARTITIONS)}

        # An active group cannot be deleted.
        deleted = admin.delete_consumer_groups([group], request_timeout=10)[group]
        with pytest.raises(Exception) as info:
            deleted.result()
        assert "NON_EMPTY_GROUP" in str(info.value) or "not empty" in str(info.value).lower()

        for c in consumers:
            c.paused.clear()
            c.stop()
        consumers.clear()
        kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        wait_until(lambda: kadmin.describe_groups([group])[group]["group_state"] == "Empty",
                   what="the group becoming Empty")
        # OffsetDelete on the now Empty group, then DeleteGroups.
        kadmin.delete_group_offsets(group, [KTP(topic, 0)])
        left = kadmin.list_group_offsets(group)[group]
        assert {tp.partition for tp in left} == {1, 2, 3}
        assert admin.delete_consumer_groups([group], request_timeout=10)[group].result() is None
        assert group not in {g["group_id"] for g in kadmin.list_groups()}
        assert kadmin.describe_groups([group])[group]["group_state"] == "Dead"
        kadmin.close()
    finally:
        for c in consumers:
            c._stop.set()
        broker.stop()
