"""Share groups (KIP-932), the group side, with confluent-kafka's ``ShareConsumer`` (librdkafka's share
consumer) on minikafka and on Apache Kafka 4.2: joining, the assignment (after the share state of the
partitions is initialized), a second member sharing the partitions, leaving, and deleting the empty
group.  Records are not fetched here (ShareFetch is the share partitions' part); the group's members
and assignments are read with ShareGroupDescribe and ListGroups.

The heartbeat interval is 500 ms (SHARE_FAST, on both brokers): a member gets its partitions on the
heartbeat after the one that joined."""

from __future__ import annotations

import uuid

import pytest

from conftest import SHARE_FAST, RawClient, broker_for, start_broker
from test_cli_tools import mk, mkjson
from test_group_clients import create_topic, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
ShareConsumer = getattr(confluent_kafka, "ShareConsumer", None)
if ShareConsumer is None:  # confluent-kafka < 2.15
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

WAIT = 40.0


@pytest.fixture(scope="module")
def broker(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("share"), **SHARE_FAST)
    yield handle
    handle.stop()


def describe(broker, group: str) -> dict:
    with RawClient(broker.port) as raw:
        return raw.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]


def assignments(broker, group: str) -> dict[str, set[int]]:
    described = describe(broker, group)
    return {m["member_id"]: {p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]}
            for m in described["members"]}


def listed(broker, group: str):
    with RawClient(broker.port) as raw:
        groups = raw.request(16, 5, {"states_filter": [], "types_filter": ["share"]})["groups"]
    return [g for g in groups if g["group_id"] == group]


def consumer(broker, group: str, topic: str):
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.subscribe([topic])
    return c


def poll_until(consumers, predicate, what):
    def step():
        for c in consumers:
            c.poll(0.2)  # drives the heartbeats (no records: nothing was produced)
        return predicate()
    wait_until(step, timeout=WAIT, what=what, interval=0)


def test_share_consumers_join_share_partitions_leave_and_the_group_is_deleted(broker):
    topic = f"share-{uuid.uuid4().hex[:8]}"
    group = f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    first = consumer(broker, group, topic)
    second = None
    try:
        poll_until([first], lambda: list(assignments(broker, group).values()) == [{0, 1}],
                   "the first member to get both partitions")
        described = describe(broker, group)
        assert described["error_code"] == 0 and described["group_state"] == "Stable"
        assert described["assignor_name"] == "simple"
        (member,) = described["members"]
        assert member["subscribed_topic_names"] == [topic]
        assert member["member_epoch"] == described["assignment_epoch"] == described["group_epoch"]
        assert [(g["group_state"], g["protocol_type"], g["group_type"]) for g in listed(broker, group)] == [
            ("Stable", "share", "share")]
        # minikafka's CLI describes and lists share groups of either broker.
        cli = mkjson(broker, "group", "describe", group)
        assert (cli["type"], cli["state"], [m["member_id"] for m in cli["members"]]) == (
            "share", "Stable", [member["member_id"]])
        assert {"group": group, "type": "share", "state": "Stable", "simple": False} in mkjson(broker, "group", "list")

        second = consumer(broker, group, topic)
        # Two members, two partitions: one each (a partition is shared only when members outnumber them).
        poll_until([first, second], lambda: sorted(map(sorted, assignments(broker, group).values())) == [[0], [1]],
                   "the two members to split the partitions")

        first.close()
        first = None
        poll_until([second], lambda: list(assignments(broker, group).values()) == [{0, 1}],
                   "the remaining member to get both partitions back")
    finally:
        for c in (first, second):
            if c is not None:
                c.close()
    wait_until(lambda: describe(broker, group)["group_state"] == "Empty", timeout=WAIT, what="the group to be empty")
    mk(broker, "group", "delete", group)  # DeleteGroups through the CLI's client (confluent-kafka)
    gone = describe(broker, group)
    assert gone["error_code"] == 69 and gone["error_message"] == f"Group {group} not found."


@pytest.mark.minikafka_only(reason="restarts the broker")
def test_a_share_group_survives_a_broker_restart(tmp_path):
    broker = start_broker(tmp_path, **SHARE_FAST)
    topic = f"share-{uuid.uuid4().hex[:8]}"
    group = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        create_topic(broker.bootstrap, topic, 1)
        member = consumer(broker, group, topic)
        try:
            poll_until([member], lambda: list(assignments(broker, group).values()) == [{0}],
                       "the member to get the partition")
            before = describe(broker, group)
            broker = broker.restart()
            # Replayed from __consumer_offsets: the same member, epochs and assignment.
            wait_until(lambda: describe(broker, group)["error_code"] == 0, timeout=WAIT, what="the group loaded")
            assert describe(broker, group) == before
            # The client carries on with its epoch on the restarted broker.
            poll_until([member], lambda: describe(broker, group)["members"][0]["member_id"]
                       == before["members"][0]["member_id"] and listed(broker, group), "the member to heartbeat")
        finally:
            member.close()
        wait_until(lambda: describe(broker, group)["group_state"] == "Empty", timeout=WAIT, what="the member to leave")
    finally:
        broker.stop()


@pytest.mark.minikafka_only(reason="minikafka's console, /metrics and control API")
def test_share_groups_in_the_console_metrics_and_control_api(tmp_path):
    import json
    import re
    import urllib.error
    import urllib.request

    broker = start_broker(tmp_path, http_port=0, http_control_enable="true",
                          group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
    http = "http://127.0.0.1:" + re.search(r"http on [^:\s]+:(\d+)", broker.read_log()).group(1)

    def get(path):
        try:
            with urllib.request.urlopen(http + path, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def post(path, body):
        req = urllib.request.Request(http + path, data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    topic = f"share-{uuid.uuid4().hex[:8]}"
    group = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        create_topic(broker.bootstrap, topic, 2)
        member = consumer(broker, group, topic)
        try:
            poll_until([member], lambda: list(assignments(broker, group).values()) == [{0, 1}], "the assignment")
            status, desc = post("/control/share.groups.describe", {"group": group})
            assert status == 200 and desc["state"] == "Stable" and desc["assignor"] == "simple"
            (m,) = desc["members"]
            assert m["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
            assert desc["initialized"] == [{"topic": topic, "partitions": [0, 1]}]
            status, api = get(f"/api/share-groups/{group}")
            assert status == 200 and json.loads(api)["members"][0]["member_id"] == m["member_id"]
            status, page = get("/share-groups")
            assert status == 200 and group in page
            status, page = get(f"/share-groups/{group}")
            assert status == 200 and m["member_id"] in page and "Stable" in page
            assert get("/share-groups/nope")[0] == 404
            status, groups_page = get("/groups")
            assert f'href="/share-groups/{group}"' in groups_page
            assert {"group": group, "type": "share", "state": "Stable", "simple": False} in mkjson(
                broker, "group", "list")
            cli = mkjson(broker, "group", "describe", group, "--http", http)
            assert (cli["type"], cli["state"], cli["assignor"]) == ("share", "Stable", "simple")
            assert cli["members"][0]["assignment"] == [{"topic": topic, "partition": 0},
                                                       {"topic": topic, "partition": 1}]
            assert cli["partitions"] == desc["partitions"]  # the share partitions' view, as the console's
            assert f"SHARE GROUP {group}  state=Stable" in mk(broker, "group", "describe", group).stdout
            status, metrics = get("/metrics")
            assert f'kafka_sharegroup_members{{sharegroup="{group}"}} 1.0' in metrics
            assert f'kafka_sharegroup_state{{sharegroup="{group}",state="Stable"}} 1.0' in metrics

            assert post("/control/share.groups.expire", {"group": group, "member_id": "nobody"})[0] == 404
            status, expired = post("/control/share.groups.expire", {"group": group, "member_id": m["member_id"]})
            assert status == 200 and expired == {"group": group, "expired": [m["member_id"]]}
            # Fenced: the member is gone (the client notices on its next heartbeat and joins again).
            after = post("/control/share.groups.describe", {"group": group})[1]
            assert after["group_epoch"] > desc["group_epoch"]
            assert all(x["member_epoch"] != m["member_epoch"] or x["member_id"] != m["member_id"]
                       for x in after["members"])
        finally:
            member.close()
    finally:
        broker.stop()


@pytest.mark.minikafka_only(reason="changes a cluster-wide feature level")
def test_share_version_0_turns_share_groups_off_and_1_on_again(tmp_path):
    broker = start_broker(tmp_path, **SHARE_FAST)
    try:
        create_topic(broker.bootstrap, "t", 1)
        join = {"group_id": "g", "member_id": "m-000000000000000000001", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["t"]}
        with RawClient(broker.port) as raw:
            raw.request(10, 3, {"key": "g", "key_type": 0})  # creates __consumer_offsets

            def finalized():
                body = raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
                return {f["name"]: f["max_version_level"] for f in body["finalized_features"]}

            assert finalized()["share.version"] == 1
            update = {"timeout_ms": 5000, "validate_only": False, "feature_updates": [
                {"feature": "share.version", "max_version_level": 0, "upgrade_type": 2}]}
            assert raw.request(57, 1, update)["error_code"] == 0
            assert "share.version" not in finalized()
            assert raw.request(76, 1, join)["error_code"] == 35  # UNSUPPORTED_VERSION
            described = raw.request(77, 1, {"group_ids": ["g"], "include_authorized_operations": False})
            assert described["groups"][0]["error_code"] == 35
            update["feature_updates"][0].update(max_version_level=1, upgrade_type=1)
            assert raw.request(57, 1, update)["error_code"] == 0
            answer = raw.request(76, 1, join)
            assert (answer["error_code"], answer["member_epoch"]) == (0, 1)
    finally:
        broker.stop()


@pytest.mark.minikafka_only(reason="minikafka's HTTP API (share partitions' counts) and control API")
def test_records_consumed_by_a_share_group_show_in_its_description_and_metrics(tmp_path):
    """End to end with the share partitions: records consumed and accepted move the share-partition
    start offset; a member expired through the control API leaves its acquired records available."""
    import json
    import re
    import urllib.request

    from confluent_kafka import Producer

    broker = start_broker(tmp_path, http_port=0, http_control_enable="true",
                          group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
    http = "http://127.0.0.1:" + re.search(r"http on [^:\s]+:(\d+)", broker.read_log()).group(1)

    def post(path, body):
        req = urllib.request.Request(http + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    topic = f"share-{uuid.uuid4().hex[:8]}"
    group = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        create_topic(broker.bootstrap, topic, 1)
        member = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                "share.acknowledgement.mode": "explicit"})
        member.subscribe([topic])
        try:
            poll_until([member], lambda: list(assignments(broker, group).values()) == [{0}], "the assignment")
            # share.auto.offset.reset is latest: produce once the share partition has started.
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            got = []

            def consumed():
                got.extend(m for m in member.poll(0.2) if m.error() is None)
                return len(got) >= 4

            for i in range(4):
                producer.produce(topic, value=b"v%d" % i, partition=0)
            producer.flush(10)
            wait_until(consumed, timeout=WAIT, what="four records", interval=0)
            for msg in got[:3]:
                member.acknowledge(msg)  # accept three, keep the fourth acquired
            member.commit_sync()

            def partition():
                rows = post("/control/share.groups.describe", {"group": group})["partitions"]
                return rows[0] if rows else {}
            wait_until(lambda: partition().get("start_offset") == 3 and partition().get("acquired") == 1,
                       timeout=WAIT, what="three accepted, one acquired")
            row = partition()
            assert (row["in_flight"], row["archived"], row["lag"]) == (1, 0, 1)
            text = urllib.request.urlopen(http + "/metrics", timeout=10).read().decode()
            labels = f'sharegroup="{group}",topic="{topic}"'
            assert f'kafka_sharegroup_records_in_flight{{partition="0",{labels}}} 1.0' in text
            assert f'kafka_sharegroup_start_offset{{partition="0",{labels}}} 3.0' in text
            # Expiring the member releases what it holds: the fourth record is available again.
            (m,) = post("/control/share.groups.describe", {"group": group})["members"]
            post("/control/share.groups.expire", {"group": group, "member_id": m["member_id"]})
            wait_until(lambda: partition().get("acquired") == 0, timeout=5, what="the record released")
        finally:
            member.close()
    finally:
        broker.stop()
