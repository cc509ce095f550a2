"""kafka-python 3.0.12's admin client against the Kafka 4.x admin APIs of issue 14, on one
shared broker; and kafka-python's version inference, which must take us for Kafka 4.0."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from conftest import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "asserts minikafka's own identity and a broker-wide "
        "max.request.partition.size.limit=4 on a broker of its own"))]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("admin-kafka4"), max_request_partition_size_limit=4)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    client.create_topics([NewTopic("k4-a", 3, 1), NewTopic("k4-b", 3, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(20):
        producer.send("k4-a", b"x" * 1000, partition=1)
    producer.flush(10)
    producer.close()
    yield client
    client.close()


def test_kafka_python_infers_kafka_4_2(broker, admin):
    # Issue 20: the same ApiVersions answer as Kafka 4.2 (ListOffsets 11 is what tells 4.2 apart).
    assert admin.get_broker_version_data(1).broker_version == (4, 2)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.config["api_version"] in (None, (4, 2))
        assert consumer._client.get_broker_version_data(1).broker_version == (4, 2) if hasattr(
            consumer._client, "get_broker_version_data") else True
    finally:
        consumer.close()


def test_describe_log_dirs_and_alter_replica_log_dirs(broker, admin):
    [entry] = admin.describe_log_dirs({"k4-a": [0, 1]})
    [log_dir] = entry["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0
    sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[1] > 20_000 and sizes[0] == 0
    from kafka.structs import TopicPartitionReplica
    import kafka.errors as Errors

    result = admin.alter_replica_log_dirs({
        TopicPartitionReplica("k4-a", 0, 1): log_dir["log_dir"],
        TopicPartitionReplica("k4-b", 0, 1): "/not/a/configured/dir"})
    assert result[TopicPartitionReplica("k4-a", 0, 1)] is Errors.NoError
    assert result[TopicPartitionReplica("k4-b", 0, 1)] is Errors.LogDirNotFoundError


def test_elect_leaders_is_not_needed(admin):
    import kafka.errors as Errors

    response = admin.elect_leaders(0, {"k4-a": [0, 1]})  # ELECTION_NOT_NEEDED is not an error
    codes = [p.error_code for r in response.replica_election_results for p in r.partition_result]
    assert codes == [84, 84]
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.elect_leaders(0, {"k4-none": [0]})


def test_partition_reassignments(admin):
    import kafka.errors as Errors

    result = admin.alter_partition_reassignments({TopicPartition("k4-a", 0): [1],
                                                  TopicPartition("k4-a", 1): [2]})
    assert result[TopicPartition("k4-a", 0)] is None  # accepted
    assert result[TopicPartition("k4-a", 1)] is Errors.InvalidReplicationAssignmentError
    assert admin.list_partition_reassignments() == {}


def test_describe_topic_partitions_pages(admin):
    response = admin.describe_topic_partitions(["k4-a", "k4-b"], response_partition_limit=100)
    topics = response["topics"]
    # the broker's limit is 4 partitions: the first page ends inside k4-b
    assert [(t["name"], len(t["partitions"])) for t in topics] == [("k4-a", 3), ("k4-b", 1)]
    cursor = response["next_cursor"]
    assert cursor == {"topic_name": "k4-b", "partition_index": 1}
    rest = admin.describe_topic_partitions(["k4-a", "k4-b"], cursor=cursor)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in rest["topics"]] == [
        ("k4-b", [1, 2])]
    assert rest["next_cursor"] is None


def test_describe_metadata_quorum(admin):
    quorum = admin.describe_metadata_quorum()
    [partition] = quorum["topics"][0]["partitions"]
    assert partition["leader_id"] == 1 and partition["error"] is None
    assert [v["replica_id"] for v in partition["current_voters"]] == [1]


def test_features(admin):
    import kafka.errors as Errors

    features = admin.describe_features()
    assert features["metadata.version"]["finalized"] == (29, 29)  # as Kafka 4.2.2
    assert features["transaction.version"]["supported"] == (0, 2)
    assert features["transaction.version"]["finalized"] == (2, 2)  # transactions V2, as Kafka 4.2
    with pytest.raises(Errors.InvalidUpdateVersionError):
        admin.update_features({"transaction.version": 3})


def test_describe_cluster_and_groups_v6(admin):
    assert admin.describe_cluster()["controller_id"] == 1
    described = admin.describe_groups(["k4-no-such-group"])  # v6: GROUP_ID_NOT_FOUND, not Dead
    assert "GroupIdNotFoundError" in described["k4-no-such-group"]["error"]
