"""Storage: partition logs on append-only segment files, and the metadata log.

No asyncio here: the broker calls these objects from its event loop, one call at a time, no locks.
The one other thread runs background fsyncs on duplicated descriptors and touches no state.
Clocks are injected (``now_ms`` returns int milliseconds) and every path is explicit.

What the broker uses
====================

``LogConfig`` (storage/config.py)
    Frozen dataclass of the topic settings, attributes named after Kafka's (dots -> underscores):
    segment_bytes (1 GiB), segment_ms (7 d), segment_index_bytes (10 MiB), index_interval_bytes
    (4096), retention_ms (7 d, -1 forever), retention_bytes (-1), cleanup_policy ("delete",
    "compact" or "compact,delete"), delete_retention_ms (1 d), min_compaction_lag_ms (0),
    min_cleanable_dirty_ratio (0.5), flush_messages (Long.MAX), flush_ms (1000, see below),
    message_timestamp_type ("CreateTime" | "LogAppendTime"), max_message_bytes (1048588).
    ``LogConfig.from_kafka({"segment.bytes": "1000", ...}, base=None)`` parses strings or values
    (ValueError -> INVALID_CONFIG); ``topic_names(d)`` maps broker synonyms (log.segment.bytes ...).

    Flush policy: an append is always written to the OS before it returns, so a broker crash
    (even kill -9) never loses an acknowledged write.  When the oldest unflushed append is
    ``flush.ms`` old (checked on append and by ``maybe_flush``) an fsync starts in a background
    thread; ``flush.messages`` unflushed records, a segment roll and close fsync synchronously.
    The dev default flush.ms=1000 bounds what a power loss can take to about a second; Kafka's
    own default (Long.MAX: rely on replicas, never fsync except roll/close) is accepted too.

``PartitionLog(directory, config: LogConfig | dict, now_ms=None)`` (storage/log.py)
    ``append(batch) -> AppendInfo(base_offset, last_offset, max_timestamp, log_append_time)``:
    one whole v2 batch (bytearray or writable memoryview, patched in place; other buffers are
    copied).  Checks header, record count vs last offset delta and CRC (CorruptRecordError), size
    vs max.message.bytes (KafkaError MESSAGE_SIZE_TOO_LARGE), keys on compacted topics (KafkaError
    INVALID_RECORD, records decoded only there); assigns offsets; with LogAppendTime sets
    max timestamp and attribute bit 3 and recomputes the CRC (log_append_time is -1 otherwise).
    ``append_batches(buf)``: the same for a concatenation of batches.

    ``read(offset, max_bytes, max_offset=None) -> list[memoryview]``: zero-copy views of the
    segment files (mmap) holding whole batches, starting at the batch that contains ``offset``;
    the first batch is whole even when larger than max_bytes (KIP-74), no batch whose last
    offset reaches ``max_offset`` (pass HW or LSO) is included; contiguous batches come as one
    view, a read may span segments; ``[]`` at the end.  Raises KafkaError(OFFSET_OUT_OF_RANGE)
    when offset < log_start_offset or offset > log_end_offset.  The total size is
    ``sum(len(v) for v in views)``.  Views stay valid even after retention/compaction.

    Offsets: ``log_start_offset``, ``log_end_offset``, ``high_watermark`` (== LEO: one node, the
    write is as durable as the policy promises before append returns), ``last_stable_offset``
    (the first offset of the oldest open transaction, capped by HW; storage/txn_index.py),
    ``aborted_transactions(start, end) -> [(producer id, first offset)]`` overlapping a read
    range, ``txn`` (the partition's TxnIndex: open transactions and the aborted index per
    segment, built from the log on first use).  ``earliest()``,
    ``latest()``, ``offset_for_timestamp(ts) -> (offset, timestamp) | None`` (first record with
    timestamp >= ts, via the time index), ``max_timestamp_offset() -> (offset, ts) | None``.

    ``delete_records(offset) -> new log start`` (-1 = HW; OFFSET_OUT_OF_RANGE above HW).
    ``iter_batches(start_offset=0)`` yields ``(BatchHeader, memoryview)`` from the batch holding
    max(start_offset, log start): producer-state rebuild and coordinator loading.
    Maintenance: ``maybe_roll()``, ``roll()``, ``apply_retention()``, ``compact()``,
    ``needs_compaction()``, ``maybe_flush()``, ``flush()`` (synchronous), ``flush_in_background()``.  ``close()`` (flush + clean-shutdown
    mark), ``delete()`` (remove the directory).  ``update_config(LogConfig)``.

``LogManager(data_dir, default_config: dict | LogConfig, now_ms=None)`` (storage/manager.py)
    Opens (and recovers) every ``<topic>-<partition>`` directory at start.
    ``get_or_create(topic, partition, topic_configs=None)``, ``open_topic(topic, n, configs)``,
    ``get(topic, partition) -> PartitionLog | None``, ``logs() -> {(topic, p): PartitionLog}``,
    ``topics()``, ``update_config(topic, configs)`` (alias ``update_topic_config``),
    ``delete_topic(topic)``, ``tick(now_ms=None)`` (roll/flush/retention for all, at most one
    compaction), ``flush()``, ``close()``.  Holds ``<data_dir>/.lock`` (flock) while open: a second
    process on the same directory gets DataDirInUseError.  After replaying the metadata log the controller
    should ``delete_topic`` any topic in ``topics()`` it does not know (a crash between the
    metadata record and the directory removal leaves one behind).

``MetadataLog(path, now_ms=None)`` (storage/metadata_log.py)
    ``append(record: dict)`` returns after fsync; ``replay()`` (alias ``records()``) gives every
    record in order; a torn tail is cut on open; ``close()``.  Put it at
    ``<data_dir>/metadata.log`` (a file, so the LogManager never mistakes it for a partition).

Known differences from Kafka (on purpose, or not done yet)
=========================================================
* flush.ms defaults to 1000 ms here (Kafka: Long.MAX, relying on replication).
* segment.ms counts from the segment's creation (Kafka: from its first batch's timestamp, which
  rolls on every append when a producer replays old timestamps).
* Compaction: tombstones expire by the age of their segment, not by a delete horizon written into
  the batch (KIP-534); no max.compaction.lag.ms; segments are not merged.  Transactions: only
  segments below the LSO are cleaned, aborted data is dropped, and a commit/abort marker goes
  delete.retention.ms after the last batch of its transaction left the log (a KIP-534 delete
  horizon stamped into the marker, as Kafka's cleaner does; the aborted-transaction index keeps
  only entries whose data is left), except a marker whose epoch is newer than its producer's last
  data batch, which stays (no producer-state snapshots here).  See storage/cleaner.py.
* The aborted-transaction index and the open transactions are kept in memory and rebuilt from
  the partition's batches on first use after open (Kafka persists .txnindex files and
  producer-state snapshots to avoid that scan).  See storage/txn_index.py.
* Deleted segments and topics go at once (no file.delete.delay.ms, no ``-delete`` rename): readers
  keep their mappings, so nothing they hold becomes invalid.
* message.timestamp.before/after.max.ms are checked per record by the broker before an append
  (protocol/validation.py), not by storage; ``append(batch, validated=True)`` skips the CRC and
  key checks the validator already made.
* Storage errors: a failing write, roll or log-start change raises
  KafkaError(KAFKA_STORAGE_ERROR), logged once per log until a write succeeds; the log stays
  usable (a failed roll keeps the old segment active).  A failing fsync after a written append
  does not fail the append.  Kafka instead takes the whole log directory offline.
* The clean-shutdown flag is per partition, in its checkpoint, and a clean open leaves it set until
  the partition's first change (append, roll, retention, compaction), which clears it first.
  Kafka removes one ``.kafka_cleanshutdown`` file per log directory at start; the effect is the
  same (a crash after the first write recovers the tail), without a checkpoint write per partition
  at start.  Indexes open lazily, like Kafka's mmapped ones: their entries are read on first use.
* Every compressed batch storage opens (time lookups, compaction, key checks) inflates within
  256 MiB (protocol.records.DECOMPRESSED_CAP_BYTES); past it the batch counts as corrupt.

On disk
=======
``<topic>-<partition>/00000000000000000000.log`` (record batches exactly as stored),
``.index`` (sparse offset index), ``.timeindex`` (time index) per segment, named by base offset;
``partition.checkpoint`` (log start, recovery point, cleaner offset, clean-shutdown flag).  See
storage/segment.py, storage/index.py, storage/checkpoint.py, storage/log.py (recovery) and
storage/cleaner.py (compaction) for the formats and the reasoning.
"""

from .config import LogConfig, topic_names
from .log import AppendInfo, PartitionLog
from .manager import LogManager
from .metadata_log import MetadataLog

__all__ = ["AppendInfo", "LogConfig", "LogManager", "MetadataLog", "PartitionLog", "topic_names"]
