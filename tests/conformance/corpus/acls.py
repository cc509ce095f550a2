"""ACL denials with an authorizer configured (profile "acl": StandardAuthorizer on both brokers,
allow.everyone.if.no.acl.found=true; PLAINTEXT clients are User:ANONYMOUS)."""

from __future__ import annotations

from ..engine import scenario
from .common import batch, create_topic, find_coordinator, ok, scoped_names

TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
LITERAL, PREFIXED, MATCH = 3, 4, 2
ALL, READ, WRITE, CREATE, DELETE, DESCRIBE = 2, 3, 4, 5, 6, 8
DENY, ALLOW = 2, 3
ANON = "User:ANONYMOUS"


def _binding(rtype, name, pattern, operation, permission=DENY, principal=ANON):
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


@scenario(profile="acl")
def acl_denials(ctx):
    denied = ctx.name("denied")          # topics under this prefix: every operation denied
    allowed = ctx.name("open")
    dgroup = ctx.name("dgroup")          # groups under this prefix: denied
    dtx = ctx.name("dtx")                # transactional ids under this prefix: denied
    topic = f"{denied}-t"
    topic_id = create_topic(ctx, topic)  # exists before the ACL
    create_topic(ctx, allowed)
    create_topic(ctx, f"{allowed}-nodelete")
    for v in ctx.versions(20):
        create_topic(ctx, f"{allowed}-victim{v}")
    find_coordinator(ctx, ctx.name("g"))
    out = ctx.call(30, 3, {"creations": [_binding(TOPIC, denied, PREFIXED, ALL),
                                         _binding(GROUP, dgroup, PREFIXED, ALL),
                                         _binding(TXN_ID, dtx, PREFIXED, ALL),
                                         _binding(TOPIC, allowed, LITERAL, WRITE, ALLOW, "User:alice"),
                                         # No ACL on the cluster: one would end allow.everyone for it,
                                         # and Kafka's own broker-to-controller requests (ANONYMOUS too).
                                         _binding(TOPIC, f"{allowed}-nodelete", LITERAL, DELETE)]},
                   label="create deny ACLs")
    assert out.kind == "response"
    # ACLs reach Kafka's authorizer through its metadata log: wait until the denial is visible.
    ctx.setup(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False},
              expect=lambda o: ok(o) and o["topics"][0]["error_code"] == 29, retries=80)
    for v in ctx.versions(29):
        ctx.call(29, v, {"resource_type_filter": TOPIC, "resource_name_filter": denied, "pattern_type_filter": MATCH
                         if v >= 1 else LITERAL, "principal_filter": None, "host_filter": None,
                         "operation": 1, "permission_type": 1}, label="describe ACLs matching the prefix")
    for v in ctx.versions(3, lo=1):
        ctx.call(3, v, {"topics": [{"name": topic, "topic_id": None}, {"name": f"{denied}-absent", "topic_id": None},
                                   {"name": allowed, "topic_id": None}],
                        "allow_auto_topic_creation": True, "include_topic_authorized_operations": v >= 8,
                        "include_cluster_authorized_operations": 8 <= v <= 10},
                 label="denied, denied and absent, allowed")
    for v in ctx.versions(3, lo=10):
        ctx.call(3, v, {"topics": [{"name": None, "topic_id": topic_id}], "allow_auto_topic_creation": False},
                 label="denied by topic id")
    body = lambda t: {"transactional_id": None, "acks": -1, "timeout_ms": 5000,  # noqa: E731
                      "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": batch(b"x")}]}]}
    for v in ctx.versions(0, lo=3):
        ctx.call(0, v, body(topic), label="produce denied")
    for v in ctx.versions(1):
        ctx.call(1, v, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                        "forgotten_topics_data": [], "rack_id": ""}, label="fetch denied")
    for v in ctx.versions(2):
        ctx.call(2, v, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
            label="list offsets denied")
    for v in ctx.versions(19):
        ctx.call(19, v, {"topics": [{"name": f"{denied}-new{v}", "num_partitions": 1, "replication_factor": 1}],
                         "timeout_ms": 5000}, label="create denied")
    for v in ctx.versions(32):
        ctx.call(32, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
                         "include_synonyms": False}, label="describe configs denied")
    for v in ctx.versions(44):
        ctx.call(44, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
            label="alter configs denied")
    for v in ctx.versions(37):
        ctx.call(37, v, {"topics": [{"name": topic, "count": 3, "assignments": None}], "timeout_ms": 5000,
                         "validate_only": True}, label="create partitions denied")
    for v in ctx.versions(21):
        ctx.call(21, v, {"timeout_ms": 5000, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 0}]}]}, label="delete records denied")
    # Groups and transactional ids.
    for v in ctx.versions(10):
        ctx.call(10, v, {"key": f"{dgroup}-1", "key_type": 0, "coordinator_keys": [f"{dgroup}-1"]},
                 label="find coordinator, denied group")
        if v >= 1:
            ctx.call(10, v, {"key": f"{dtx}-1", "key_type": 1, "coordinator_keys": [f"{dtx}-1"]},
                     label="find coordinator, denied transactional id")
    for v in ctx.versions(11):
        ctx.call(11, v, {"group_id": f"{dgroup}-1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                         "member_id": "", "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": b""}]}, label="join denied group")
    for v in ctx.versions(8):
        ctx.call(8, v, {"group_id": f"{dgroup}-1", "generation_id_or_member_epoch": -1, "member_id": "",
                        "topics": [{"name": allowed, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                     "committed_leader_epoch": -1,
                                                                     "committed_metadata": ""}]}]},
                 label="commit to denied group")
        ctx.call(8, v, {"group_id": ctx.name("g"), "generation_id_or_member_epoch": -1, "member_id": "",
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": ""}]}]},
                 label="commit for denied topic")
    for v in ctx.versions(9):
        ctx.call(9, v, {"group_id": f"{dgroup}-1", "topics": [{"name": allowed, "partition_indexes": [0]}],
                        "groups": [{"group_id": f"{dgroup}-1", "topics": [{"name": allowed, "partition_indexes": [0]}]}]},
                 label="fetch offsets of denied group")
    for v in ctx.versions(15):
        ctx.call(15, v, {"groups": [f"{dgroup}-1"], "include_authorized_operations": v >= 3},
                 label="describe denied group")
    for v in ctx.versions(42):
        ctx.call(42, v, {"groups_names": [f"{dgroup}-1"]}, label="delete denied group")
    for v in ctx.versions(22):
        ctx.call(22, v, {"transactional_id": f"{dtx}-1", "transaction_timeout_ms": 60000},
                 label="init producer id, denied transactional id")
    for v in ctx.versions(60):
        ctx.call(60, v, {"include_cluster_authorized_operations": True, "endpoint_type": 1},
                 label="cluster operations with an authorizer")
    for v in ctx.versions(31):
        ctx.call(31, v, {"filters": [{"resource_type_filter": TOPIC, "resource_name_filter": f"{denied}-nothing",
                                      "pattern_type_filter": LITERAL, "principal_filter": None, "host_filter": None,
                                      "operation": 1, "permission_type": 1}]}, label="delete ACLs matching nothing")
    ctx.call(16, 5, {"states_filter": [], "types_filter": []}, label="list groups (scoped)",
             scoped=scoped_names(ctx.prefix))
    # Kafka's controller authorizes deletions with its own copy of the ACLs: wait until it has them.
    ctx.setup(37, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}], "timeout_ms": 5000,
                      "validate_only": True},
              expect=lambda o: ok(o) and o["results"][0]["error_code"] == 29, retries=80)
    for v in ctx.versions(20):
        names = [f"{allowed}-victim{v}", f"{allowed}-nodelete"]
        ctx.call(20, v, {"topic_names": names, "topics": [{"name": n, "topic_id": None} for n in names],
                         "timeout_ms": 5000}, label="delete allowed, delete denied on the topic (DELETE on the cluster allows both)")
    for v in ctx.versions(20):
        ctx.call(20, v, {"topic_names": [topic], "topics": [{"name": topic, "topic_id": None}], "timeout_ms": 5000},
                 label="delete denied")

