"""Option parsing and offset-range planning for the Kafka data source (no Spark, no network).

The option names, offset JSON and semantics follow Spark's built-in Kafka connector
(spark-sql-kafka-0-10) so that a job can switch between ``format("minikafka")`` and
``format("kafka")`` without touching its options:

* ``kafka.<name>`` settings go to the client (here librdkafka through confluent-kafka);
* exactly one of ``subscribe`` (comma list), ``subscribePattern`` (regex) or ``assign``
  (JSON ``{"topic":[0,1]}``) selects the partitions;
* ``startingOffsets`` / ``endingOffsets`` are ``earliest``, ``latest`` or per-partition JSON
  ``{"topic":{"0":23,"1":-2}}`` where -2 means earliest and -1 latest;
* ``maxOffsetsPerTrigger`` caps a micro-batch, ``includeHeaders`` adds the headers column,
  ``failOnDataLoss`` decides whether vanished offsets fail the query, ``minPartitions`` splits
  large ranges over more tasks.

Offsets are kept as ``{(topic, partition): offset}`` inside the package and as Spark's
checkpoint form ``{"topic": {"0": 23}}`` (string partition keys, JSON-safe) at the boundary.
"""

from __future__ import annotations

import difflib
import json
import re
import uuid
from dataclasses import dataclass
from typing import Mapping, Union

FORMAT_NAME = "minikafka"

# Kafka's sentinel values in the offsets JSON (ListOffsets timestamps).
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
# "earliest", "latest", or {(topic, partition): offset-or-sentinel}.
OffsetSpec = Union[str, Offsets]

DEFAULT_METADATA_TIMEOUT_MS = 30_000
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs falls back to 120 s too

# Options of Spark's connector that this source understands.
_SOURCE_OPTIONS = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "maxoffsetspertrigger", "includeheaders", "failondataloss", "minpartitions",
    "groupidprefix", "kafkaconsumer.polltimeoutms", "metadatatimeoutms",
}
# Options of Spark's connector that this source does not implement: refused by name so that a
# job written for format("kafka") fails loudly instead of silently reading something else.
_UNSUPPORTED_SOURCE_OPTIONS = {
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "minoffsetspertrigger",
    "maxtriggerdelay", "fetchoffset.numretries", "fetchoffset.retryintervalms",
    "kafkaconsumer.cache.enabled", "usedeprecatedoffsetfetching", "maxrecordsperpartition",
}
_SINK_OPTIONS = {"topic", "includeheaders", "flushtimeoutms"}
# Options Spark itself hands to every sink (writeStream.option("checkpointLocation", ...)).
_SPARK_SINK_OPTIONS = {"path", "checkpointlocation", "queryname"}
_OPTION_SPELLING = {
    name.lower(): name for name in (
        "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
        "maxOffsetsPerTrigger", "includeHeaders", "failOnDataLoss", "minPartitions",
        "groupIdPrefix", "kafkaConsumer.pollTimeoutMs", "metadataTimeoutMs", "topic",
        "flushTimeoutMs",
    )
}
# Client settings the source owns: Spark's connector refuses the same ones (plus Java-only ones
# that librdkafka does not know and that would otherwise fail later with a vaguer message).
_RESERVED_CLIENT_SETTINGS = {
    "auto.offset.reset": "the source seeks to exact offsets; use startingOffsets instead",
    "enable.auto.commit": "the source keeps its offsets in Spark's checkpoint, never in a group",
    "key.deserializer": "keys are always returned as binary; cast them in a query",
    "value.deserializer": "values are always returned as binary; cast them in a query",
    "key.serializer": "the sink writes the key column as bytes",
    "value.serializer": "the sink writes the value column as bytes",
    "interceptor.classes": "Java interceptors do not exist in librdkafka",
}


class OptionError(ValueError):
    """A data source option is missing, unknown or malformed (message names the option)."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions the source reads: exactly one of the three strategies is set."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern!r}"
        if self.assigned:
            return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assigned)
        return "subscribe=" + ",".join(self.topics)

    def select(self, available: Mapping[str, int]) -> list[TopicPartition]:
        """The partitions to read given the cluster's ``{topic: partition count}``."""
        if self.assigned:
            return sorted(self.assigned)
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            names = [t for t in available if rx.fullmatch(t) and not t.startswith("__")]
        else:
            names = [t for t in self.topics if t in available]
        return sorted((t, p) for t in names for p in range(available[t]))


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    client: dict[str, str]  # kafka.* settings without the prefix
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    group_id_prefix: str = "minikafka-spark-source"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    metadata_timeout_ms: int = DEFAULT_METADATA_TIMEOUT_MS

    def group_id(self) -> str:
        # A group id is only a label here (assign+seek, no commits) but librdkafka insists on
        # one; a unique id keeps two queries from ever sharing a coordinator entry.
        return self.client.get("group.id") or f"{self.group_id_prefix}-{uuid.uuid4()}"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    client: dict[str, str]
    topic: str | None = None
    flush_timeout_ms: int = 120_000


@dataclass(frozen=True)
class OffsetRange:
    """One task's work: the records of one partition with offsets in [from_offset, until_offset)."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


# ---------------------------------------------------------------------------------------------
# Parsing


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}


def _unknown(name: str, known: set[str]) -> OptionError:
    candidates = sorted(known) + [f"kafka.{k}" for k in ("bootstrap.servers",)]
    close = difflib.get_close_matches(name, candidates, n=1)
    hint = f" (did you mean '{_OPTION_SPELLING.get(close[0], close[0])}'?)" if close else ""
    return OptionError(f"unknown option '{name}'{hint}")


def _client_settings(opts: dict[str, str]) -> tuple[str, dict[str, str]]:
    client = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    for name, why in _RESERVED_CLIENT_SETTINGS.items():
        if name in client:
            raise OptionError(f"option 'kafka.{name}' is not supported: {why}")
    servers = client.pop("bootstrap.servers", "").strip()
    if not servers:
        raise OptionError(
            "option 'kafka.bootstrap.servers' is required (e.g. 127.0.0.1:9092)")
    return servers, client


def _positive_int(opts: dict[str, str], name: str, *, allow_zero: bool = False) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {raw!r}") from None
    if value < 0 or (value == 0 and not allow_zero):
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(given) != 1:
        spelled = ", ".join(_OPTION_SPELLING[k] for k in given) or "none"
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"set (got: {spelled})")
    kind = given[0]
    raw = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"option 'subscribe' must list at least one topic, got {raw!r}")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription(pattern=raw)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option 'assign' must be JSON like {{\"topic\":[0,1]}}: {exc}") from None
    if not isinstance(doc, dict) or not doc or not all(
            isinstance(v, list) and all(isinstance(p, int) and p >= 0 for p in v)
            for v in doc.values()):
        raise OptionError(f"option 'assign' must be JSON like {{\"topic\":[0,1]}}, got {raw!r}")
    return Subscription(assigned=tuple(sorted({(t, p) for t, ps in doc.items() for p in ps})))


def parse_offsets_json(raw: str, name: str) -> Offsets:
    """Parse ``{"topic":{"0":23,"1":-2}}`` into ``{(topic, 0): 23, (topic, 1): -2}``."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option '{name}' must be 'earliest', 'latest' or JSON like "
            f"{{\"topic\":{{\"0\":23,\"1\":-2}}}}: {exc}") from None
    if not isinstance(doc, dict) or not doc:
        raise OptionError(
            f"option '{name}' JSON must map topics to {{partition: offset}}, got {raw!r}")
    out: Offsets = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(
                f"option '{name}': topic {topic!r} must map partitions to offsets, got {parts!r}")
        for part, offset in parts.items():
            try:
                p = int(part)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{name}': partition {part!r} of topic {topic!r} is not an "
                    "integer") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST \
                    or p < 0:
                raise OptionError(
                    f"option '{name}': offset {offset!r} for {topic}-{part} must be an integer "
                    ">= 0, or -2 (earliest) or -1 (latest)")
            out[(topic, p)] = offset
    return out


def _offset_spec(opts: dict[str, str], name: str, default: str) -> OffsetSpec:
    raw = opts.get(name.lower(), "").strip()
    if not raw:
        return default
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    if raw.startswith("{"):
        return parse_offsets_json(raw, name)
    raise OptionError(
        f"option '{name}' must be 'earliest', 'latest' or JSON like "
        f"{{\"topic\":{{\"0\":23,\"1\":-2}}}}, got {raw!r}")


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the read options of a batch (``streaming=False``) or streaming query."""
    opts = _lower(options)
    for name in opts:
        if name.startswith("kafka.") or name in _SOURCE_OPTIONS or name == "path":
            continue
        if name in _UNSUPPORTED_SOURCE_OPTIONS:
            raise OptionError(
                f"option '{name}' of Spark's Kafka connector is not supported by the "
                f"{FORMAT_NAME} source")
        raise _unknown(name, _SOURCE_OPTIONS)
    servers, client = _client_settings(opts)
    subscription = _subscription(opts)
    starting = _offset_spec(opts, "startingOffsets", "latest" if streaming else "earliest")
    ending = _offset_spec(opts, "endingOffsets", "latest")
    if streaming and opts.get("endingoffsets", "").strip():
        raise OptionError("option 'endingOffsets' is not valid in streaming queries")
    if not streaming:
        # Spark refuses these: a batch query that starts at "latest" reads nothing and one that
        # ends at "earliest" is a mistake, never an intent.
        if starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values()):
            raise OptionError(
                "option 'startingOffsets' cannot be 'latest' (or -1) for batch queries")
        if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise OptionError(
                "option 'endingOffsets' cannot be 'earliest' (or -2) for batch queries")
        if opts.get("maxoffsetspertrigger", "").strip():
            raise OptionError("option 'maxOffsetsPerTrigger' is only valid in streaming queries")
    if subscription.assigned:
        for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if isinstance(spec, dict):
                extra = sorted(set(spec) - set(subscription.assigned))
                if extra:
                    raise OptionError(
                        f"option '{name}' names partitions that are not assigned: "
                        + ", ".join(f"{t}-{p}" for t, p in extra))
    return SourceOptions(
        bootstrap_servers=servers,
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_positive_int(opts, "minPartitions"),
        group_id_prefix=opts.get("groupidprefix") or "minikafka-spark-source",
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        metadata_timeout_ms=_positive_int(opts, "metadataTimeoutMs")
        or DEFAULT_METADATA_TIMEOUT_MS,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    for name in opts:
        if name.startswith("kafka.") or name in _SINK_OPTIONS or name in _SPARK_SINK_OPTIONS:
            continue
        if name in _SOURCE_OPTIONS:
            raise OptionError(f"option '{_OPTION_SPELLING.get(name, name)}' is a read option; "
                              "it has no meaning when writing")
        raise _unknown(name, _SINK_OPTIONS)
    servers, client = _client_settings(opts)
    topic = opts.get("topic", "").strip() or None
    return SinkOptions(
        bootstrap_servers=servers,
        client=client,
        topic=topic,
        flush_timeout_ms=_positive_int(opts, "flushTimeoutMs") or 120_000,
    )


# ---------------------------------------------------------------------------------------------
# Offsets in Spark's checkpoint form


def to_checkpoint(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(offset)
    return out


def from_checkpoint(doc: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(part)): int(off) for topic, parts in doc.items()
            for part, off in parts.items()}


# ---------------------------------------------------------------------------------------------
# Planning


class OffsetPlanError(ValueError):
    """Offsets that cannot be read (out of range, missing partitions, data loss)."""


def resolve(spec: OffsetSpec, partitions: list[TopicPartition],
            watermarks: Mapping[TopicPartition, tuple[int, int]], *, name: str,
            fail_on_data_loss: bool = True, require_all: bool = True) -> Offsets:
    """Turn an offset spec into concrete offsets for ``partitions``.

    ``watermarks`` gives ``(low, high)`` per partition. Explicit offsets outside
    ``[low, high]`` fail (or are clamped when ``fail_on_data_loss`` is false), like Spark.
    """
    out: Offsets = {}
    if isinstance(spec, dict):
        missing = [tp for tp in partitions if tp not in spec]
        if missing and require_all:
            raise OffsetPlanError(
                f"option '{name}' JSON must list every partition being read; missing: "
                + ", ".join(f"{t}-{p}" for t, p in missing))
        unknown = [tp for tp in spec if tp not in watermarks]
        if unknown:
            raise OffsetPlanError(
                f"option '{name}' names partitions that do not exist: "
                + ", ".join(f"{t}-{p}" for t, p in sorted(unknown)))
    for tp in partitions:
        low, high = watermarks[tp]
        if spec == "earliest":
            out[tp] = low
        elif spec == "latest":
            out[tp] = high
        else:
            wanted = spec.get(tp, EARLIEST if name == "startingOffsets" else LATEST)
            if wanted == EARLIEST:
                out[tp] = low
            elif wanted == LATEST:
                out[tp] = high
            elif low <= wanted <= high:
                out[tp] = wanted
            elif fail_on_data_loss:
                raise OffsetPlanError(
                    f"option '{name}': offset {wanted} for {tp[0]}-{tp[1]} is outside the "
                    f"partition's range [{low}, {high}] (set failOnDataLoss=false to clamp)")
            else:
                out[tp] = min(max(wanted, low), high)
    return out


def cap_offsets(start: Offsets, latest: Offsets, max_offsets: int | None) -> Offsets:
    """The end offsets of the next micro-batch given a per-trigger cap.

    The cap is shared between partitions in proportion to their backlog (as Spark does), with
    the rounding remainder going to the largest fractional shares so that exactly
    ``min(max_offsets, backlog)`` records are admitted and a small cap still makes progress.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if max_offsets is None or total <= max_offsets:
        return dict(latest)
    shares = {tp: max_offsets * size / total for tp, size in backlog.items()}
    grant = {tp: int(share) for tp, share in shares.items()}
    left = max_offsets - sum(grant.values())
    for tp in sorted(shares, key=lambda tp: (grant[tp] - shares[tp], tp))[:left]:
        grant[tp] += 1
    return {tp: start.get(tp, latest[tp]) + grant[tp] for tp in latest}


def plan_ranges(start: Offsets, end: Offsets, *, min_partitions: int | None = None,
                new_partition_start: Mapping[TopicPartition, int] | None = None
                ) -> list[OffsetRange]:
    """Split ``[start, end)`` into the task ranges of one batch.

    Partitions absent from ``start`` (created after the query began) start at
    ``new_partition_start`` (their earliest offset). Empty ranges are skipped. With
    ``min_partitions`` larger than the number of non-empty partitions, the biggest ranges are
    cut into contiguous pieces; the cut is a pure function of the offsets, so a replayed batch
    gets the very same tasks.
    """
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        begin = start.get(tp)
        if begin is None:
            begin = (new_partition_start or {}).get(tp, 0)
        until = end[tp]
        if until < begin:
            raise OffsetPlanError(
                f"end offset {until} of {tp[0]}-{tp[1]} is before its start offset {begin}")
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, round(min_partitions * r.size / total)))
        step, extra = divmod(r.size, pieces)
        pos = r.from_offset
        for i in range(pieces):
            nxt = pos + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, pos, nxt))
            pos = nxt
    return out


__all__ = [
    "EARLIEST", "LATEST", "FORMAT_NAME", "OptionError",
    "OffsetPlanError", "OffsetRange", "SinkOptions", "SourceOptions", "Subscription",
    "cap_offsets", "from_checkpoint", "parse_offsets_json", "parse_sink_options",
    "parse_source_options", "plan_ranges", "resolve", "to_checkpoint",
]
