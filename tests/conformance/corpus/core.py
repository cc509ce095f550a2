"""ApiVersions, Metadata, topics, Produce/Fetch/ListOffsets, configs, unsupported versions."""

from __future__ import annotations

import struct

from minikafka.protocol import codec

from ..engine import scenario
from .common import TS, batch, chain, create_topic, ok, produce, scoped_names, sort_by

# --- ApiVersions ------------------------------------------------------------------------------


@scenario
def api_versions(ctx):
    for v in ctx.versions(18):
        ctx.call(18, v, {"client_software_name": "conformance", "client_software_version": "1.0"}, label="valid")
    for v in ctx.versions(18, lo=3):
        # KIP-511: the software name and version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
        ctx.call(18, v, {"client_software_name": "bad name!", "client_software_version": "1.0"},
                 label="invalid software name", conn=f"bad{v}")
    # A version beyond every broker's: error 35 with the served range, as a v0 body.
    ctx.call(18, 9, {"client_software_name": "conformance", "client_software_version": "1.0"},
             label="unsupported version 9", conn="v9")


# --- Metadata ---------------------------------------------------------------------------------


@scenario
def metadata_topics(ctx):
    topic = ctx.name("m")
    create_topic(ctx, topic, partitions=3)
    for v in ctx.versions(3):
        ctx.call(3, v, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False}, label="existing topic")
    for v in ctx.versions(3, lo=8):
        ctx.call(3, v, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                        "include_cluster_authorized_operations": v <= 10,
                        "include_topic_authorized_operations": True}, label="authorized operations")
    for v in ctx.versions(3, lo=4):
        ctx.call(3, v, {"topics": [{"name": ctx.name(f"missing{v}"), "topic_id": None}],
                        "allow_auto_topic_creation": False}, label="unknown topic, no auto-create")
    for v in ctx.versions(3, lo=1):
        ctx.call(3, v, {"topics": [{"name": "bad/name", "topic_id": None}, {"name": "", "topic_id": None}],
                        "allow_auto_topic_creation": False}, label="invalid topic names")
    for v in ctx.versions(3, lo=1):
        ctx.call(3, v, {"topics": None, "allow_auto_topic_creation": False}, label="all topics (scoped)",
                 scoped=chain(scoped_names(ctx.prefix), sort_by("name")))


@scenario
def metadata_auto_create(ctx):
    for v in ctx.versions(3, lo=4, hi=12):
        ctx.call(3, v, {"topics": [{"name": ctx.name(f"auto{v}"), "topic_id": None}],
                        "allow_auto_topic_creation": True}, label="auto-create")


@scenario
def metadata_by_topic_id(ctx):
    topic = ctx.name("byid")
    topic_id = create_topic(ctx, topic)
    import uuid
    for v in ctx.versions(3, lo=10):
        ctx.call(3, v, {"topics": [{"name": None, "topic_id": topic_id}], "allow_auto_topic_creation": False},
                 label="by topic id")
        ctx.call(3, v, {"topics": [{"name": None, "topic_id": uuid.UUID(int=12345)}],
                        "allow_auto_topic_creation": False}, label="unknown topic id")


# --- CreateTopics / DeleteTopics / CreatePartitions ---------------------------------------------


@scenario
def create_topics(ctx):
    for v in ctx.versions(19):
        n = lambda s: ctx.name(f"v{v}-{s}")  # noqa: E731
        topics = [
            {"name": n("ok"), "num_partitions": 2, "replication_factor": 1,
             "configs": [{"name": "cleanup.policy", "value": "compact"},
                         {"name": "retention.ms", "value": "3600000"}]},
            {"name": n("zero-partitions"), "num_partitions": 0, "replication_factor": 1},
            {"name": n("rf3"), "num_partitions": 1, "replication_factor": 3},
            {"name": n("bad-config"), "num_partitions": 1, "replication_factor": 1,
             "configs": [{"name": "no.such.config", "value": "1"}]},
            {"name": n("bad-value"), "num_partitions": 1, "replication_factor": 1,
             "configs": [{"name": "retention.ms", "value": "soon"}]},
            {"name": "bad/name" + str(v), "num_partitions": 1, "replication_factor": 1},
            {"name": "x" * 250, "num_partitions": 1, "replication_factor": 1},
            {"name": n("assign"), "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}]},
            {"name": n("bad-assign"), "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [7]}]},
        ]
        if v >= 4:
            topics.append({"name": n("defaults"), "num_partitions": -1, "replication_factor": -1})
        ctx.call(19, v, {"topics": topics, "timeout_ms": 30000}, label="mixed")
        ctx.call(19, v, {"topics": [topics[0]], "timeout_ms": 30000}, label="already exists")
        ctx.call(19, v, {"topics": [{"name": n("validate"), "num_partitions": 1, "replication_factor": 1}],
                         "timeout_ms": 30000, "validate_only": True}, label="validate only")
        ctx.call(19, v, {"topics": [{"name": n("dup"), "num_partitions": 1, "replication_factor": 1},
                                    {"name": n("dup"), "num_partitions": 1, "replication_factor": 1}],
                         "timeout_ms": 30000}, label="duplicate in request")


def _by_error(body):
    """Results Kafka builds from a hash map and that have no name to key them by: sort by error."""
    return dict(body, responses=sorted(body["responses"], key=lambda r: r["error_code"]))


@scenario
def delete_topics(ctx):
    import uuid
    for v in ctx.versions(20):
        topic = ctx.name(f"d{v}")
        topic_id = create_topic(ctx, topic)
        body = {"topic_names": [topic, ctx.name(f"absent{v}")],
                "topics": [{"name": topic, "topic_id": None}, {"name": ctx.name(f"absent{v}"), "topic_id": None}],
                "timeout_ms": 30000}
        ctx.call(20, v, body, label="existing and unknown")
        if v >= 6:
            topic2 = ctx.name(f"d{v}b")
            tid2 = create_topic(ctx, topic2)
            ctx.call(20, v, {"topics": [{"name": None, "topic_id": tid2},
                                        {"name": None, "topic_id": uuid.UUID(int=99)}], "timeout_ms": 30000},
                     label="by topic id", scoped=_by_error)
        del topic_id


@scenario
def create_partitions(ctx):
    for v in ctx.versions(37):
        topic = ctx.name(f"p{v}")
        create_topic(ctx, topic, partitions=2)
        ctx.call(37, v, {"topics": [{"name": topic, "count": 4, "assignments": None},
                                    {"name": ctx.name(f"absent{v}"), "count": 2, "assignments": None}],
                         "timeout_ms": 30000, "validate_only": False}, label="grow and unknown")
        ctx.call(37, v, {"topics": [{"name": topic, "count": 3, "assignments": None}],
                         "timeout_ms": 30000, "validate_only": False}, label="shrink")
        ctx.call(37, v, {"topics": [{"name": topic, "count": 6, "assignments": [{"broker_ids": [1]}]}],
                         "timeout_ms": 30000, "validate_only": True}, label="wrong assignment count")
        ctx.call(37, v, {"topics": [{"name": topic, "count": 5, "assignments": None}],
                         "timeout_ms": 30000, "validate_only": True}, label="validate only")


# --- Produce / Fetch / ListOffsets -------------------------------------------------------------


def _produce_body(topic, partition, records, acks=-1, tid=None):
    return {"transactional_id": tid, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


@scenario
def produce_paths(ctx):
    topic = ctx.name("p")
    create_topic(ctx, topic, partitions=2)
    small = create_topic(ctx, ctx.name("small"), configs={"max.message.bytes": "200"})
    del small
    for v in ctx.versions(0):
        ctx.call(0, v, _produce_body(topic, 0, batch(b"a", b"b")), label="two records")
        ctx.call(0, v, _produce_body(topic, 9, batch(b"a")), label="unknown partition")
        ctx.call(0, v, _produce_body(ctx.name("absent"), 0, batch(b"a")), label="unknown topic")
        ctx.call(0, v, _produce_body(topic, 1, batch(b"a"), acks=2), label="acks=2", conn=f"acks{v}")
        ctx.call(0, v, _produce_body(topic, 1, batch(b"a"), acks=1), label="acks=1")
        ctx.call(0, v, _produce_body(ctx.name("small"), 0, batch(b"x" * 400)), label="message too large")
        ctx.call(0, v, _produce_body(topic, 1, b""), label="empty records")
        ctx.call(0, v, _produce_body("bad/name", 0, batch(b"a")), label="invalid topic name")


@scenario
def produce_idempotent(ctx):
    topic = ctx.name("idem")
    create_topic(ctx, topic)
    for v in ctx.versions(0, lo=3):
        out = ctx.setup(22, 0, {"transactional_id": None, "transaction_timeout_ms": 60000},
                        expect=lambda o: ok(o) and o["error_code"] == 0, retries=20)
        pid, epoch = out["producer_id"], out["producer_epoch"]
        seq = lambda s: batch(b"i", producer_id=pid, producer_epoch=epoch, base_sequence=s)  # noqa: E731
        ctx.call(0, v, _produce_body(topic, 0, seq(0)), label="seq 0")
        ctx.call(0, v, _produce_body(topic, 0, seq(0)), label="duplicate seq 0")
        ctx.call(0, v, _produce_body(topic, 0, seq(5)), label="sequence gap")
        ctx.call(0, v, _produce_body(topic, 0, batch(b"i", producer_id=pid, producer_epoch=epoch + 3,
                                                     base_sequence=7)), label="new epoch, sequence 7")
        ctx.call(0, v, _produce_body(topic, 0, batch(b"i", producer_id=pid, producer_epoch=epoch,
                                                     base_sequence=1)), label="old epoch")
        ctx.call(0, v, _produce_body(topic, 0, batch(b"i", producer_id=987654321, producer_epoch=0,
                                                     base_sequence=3)), label="unknown producer, sequence 3")


def _fetch_body(topic, topic_id, partition, offset, *, isolation=0, max_bytes=1 << 20, session_epoch=-1):
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
            "isolation_level": isolation, "session_id": 0, "session_epoch": session_epoch,
            "topics": [{"topic": topic, "topic_id": topic_id,
                        "partitions": [{"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                                        "last_fetched_epoch": -1, "log_start_offset": -1,
                                        "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


@scenario
def fetch_paths(ctx):
    import uuid
    topic = ctx.name("f")
    topic_id = create_topic(ctx, topic, partitions=2)
    produce(ctx, topic, 0, batch(b"one", b"two"))
    produce(ctx, topic, 0, batch(b"three"))
    for v in ctx.versions(1):
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 0), label="from 0")
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 2), label="from 2")
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 3), label="at end")
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 100), label="out of range")
        ctx.call(1, v, _fetch_body(topic, topic_id, 7, 0), label="unknown partition")
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 0, max_bytes=10), label="partition max bytes 10")
        ctx.call(1, v, _fetch_body(topic, topic_id, 0, 0, isolation=1), label="read committed")
        if v >= 13:
            ctx.call(1, v, _fetch_body(topic, uuid.UUID(int=4242), 0, 0), label="unknown topic id")
        else:
            ctx.call(1, v, _fetch_body(ctx.name("absent"), None, 0, 0), label="unknown topic")


@scenario
def fetch_sessions(ctx):
    topic = ctx.name("s")
    topic_id = create_topic(ctx, topic)
    produce(ctx, topic, 0, batch(b"s"))
    for v in ctx.versions(1, lo=7):
        conn = f"s{v}"
        first = ctx.call(1, v, _fetch_body(topic, topic_id, 0, 0, session_epoch=0), label="open session", conn=conn)
        sid = first.get("session_id", 0)
        body = _fetch_body(topic, topic_id, 0, 1, session_epoch=1)
        body["session_id"] = sid
        ctx.call(1, v, body, label="incremental epoch 1", conn=conn)
        body = _fetch_body(topic, topic_id, 0, 1, session_epoch=5)
        body["session_id"] = sid
        ctx.call(1, v, body, label="wrong epoch", conn=conn)
        body = _fetch_body(topic, topic_id, 0, 1, session_epoch=1)
        body["session_id"] = 123456789
        ctx.call(1, v, body, label="unknown session", conn=conn)


@scenario
def list_offsets(ctx):
    topic = ctx.name("lo")
    create_topic(ctx, topic, partitions=2)
    produce(ctx, topic, 0, batch(b"a", b"b", b"c"))
    produce(ctx, topic, 0, batch(b"d", ts=TS + 1000))
    for v in ctx.versions(2):
        parts = [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": t, "max_num_offsets": 1}
                 for t in (-2, -1, TS + 1, TS + 500, TS + 5000)]
        if v >= 7:
            parts.append({"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3, "max_num_offsets": 1})
        if v >= 8:
            parts.append({"partition_index": 0, "current_leader_epoch": -1, "timestamp": -4, "max_num_offsets": 1})
        for p in parts:
            ctx.call(2, v, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                            "topics": [{"name": topic, "partitions": [p]}]}, label=f"timestamp {p['timestamp'] - TS if p['timestamp'] > 0 else p['timestamp']}")
        ctx.call(2, v, {"replica_id": -1, "isolation_level": 1, "timeout_ms": 1000,
                        "topics": [{"name": topic, "partitions": [
                            {"partition_index": 1, "current_leader_epoch": -1, "timestamp": -1},
                            {"partition_index": 5, "current_leader_epoch": -1, "timestamp": -1}]},
                                   {"name": ctx.name("absent"), "partitions": [
                                       {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
                 label="unknown partition and topic")
        if v >= 4:
            ctx.call(2, v, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                            "topics": [{"name": topic, "partitions": [
                                {"partition_index": 0, "current_leader_epoch": 5, "timestamp": -1}]}]},
                     label="future leader epoch")


@scenario
def delete_records(ctx):
    topic = ctx.name("dr")
    for v in ctx.versions(21):
        t = f"{topic}{v}"
        create_topic(ctx, t)
        produce(ctx, t, 0, batch(b"a", b"b", b"c"))
        ctx.call(21, v, {"timeout_ms": 5000, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "offset": 2},
                                       {"partition_index": 3, "offset": 0}]},
            {"name": ctx.name("absent"), "partitions": [{"partition_index": 0, "offset": 0}]}]},
            label="truncate, unknown partition and topic")
        ctx.call(21, v, {"timeout_ms": 5000, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "offset": 10}]}]}, label="beyond high watermark")
        ctx.call(21, v, {"timeout_ms": 5000, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "offset": -1}]}]}, label="to high watermark")


@scenario
def offset_for_leader_epoch(ctx):
    topic = ctx.name("ofle")
    create_topic(ctx, topic)
    produce(ctx, topic, 0, batch(b"a"))
    for v in ctx.versions(23):
        ctx.call(23, v, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0},
                {"partition": 4, "current_leader_epoch": -1, "leader_epoch": 0}]},
            {"topic": ctx.name("absent"), "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
            label="epochs")


# --- Configs ------------------------------------------------------------------------------------


@scenario
def describe_configs_topic(ctx):
    topic = ctx.name("c")
    create_topic(ctx, topic, configs={"retention.ms": "7200000", "cleanup.policy": "compact"})
    for v in ctx.versions(32):
        for synonyms in (False, True):
            for docs in ((False, True) if v >= 3 else (False,)):
                ctx.call(32, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
                                 "include_synonyms": synonyms, "include_documentation": docs},
                         label=f"topic, synonyms={synonyms}, documentation={docs}", scoped=sort_by("name"))
        ctx.call(32, v, {"resources": [{"resource_type": 2, "resource_name": topic,
                                        "configuration_keys": ["retention.ms", "segment.bytes", "no.such.key"]}],
                         "include_synonyms": True, "include_documentation": False}, label="topic, some keys")
        ctx.call(32, v, {"resources": [{"resource_type": 2, "resource_name": ctx.name("absent"),
                                        "configuration_keys": None},
                                       {"resource_type": 2, "resource_name": "", "configuration_keys": None}],
                         "include_synonyms": False, "include_documentation": False}, label="unknown and empty topic")
        ctx.call(32, v, {"resources": [{"resource_type": 4, "resource_name": "1",
                                        "configuration_keys": ["num.partitions", "log.retention.hours",
                                                               "message.max.bytes", "auto.create.topics.enable",
                                                               "offsets.topic.num.partitions"]}],
                         "include_synonyms": True, "include_documentation": v >= 3}, label="broker, some keys")
        ctx.call(32, v, {"resources": [{"resource_type": 4, "resource_name": "7", "configuration_keys": None},
                                       {"resource_type": 4, "resource_name": "x", "configuration_keys": None},
                                       {"resource_type": 9, "resource_name": "1", "configuration_keys": None}],
                         "include_synonyms": False, "include_documentation": False}, label="bad broker ids, bad type")


def _await_config(ctx, topic, name, value):
    """Kafka applies a config change when its broker replays the controller's record, a moment
    after the answer: wait (bounded) until DescribeConfigs shows it, then compare."""
    def shows(o):
        return ok(o) and any(c["name"] == name and c["value"] == value for c in o["results"][0]["configs"])
    try:
        ctx.setup(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": [name]}]},
                  expect=shows, retries=30)
    except Exception:
        pass  # the change may legitimately not apply; the comparison shows it


@scenario
def alter_configs(ctx):
    for v in ctx.versions(44):
        topic = ctx.name(f"ia{v}")
        create_topic(ctx, topic)
        ctx.call(44, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"},
            {"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]}], "validate_only": False},
            label="set and append")
        _await_config(ctx, topic, "retention.ms", "1000")
        ctx.call(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                        "configuration_keys": ["retention.ms", "cleanup.policy"]}],
                         "include_synonyms": True}, label=f"after IncrementalAlterConfigs v{v}")
        ctx.call(44, v, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "no.such.config", "config_operation": 0, "value": "1"}]},
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "soon"}]},
            {"resource_type": 2, "resource_name": ctx.name("absent"), "configs": [
                {"name": "retention.ms", "config_operation": 1, "value": None}]},
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "retention.ms", "config_operation": 2, "value": "5"}]}], "validate_only": False},
            label="errors")
    for v in ctx.versions(33):
        topic = ctx.name(f"a{v}")
        create_topic(ctx, topic, configs={"cleanup.policy": "compact"})
        ctx.call(33, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "value": "1000"}]}], "validate_only": False}, label="replace all")
        _await_config(ctx, topic, "retention.ms", "1000")
        ctx.call(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                        "configuration_keys": ["retention.ms", "cleanup.policy"]}],
                         "include_synonyms": True}, label=f"after AlterConfigs v{v}")
        ctx.call(33, v, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "no.such.config", "value": "1"}]},
            {"resource_type": 2, "resource_name": ctx.name("absent"), "configs": []}], "validate_only": True},
            label="errors")


# --- Unsupported versions -----------------------------------------------------------------------


@scenario
def unsupported_versions(ctx):
    """A version no broker serves: Kafka closes the connection (only ApiVersions answers)."""
    for key in sorted(ctx.plan.mk_versions):
        kafka_max = ctx.plan.kafka_versions.get(key, (0, -1))[1]
        mk_max = ctx.plan.mk_versions[key][1]
        v = max(kafka_max, mk_max) + 1
        if key == 18:
            continue
        # The body of the highest version the codec knows, under a higher version number.
        spec_max = min(v - 1, 40)
        try:
            frame = bytearray(codec.encode_request(key, spec_max, 1, "conformance",
                                                   codec.default_body(key, spec_max, "request")))
        except Exception:
            continue
        struct.pack_into(">h", frame, 6, v)
        ctx.raw(bytes(frame), api_key=key, version=v, label="version above every broker's", conn=f"u{key}")


def _with_crc(buf: bytearray) -> bytes:
    from minikafka.protocol.records import set_crc

    set_crc(buf)
    return bytes(buf)


@scenario
def produce_invalid_batches(ctx):
    """Batches Kafka's request check or LogValidator refuses (and the partition stays usable)."""
    from minikafka.protocol.records import build_batch

    topic = ctx.name("bad")
    create_topic(ctx, topic)
    compacted = ctx.name("compact")
    create_topic(ctx, compacted, configs={"cleanup.policy": "compact"})
    codec7 = bytearray(batch(b"a"))
    struct.pack_into(">h", codec7, 21, 7)
    garbage = bytearray(batch(b"a"))
    garbage[61:] = b"\xfe" * (len(garbage) - 61)
    count = bytearray(batch(b"a", b"b", b"c"))
    struct.pack_into(">i", count, 57, 2)
    struct.pack_into(">i", count, 23, 1)
    bad_crc = bytearray(batch(b"a"))
    bad_crc[-1] ^= 0xFF
    magic1 = bytearray(batch(b"a"))
    magic1[16] = 1
    control = bytes(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], TS)],
                                control=True, transactional=True, producer_id=1, producer_epoch=0))
    two = batch(b"x") + batch(b"y")
    cases = {"unknown codec 7": _with_crc(codec7), "garbage records": _with_crc(garbage),
             "wrong record count": _with_crc(count), "bad crc": bytes(bad_crc), "magic 1": _with_crc(magic1),
             "control bit from a client": control, "two batches": two,
             "future timestamp": batch(b"f", ts=4_000_000_000_000)}
    for v in ctx.versions(0, lo=3):
        for label, records in cases.items():
            ctx.call(0, v, _produce_body(topic, 0, records), label=label)
        ctx.call(0, v, _produce_body(compacted, 0, bytes(build_batch([(None, b"v", [], TS)]))),
                 label="keyless record on a compacted topic")
        ctx.call(0, v, _produce_body(topic, 0, batch(b"ok")), label="a good batch after them")


@scenario
def produce_record_edges(ctx):
    """Records at the edges of Kafka's record reading (issue 18): the smallest record (six bytes),
    a key length below -1 (read as null), a header key that is not UTF-8, a record without a
    timestamp under message.timestamp.before.max.ms, a producer id without a sequence and a client
    base offset other than 0.  Accepted or refused, each as Kafka 4.2 does."""
    from minikafka.protocol.primitives import write_varint
    from minikafka.protocol.records import BATCH_HEADER_SIZE, build_batch

    def with_records(records: bytes) -> bytes:
        buf = bytearray(build_batch([(b"k", b"v", [], TS)])[:BATCH_HEADER_SIZE]) + records
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        return _with_crc(buf)

    def record(*fields: bytes) -> bytes:
        body = b"\x00" + write_varint(0) + write_varint(0) + b"".join(fields)
        return write_varint(len(body)) + body

    topic = ctx.name("edges")
    create_topic(ctx, topic, configs={"message.timestamp.before.max.ms": "3600000"})
    null, nothing = write_varint(-1), write_varint(0)
    cases = {
        "smallest record": with_records(record(null, null, nothing)),
        "empty key and value": with_records(record(nothing, nothing, nothing)),
        "key length -5": with_records(record(write_varint(-5), write_varint(1) + b"v", nothing)),
        "header key not UTF-8": with_records(record(null, null, write_varint(1) + write_varint(2) + b"\xff\xfe" + null)),
        "no timestamp under before.max.ms": bytes(build_batch([(b"k", b"v", [], -1)])),
        "producer id without a sequence": bytes(build_batch([(b"k", b"v", [], TS)], producer_id=5,
                                                            producer_epoch=0, base_sequence=-1)),
        "base offset 1234": bytes(build_batch([(b"k", b"v", [], TS)], base_offset=1234)),
    }
    for v in ctx.versions(0, lo=3, hi=12):
        for label, records in cases.items():
            ctx.call(0, v, _produce_body(topic, 0, records), label=label)


@scenario
def topic_config_validation(ctx):
    """CreateTopics and IncrementalAlterConfigs with invalid values of common topic configs."""
    bad = {"cleanup.policy": "bogus", "compression.type": "bogus", "segment.bytes": "10",
           "min.insync.replicas": "0", "retention.ms": "-5", "message.timestamp.type": "Later",
           "max.message.bytes": "-1", "segment.ms": "0", "min.cleanable.dirty.ratio": "2",
           "unclean.leader.election.enable": "maybe", "compression.gzip.level": "42",
           "message.timestamp.before.max.ms": "-1", "retention.bytes": "-2", "delete.retention.ms": "x"}
    for i, (name, value) in enumerate(sorted(bad.items())):
        ctx.call(19, 7, {"topics": [{"name": ctx.name(f"c{i}"), "num_partitions": 1, "replication_factor": 1,
                                     "configs": [{"name": name, "value": value}]}], "timeout_ms": 5000,
                         "validate_only": True}, label=f"create with {name}={value}", scoped=_codes_only)
    topic = ctx.name("alter")
    create_topic(ctx, topic)
    for i, (name, value) in enumerate(sorted(bad.items())):
        ctx.call(44, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": name, "config_operation": 0, "value": value}]}], "validate_only": True},
            label=f"alter {name}={value}", scoped=_codes_only)


def _codes_only(body):
    """These answers are compared by error code; the messages, which name the config and its
    bounds in each broker's words, are left out."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "error_message"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return strip(body)


@scenario
def internal_topics(ctx):
    """The internal topics as clients see them: Metadata, their configs, writes and re-creation
    refused."""
    from .common import find_coordinator

    find_coordinator(ctx, ctx.name("g"))
    find_coordinator(ctx, ctx.name("tx"), key_type=1)
    for name in ("__consumer_offsets", "__transaction_state"):
        for v in (1, 9, 12, 13):
            if v in ctx.versions(3):
                ctx.call(3, v, {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": v >= 8}, label=f"metadata of {name}")
        ctx.call(32, 4, {"resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
                         "include_synonyms": True}, label=f"configs of {name}", scoped=sort_by("name"))
        ctx.call(0, 9, _produce_body(name, 0, batch(b"x")), label=f"produce to {name}")
        ctx.call(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                         "timeout_ms": 5000, "validate_only": True}, label=f"create {name}")
        ctx.call(44, 1, {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
            label=f"alter configs of {name}")
        ctx.call(37, 3, {"topics": [{"name": name, "count": 10, "assignments": None}], "timeout_ms": 5000,
                         "validate_only": True}, label=f"add partitions to {name}")


@scenario
def fetch_limits(ctx):
    """Response-level max_bytes across partitions (KIP-74: the first batch always comes), a long
    poll that ends empty at its max_wait, and read_uncommitted up to the high watermark."""
    topic = ctx.name("lim")
    topic_id = create_topic(ctx, topic, partitions=2)
    produce(ctx, topic, 0, batch(b"a" * 300, b"b" * 300))
    produce(ctx, topic, 1, batch(b"c" * 300))
    for v in ctx.versions(1, lo=4):
        body = _fetch_body(topic, topic_id, 0, 0)
        body["max_bytes"] = 10
        body["topics"][0]["partitions"].append(dict(body["topics"][0]["partitions"][0], partition=1))
        ctx.call(1, v, body, label="max_bytes 10 over two partitions")
    for v in (4, 11, 12, 16):
        if v in ctx.versions(1):
            body = _fetch_body(topic, topic_id, 1, 1)
            body.update(min_bytes=1, max_wait_ms=200)
            ctx.call(1, v, body, label="long poll at the end, nothing arrives")
