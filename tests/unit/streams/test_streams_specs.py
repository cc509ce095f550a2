"""The streams-group specs (protocol/schemas/StreamsGroup*.json) byte for byte against Apache Kafka 4.2.2.

The hex strings are what Kafka 4.2.2's generated message classes (kafka-clients and
kafka-group-coordinator 4.2.2) wrote for the same values, version 0: StreamsGroupHeartbeat request and
response, StreamsGroupDescribe response and the record values/keys the coordinator keeps in
``__consumer_offsets`` (tagged fields included: ValidatedTopologyEpoch/LastAssignmentConfigs and the
per-partition AssignmentEpochs of active tasks).  Both directions are checked: our encoding equals
Kafka's bytes, and decoding Kafka's bytes gives the values back.
"""

from __future__ import annotations

import pytest

from minikafka.protocol import codec

N = None

CASES = [
    ("StreamsGroupMetadataValue", 0, {
        "epoch": 5, "metadata_hash": 7, "validated_topology_epoch": 3,
        "last_assignment_configs": [{"key": "num.standby.replicas", "value": "0"}]},
     "00000005000000000000000702000400000003011902156e756d2e7374616e6462792e7265706c69636173023000"),
    ("StreamsGroupCurrentMemberAssignmentValue", 0, {
        "member_epoch": 4, "previous_member_epoch": 2, "state": 1,
        "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1], "assignment_epochs": [2, 4]}],
        "standby_tasks": [], "warmup_tasks": [], "active_tasks_pending_revocation": [],
        "standby_tasks_pending_revocation": [], "warmup_tasks_pending_revocation": []},
     "000000040000000201020230030000000000000001010009030000000200000004010101010100"),
    ("StreamsGroupMemberMetadataValue", 0, {
        "instance_id": "", "rack_id": "", "client_id": "c", "client_host": "/h", "rebalance_timeout_ms": 300000,
        "topology_epoch": 0, "process_id": "p", "user_endpoint": {"host": "h", "port": 8080},
        "client_tags": [{"key": "k", "value": "v"}]},
     "01010263032f68000493e00000000002700102681f900002026b02760000"),
    ("StreamsGroupTopologyValue", 0, {
        "epoch": 1, "subtopologies": [{"subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
                                       "state_changelog_topics": [], "repartition_sink_topics": [],
                                       "repartition_source_topics": [{"name": "r", "partitions": 2,
                                                                      "replication_factor": 0, "topic_configs": [
                                                                          {"key": "k", "value": "v"}]}],
                                       "copartition_groups": []}]},
     "000000010202300203696e01010102027200000002000002026b02760000010000"),
    ("StreamsGroupTargetAssignmentMemberValue", 0, {
        "active_tasks": [{"subtopology_id": "0", "partitions": [1, 2]}], "standby_tasks": [], "warmup_tasks": []},
     "02023003000000010000000200010100"),
    ("StreamsGroupMemberMetadataKey", 19, {"group_id": "g", "member_id": "m"}, "00016700016d"),
    ("StreamsGroupHeartbeatRequest", 0, {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "endpoint_information_epoch": 0, "instance_id": N,
        "rack_id": N, "rebalance_timeout_ms": 1000,
        "topology": {"epoch": 0, "subtopologies": [{
            "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
            "state_changelog_topics": [{"name": "c", "partitions": 0, "replication_factor": 0,
                                        "topic_configs": [{"key": "k", "value": "v"}]}],
            "repartition_sink_topics": [], "repartition_source_topics": [],
            "copartition_groups": [{"source_topics": [0], "source_topic_regex": [], "repartition_source_topics": []}]}]},
        "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "p",
        "user_endpoint": {"host": "h", "port": 9}, "client_tags": [], "task_offsets": N, "task_end_offsets": N,
        "shutdown_application": False},
     "0267026d00000000000000000000000003e801000000000202300203696e0102026300000000000002026b02760000010102020000"
     "010100000001010102700102680009000100000000"),
    ("StreamsGroupHeartbeatResponse", 0, {
        "throttle_time_ms": 0, "error_code": 0, "error_message": N, "member_id": "m", "member_epoch": 3,
        "heartbeat_interval_ms": 5000, "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0,
        "status": [{"status_code": 3, "status_detail": "d"}],
        "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1]}], "standby_tasks": [], "warmup_tasks": [],
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": [{"user_endpoint": {"host": "h", "port": 9},
                                         "active_partitions": [{"topic": "in", "partitions": [1]}],
                                         "standby_partitions": []}]},
     "00000000000000026d000000030000138800000000000000000203026400020230030000000000000001000101000000000202680009"
     "000203696e020000000100010000"),
    ("StreamsGroupDescribeResponse", 0, {
        "throttle_time_ms": 0, "groups": [{
            "error_code": 0, "error_message": N, "group_id": "g", "group_state": "Stable", "group_epoch": 3,
            "assignment_epoch": 3,
            "topology": {"epoch": 0, "subtopologies": [{"subtopology_id": "0", "source_topics": ["in"],
                                                        "repartition_sink_topics": [], "state_changelog_topics": [],
                                                        "repartition_source_topics": []}]},
            "members": [{"member_id": "m", "member_epoch": 3, "instance_id": N, "rack_id": N, "client_id": "c",
                         "client_host": "/h", "topology_epoch": 0, "process_id": "p", "user_endpoint": N,
                         "client_tags": [], "task_offsets": [], "task_end_offsets": [],
                         "assignment": {"active_tasks": [{"subtopology_id": "0", "partitions": [0]}],
                                        "standby_tasks": [], "warmup_tasks": []},
                         "target_assignment": {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []},
                         "is_classic": False}],
            "authorized_operations": -2147483648}]},
     "0000000002000000026707537461626c65000000030000000301000000000202300203696e010101000002026d00000003000002630"
     "32f68000000000270ff010101020230020000000000010100010101000000800000000000"),
]


@pytest.mark.parametrize("name,version,values,kafka_hex", CASES, ids=[c[0] for c in CASES])
def test_same_bytes_as_kafka_4_2(name, version, values, kafka_hex):
    assert bytes(codec.encode_data(name, version, values)).hex() == kafka_hex
    decoded, end = codec.decode_data(name, version, bytes.fromhex(kafka_hex), 0)
    assert end == len(kafka_hex) // 2
    assert codec.encode_data(name, version, decoded) == codec.encode_data(name, version, values)
