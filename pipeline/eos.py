"""An exactly-once Kafka sink for a streaming query's micro-batches (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a crash is written again.
Here every Spark partition of a micro-batch is written in one Kafka transaction, and the
micro-batch id is committed in the same transaction, so the records and the fact that they were
written become visible together or not at all:

* transactional id ``minikafka-eos-<query>-<partition>``: the same for a task and its retries and
  replays, so ``init_transactions`` fences any older attempt still alive (a zombie) and aborts
  its open transaction before anything else happens;
* progress is a transactional offset of the group ``minikafka-eos-<query>-<partition>`` on
  partition 0 of the output topic: ``batch_id + 1`` (the offset is only a number here; nothing
  reads the output through that group);
* a task first reads that committed offset (read_committed, ``require_stable``: it waits for an
  open transaction of the partition to end); if it is already above ``batch_id`` the micro-batch
  was written by an earlier attempt and the task writes nothing.

Limits: the micro-batch must be deterministic (same rows in the same Spark partitions when
replayed), which holds for Structured Streaming's replay of a planned micro-batch from its offset
log and state store, not for non-deterministic expressions (``rand()``, ``current_timestamp()``
outside the source's columns) or a changed ``spark.sql.shuffle.partitions``.  Consumers of the
output must read with ``isolation.level=read_committed`` (librdkafka's default, not the Java
client's).  Each non-empty Spark partition costs one transaction per micro-batch (about three
round trips plus the commit), and empty partitions cost nothing.  A query restarted under the
same name but with a fresh checkpoint restarts batch ids at 0 and must use a new query name.
"""

from __future__ import annotations

import os
import signal
from typing import Iterable, Iterator

TIMEOUT_S = 60


def transactional_id(query: str, partition: int) -> str:
    return f"minikafka-eos-{query}-{partition}"


def write_partition(rows: Iterator, *, client: dict, topic: str, query: str, batch_id: int,
                    partition: int) -> int:
    """Write one Spark partition's rows (with ``key`` and ``value``) in one transaction, unless
    this micro-batch was already committed for this partition; returns the rows written."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    first = next(rows, None)
    if first is None:
        return 0  # nothing to write; a replay of this partition is empty as well
    tid = transactional_id(query, partition)
    producer = Producer({"acks": "all", "linger.ms": 5, "partitioner": "murmur2_random", **client,
                         "transactional.id": tid, "client.id": tid})
    producer.init_transactions(TIMEOUT_S)  # fences older attempts and aborts their transaction
    progress = TopicPartition(topic, 0)
    consumer = Consumer({**{k: v for k, v in client.items() if k.startswith(("bootstrap", "security", "sasl", "ssl"))},
                         "group.id": tid, "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        committed = consumer.committed([progress], TIMEOUT_S)[0].offset
        if committed > batch_id:
            return 0  # written by an earlier attempt: the replay is skipped
        producer.begin_transaction()
        written = 0
        for row in _chain(first, rows):
            while True:
                try:
                    producer.produce(topic, key=_bytes(row["key"]), value=_bytes(row["value"]))
                    break
                except BufferError:
                    producer.poll(0.1)
            written += 1
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, batch_id + 1)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        _maybe_crash_for_tests(batch_id)
        return written
    finally:
        consumer.close()


def write_batch(df, *, client: dict, topic: str, query: str, batch_id: int) -> None:
    """``foreachBatch`` body: write the micro-batch ``df`` (columns key, value) exactly once."""
    from pyspark import TaskContext

    def run(rows: Iterable) -> None:
        write_partition(iter(rows), client=client, topic=topic, query=query, batch_id=batch_id,
                        partition=TaskContext.get().partitionId())

    df.select("key", "value").foreachPartition(run)


def _chain(first, rest: Iterator) -> Iterator:
    yield first
    yield from rest


def _bytes(value):
    if value is None or isinstance(value, (bytes, bytearray)):
        return value
    return str(value).encode("utf-8")


def _maybe_crash_for_tests(batch_id: int) -> None:
    # tests/pipeline/test_pipeline_txn.py: kill -9 the job (started as a session leader: its
    # driver and JVM are in the session's first process group; pyspark puts each worker in a
    # group of its own) right after the first partition of a micro-batch committed.
    if os.environ.get("MINIKAFKA_EOS_TEST_KILL_BATCH") == str(batch_id):
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
