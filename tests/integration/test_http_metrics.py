"""/metrics and /health against the real broker after real client traffic (confluent-kafka)."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "minikafka's HTTP health and metrics"))]


def http_port(broker) -> int:
    match = re.search(r"http on [^:\s]+:(\d+)", broker.read_log())
    assert match, broker.read_log()
    return int(match.group(1))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("metrics"), http_port=0, group_min_session_timeout_ms=100)
    handle.http = f"http://127.0.0.1:{http_port(handle)}"
    yield handle
    handle.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(broker) -> dict[str, float]:
    """{'name{label="v",...}': value} with labels sorted as prometheus_client writes them."""
    status, text = get(broker.http + "/metrics")
    assert status == 200
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_health(broker):
    status, body = get(broker.http + "/health/live")
    assert status == 200 and json.loads(body)["status"] == "live"
    status, body = get(broker.http + "/health/ready")
    assert status == 200 and json.loads(body) == {"status": "ready", "listening": True, "coordinators_loaded": True}


def test_request_topic_partition_and_lag_metrics(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("met", num_partitions=2, replication_factor=1)])["met"].result(timeout=10)
    before = scrape(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(20):
        producer.produce("met", value=b"x" * 100, key=str(i).encode(), partition=i % 2)
        producer.flush(10)  # one batch per record: 20 produce requests
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "met-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    consumer.subscribe(["met"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 15 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    assert len(got) >= 15
    # Commit exactly 6 records on partition 0 and 4 on partition 1, then stop consuming.
    consumer.commit(offsets=[TopicPartition("met", 0, 6), TopicPartition("met", 1, 4)], asynchronous=False)
    consumer.close()

    m = scrape(broker)
    produce_key = 'kafka_network_requestmetrics_requests_total{request="Produce",version="%s"}'
    produced = sum(v for k, v in m.items() if k.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))
    produced_before = sum(v for k, v in before.items()
                          if k.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))
    assert produced - produced_before == 20, produce_key
    assert m['kafka_server_brokertopicmetrics_messagesin_total{topic="met"}'] == 20
    assert m['kafka_server_brokertopicmetrics_bytesin_total{topic="met"}'] >= 20 * 100
    assert m['kafka_server_brokertopicmetrics_bytesout_total{topic="met"}'] >= 15 * 100
    assert m['kafka_server_brokertopicmetrics_messagesout_total{topic="met"}'] >= 15
    assert m['kafka_network_requestmetrics_errors_total{error="NONE",request="Produce"}'] >= 20
    assert m['kafka_network_requestmetrics_totaltime_seconds_count{request="Produce"}'] >= 20
    assert m['kafka_network_requestmetrics_localtime_seconds_count{request="Fetch"}'] >= 1
    for p in (0, 1):
        labels = f'{{partition="{p}",topic="met"}}'
        assert m["kafka_log_log_logendoffset" + labels] == 10
        assert m["kafka_cluster_partition_highwatermark" + labels] == 10
        assert m["kafka_log_log_logstartoffset" + labels] == 0
        assert m["kafka_log_log_numlogsegments" + labels] == 1
        assert m["kafka_log_log_size" + labels] > 1000
    # Lag after the consumer stopped: high watermark minus the committed offset.
    assert m['kafka_consumergroup_lag{consumergroup="met-group",partition="0",topic="met"}'] == 4
    assert m['kafka_consumergroup_lag{consumergroup="met-group",partition="1",topic="met"}'] == 6
    assert m['kafka_consumergroup_current_offset{consumergroup="met-group",partition="0",topic="met"}'] == 6
    assert m['kafka_consumergroup_lag_sum{consumergroup="met-group"}'] == 10
    assert m['kafka_coordinator_group_groupmetadatamanager_numgroups{state="Empty"}'] >= 1
    assert m['kafka_consumergroup_members{consumergroup="met-group"}'] == 0
    assert m["kafka_server_socketservermetrics_connection_count"] >= 1  # the admin client is still open
    assert m["minikafka_ready"] == 1


def test_error_codes_counted(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = scrape(broker).get(
        'kafka_network_requestmetrics_errors_total{error="TOPIC_ALREADY_EXISTS",request="CreateTopics"}', 0)
    with pytest.raises(Exception):
        admin.create_topics([NewTopic("met", num_partitions=1, replication_factor=1)])["met"].result(timeout=10)
    after = scrape(broker)['kafka_network_requestmetrics_errors_total{error="TOPIC_ALREADY_EXISTS",request="CreateTopics"}']
    assert after == before + 1


def wait_for(predicate, timeout: float = 15.0, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def test_join_group_waiting_for_a_member_is_in_the_rebalance_purgatory(broker):
    """A second consumer's JoinGroup waits while the first member does not rejoin (kafka-python
    rejoins only from poll()); the group is then in Kafka's Rebalance purgatory until it does."""
    import threading

    from kafka import KafkaConsumer

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("purg", num_partitions=2, replication_factor=1)])["purg"].result(timeout=10)
    key = 'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="%s"}'
    settings = dict(bootstrap_servers=broker.bootstrap, group_id="purg-group", session_timeout_ms=6000,
                    heartbeat_interval_ms=200, max_poll_interval_ms=30000, request_timeout_ms=40000)
    first = KafkaConsumer("purg", **settings)
    second = None
    try:
        # Polls of a second: kafka-python 3.0.12 can lose a rebalance when poll() times out between
        # its JoinGroup and SyncGroup (heartbeats never resume; see test_group_clients.Consumer).
        assert wait_for(lambda: first.poll(1000) is not None and first.assignment()), "first member not assigned"
        assert scrape(broker)[key % "Rebalance"] == 0
        assert scrape(broker)[key % "Produce"] == 0
        second = KafkaConsumer("purg", **settings)
        joined = threading.Event()

        def join() -> None:
            while not joined.is_set() and not second.assignment():
                second.poll(1000)
            joined.set()

        worker = threading.Thread(target=join, daemon=True)
        worker.start()
        # The first member is not polling, so its rejoin (and the second's JoinGroup answer) waits.
        seen = wait_for(lambda: (m := scrape(broker))[key % "Rebalance"] == 1 and m)
        assert seen, scrape(broker)[key % "Rebalance"]
        assert seen['kafka_coordinator_group_groupmetadatamanager_numgroups{state="PreparingRebalance"}'] == 1
        # The first member polls again: it rejoins, the rebalance completes, the purgatory empties.
        assert wait_for(lambda: (first.poll(1000) or True) and joined.is_set(), timeout=20)
        assert wait_for(lambda: scrape(broker)[key % "Rebalance"] == 0)
        worker.join(5)
    finally:
        if second is not None:
            joined.set()
            second.close()
        first.close()


def test_metrics_off_without_http(tmp_path):
    handle = start_broker(tmp_path)
    try:
        assert "http on" not in handle.read_log()
    finally:
        handle.stop()
