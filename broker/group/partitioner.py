"""Which ``__consumer_offsets`` partition owns a group.

Kafka picks ``Utils.abs(groupId.hashCode()) % numPartitions``.  Java's ``String.hashCode`` runs over UTF-16
code units with int32 wraparound, and Kafka's ``Utils.abs`` is ``Math.abs`` except that Integer.MIN_VALUE
(whose Java abs overflows to itself) maps to 0.  It is *not* the ``n & 0x7fffffff`` of the producer's
``toPositive``: for -1 that would give 2147483647 instead of 1.  Picking the very same partition matters: tools that read ``__consumer_offsets``
and clients that cache coordinators expect Kafka's layout.
"""

from __future__ import annotations

from minikafka.protocol.primitives import java_string_hash


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` of an int32: abs(Integer.MIN_VALUE) is 0."""
    return 0 if n == -0x80000000 else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash(key)) % num_partitions
