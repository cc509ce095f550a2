"""A streams group's topology and its validation against the topics that exist (Kafka's
``StreamsTopology``, ``InternalTopicManager``, ``RepartitionTopics``, ``CopartitionedTopicsEnforcer``,
``ChangelogTopics``).

The first member to join sends the topology: subtopologies with their source topics, the repartition
topics they write to (sink) and read from (source, with a fixed partition count or 0), their state
changelog topics, and groups of source topics that must be co-partitioned.  ``configure_topics`` decides
every internal topic's partition count:

1. every source topic must exist (else status MISSING_SOURCE_TOPICS);
2. a repartition topic without a fixed count gets the largest count among the source topics of the
   subtopology that writes to it, iterated until every count is known (a loop that never resolves, or a
   repartition source topic nobody writes to: STREAMS_INVALID_TOPOLOGY);
3. co-partition groups: all repartition topics of a group get one count (the fixed one, which must agree,
   or the largest), and a group with external topics needs them equally partitioned (else status
   INCORRECTLY_PARTITIONED_TOPICS);
4. a changelog topic gets its subtopology's task count (the largest source partition count).

The number of tasks of a subtopology is the largest partition count among its source topics.  Internal
topics that do not exist yet are returned as topics to create (status MISSING_INTERNAL_TOPICS); one that
exists with another partition count is INCORRECTLY_PARTITIONED_TOPICS.  A configuration with a status is
not "ready": the group gets no tasks until it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from . import java

# StreamsGroupHeartbeatResponse status codes (Kafka's StreamsGroupHeartbeatResponse.Status).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


class TopicConfigurationError(Exception):
    """The topology cannot be configured against the current topics: reported as a status, not an error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class InvalidTopologyError(Exception):
    """STREAMS_INVALID_TOPOLOGY: the topology itself is wrong."""


class InternalStateError(Exception):
    """A state Kafka treats as a bug (IllegalStateException): UNKNOWN_SERVER_ERROR."""


def _topic_info(t: dict) -> dict:
    configs = t.get("topic_configs")
    return {"name": t["name"], "partitions": t.get("partitions", 0),
            "replication_factor": t.get("replication_factor", 0),
            "topic_configs": None if configs is None else
            [{"key": c["key"], "value": c["value"]} for c in configs]}


def record_from_request(topology: dict) -> dict:
    """The StreamsGroupTopologyValue of a heartbeat's topology (as Kafka converts it)."""
    subtopologies = []
    for s in topology.get("subtopologies") or []:
        subtopologies.append({
            "subtopology_id": s["subtopology_id"],
            "source_topics": list(s.get("source_topics") or []),
            "source_topic_regex": list(s.get("source_topic_regex") or []),
            "state_changelog_topics": [_topic_info(t) for t in s.get("state_changelog_topics") or []],
            "repartition_sink_topics": list(s.get("repartition_sink_topics") or []),
            "repartition_source_topics": [_topic_info(t) for t in s.get("repartition_source_topics") or []],
            "copartition_groups": [{"source_topics": list(g.get("source_topics") or []),
                                    "source_topic_regex": list(g.get("source_topic_regex") or []),
                                    "repartition_source_topics": list(g.get("repartition_source_topics") or [])}
                                   for g in s.get("copartition_groups") or []],
        })
    return {"epoch": topology["epoch"], "subtopologies": subtopologies}


def _normalised(sub: dict) -> tuple:
    def info(t):
        return (t["name"], t.get("partitions", 0), t.get("replication_factor", 0),
                tuple((c["key"], c["value"]) for c in t.get("topic_configs") or []))
    return (tuple(sub["source_topics"]), tuple(sub.get("source_topic_regex") or []),
            tuple(info(t) for t in sub["state_changelog_topics"]), tuple(sub["repartition_sink_topics"]),
            tuple(info(t) for t in sub["repartition_source_topics"]),
            tuple((tuple(g["source_topics"]), tuple(g.get("source_topic_regex") or []),
                   tuple(g["repartition_source_topics"])) for g in sub.get("copartition_groups") or []))


@dataclass
class StreamsTopology:
    epoch: int
    subtopologies: dict[str, dict]  # subtopology id -> StreamsGroupTopologyValue.Subtopology (dict)

    @classmethod
    def from_record(cls, value: dict) -> "StreamsTopology":
        return cls(value["epoch"], {s["subtopology_id"]: s for s in value.get("subtopologies") or []})

    @classmethod
    def from_request(cls, topology: dict) -> "StreamsTopology":
        return cls.from_record(record_from_request(topology))

    def same_as(self, other: "StreamsTopology") -> bool:
        return (self.epoch == other.epoch and self.subtopologies.keys() == other.subtopologies.keys()
                and all(_normalised(s) == _normalised(other.subtopologies[i]) for i, s in self.subtopologies.items()))

    def source_topic_map(self) -> dict[str, str]:
        """Source and repartition-source topic -> the subtopology that reads it."""
        out = {}
        for sid, s in self.subtopologies.items():
            for t in s["source_topics"]:
                out[t] = sid
            for t in s["repartition_source_topics"]:
                out[t["name"]] = sid
        return out

    def required_topics(self) -> set[str]:
        out: set[str] = set()
        for s in self.subtopologies.values():
            out.update(s["source_topics"])
            out.update(t["name"] for t in s["repartition_source_topics"])
            out.update(t["name"] for t in s["state_changelog_topics"])
        return out

    def describe(self) -> dict:
        """StreamsGroupDescribe's topology before it is configured: as sent (partition counts unresolved)."""
        def info(t):
            return {"name": t["name"], "partitions": t.get("partitions", 0),
                    "replication_factor": t.get("replication_factor", 0),
                    "topic_configs": [{"key": c["key"], "value": c["value"]} for c in t.get("topic_configs") or []]}
        return {"epoch": self.epoch, "subtopologies": [{
            "subtopology_id": sid,
            "source_topics": sorted(s["source_topics"]),
            "repartition_sink_topics": sorted(s["repartition_sink_topics"]),
            "repartition_source_topics": sorted((info(t) for t in s["repartition_source_topics"]), key=lambda t: t["name"]),
            "state_changelog_topics": sorted((info(t) for t in s["state_changelog_topics"]), key=lambda t: t["name"]),
        } for sid, s in sorted(self.subtopologies.items())]}


@dataclass
class InternalTopic:
    name: str
    partitions: int
    replication_factor: Optional[int]  # None: the broker's default
    configs: dict[str, str]

    def describe(self) -> dict:
        return {"name": self.name, "partitions": self.partitions, "replication_factor": self.replication_factor or 0,
                "topic_configs": [{"key": k, "value": v} for k, v in
                                  ((k, self.configs[k]) for k in java.hashmap_order(self.configs))]}

    def creatable(self) -> dict:
        """A CreateTopics topic (replication factor -1: the broker's default)."""
        return {"name": self.name, "num_partitions": self.partitions,
                "replication_factor": self.replication_factor or -1,
                "configs": dict(self.configs)}


@dataclass
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: set[str]
    repartition_source_topics: dict[str, InternalTopic]
    repartition_sink_topics: set[str]
    state_changelog_topics: dict[str, InternalTopic]

    def describe(self, subtopology_id: str) -> dict:
        return {"subtopology_id": subtopology_id, "source_topics": sorted(self.source_topics),
                "repartition_sink_topics": sorted(self.repartition_sink_topics),
                "repartition_source_topics": [t.describe() for _, t in sorted(self.repartition_source_topics.items())],
                "state_changelog_topics": [t.describe() for _, t in sorted(self.state_changelog_topics.items())]}


@dataclass
class ConfiguredTopology:
    epoch: int
    metadata_hash: int
    subtopologies: Optional[dict[str, ConfiguredSubtopology]]  # sorted by id; None when not configurable
    topics_to_create: dict[str, dict] = field(default_factory=dict)
    error: Optional[TopicConfigurationError] = None

    @property
    def ready(self) -> bool:
        return self.error is None

    def describe(self) -> dict:
        return {"epoch": self.epoch, "subtopologies": [s.describe(sid) for sid, s in (self.subtopologies or {}).items()]}


def _summarize(topics) -> str:
    topics = list(topics)
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    return shown + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def _java_map(mapping: dict[str, int]) -> str:
    """A sorted map as Java's TreeMap.toString prints it."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(mapping.items())) + "}"


def configure_topics(topology: StreamsTopology, metadata_hash: int,
                     partitions_of: Callable[[str], Optional[int]]) -> ConfiguredTopology:
    """Kafka's ``InternalTopicManager.configureTopics``; ``partitions_of(topic)`` is the partition count of
    an existing topic, None when it does not exist.  Raises InvalidTopologyError / InternalStateError."""
    try:
        missing = sorted({t for s in topology.subtopologies.values() for t in s["source_topics"]
                          if partitions_of(t) is None})
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {_summarize(missing)} are missing.")
        decided = _decide_partition_counts(topology, partitions_of)
        configured = {sid: _configured_subtopology(s, partitions_of, decided)
                      for sid, s in sorted(topology.subtopologies.items())}
        to_create = _missing_internal_topics(configured, topology, partitions_of)
        error = None
        if to_create:
            error = TopicConfigurationError(
                MISSING_INTERNAL_TOPICS, "Internal topics are missing: " + _summarize(java.hashmap_order(to_create)))
        return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, error)
    except TopicConfigurationError as exc:
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, exc)


def _count(topic: str, partitions_of, decided: dict[str, int]) -> Optional[int]:
    existing = partitions_of(topic)
    if existing is not None:
        return existing
    return decided.get(topic)


def _decide_partition_counts(topology: StreamsTopology, partitions_of) -> dict[str, int]:
    decided: dict[str, int] = {}
    subs = list(topology.subtopologies.values())

    def provider(topic: str) -> Optional[int]:
        return _count(topic, partitions_of, decided)

    decided.update(_repartition_counts(subs, provider))
    fixed = {t["name"] for s in subs for t in s["repartition_source_topics"] if t.get("partitions", 0) != 0}
    flexible = {t["name"] for s in subs for t in s["repartition_source_topics"] if t.get("partitions", 0) == 0}
    for s in subs:
        for group in s.get("copartition_groups") or []:
            members = {s["source_topics"][i] for i in group["source_topics"]}
            members |= {s["repartition_source_topics"][i]["name"] for i in group["repartition_source_topics"]}
            decided.update(_enforce_copartitioning(members, fixed, flexible, provider))
    for s in subs:
        counts = [_count_or_fail(t, provider) for t in
                  list(s["source_topics"]) + [t["name"] for t in s["repartition_source_topics"]]]
        if not counts:
            raise InvalidTopologyError(f"No source topics found for subtopology {s['subtopology_id']}")
        for t in s["state_changelog_topics"]:
            decided[t["name"]] = max(counts)
    return decided


def _count_or_fail(topic: str, provider) -> int:
    count = provider(topic)
    if count is None:
        raise InternalStateError(f"No partition count for source topic {topic}")
    return count


def _repartition_counts(subs: list[dict], provider) -> dict[str, int]:
    missing = set()
    for s in subs:
        own = {t["name"] for t in s["repartition_source_topics"]}
        missing |= {t for t in s["source_topics"] if t not in own and provider(t) is None}
    if missing:
        raise InternalStateError("Missing source topics: " + ", ".join(sorted(missing)))
    counts: dict[str, int] = {t["name"]: t["partitions"] for s in subs for t in s["repartition_source_topics"]
                              if t.get("partitions", 0) != 0}
    while True:
        needed = progress = False
        for s in subs:
            for sink in s["repartition_sink_topics"]:
                if sink in counts:
                    continue
                candidate = None
                for t in s["repartition_source_topics"]:
                    c = counts.get(t["name"])
                    if c is not None and (candidate is None or c > candidate):
                        candidate = c
                for t in s["source_topics"]:
                    c = provider(t)
                    if c is not None and (candidate is None or c > candidate):
                        candidate = c
                if candidate is None:
                    needed = True
                    continue
                counts[sink] = candidate
                progress = True
        if not needed:
            break
        if not progress:
            raise InvalidTopologyError("Failed to compute number of partitions for all repartition topics. "
                                       "There may be loops in the topology that cannot be resolved.")
    for s in subs:
        if any(t["name"] not in counts for t in s["repartition_source_topics"]):
            raise InvalidTopologyError("Failed to compute number of partitions for all repartition topics, because "
                                       "a repartition source topic is never used as a sink topic.")
    return counts


def _enforce_copartitioning(topics: set[str], fixed: set[str], flexible: set[str], provider) -> dict[str, int]:
    if not topics:
        return {}

    def count(t):
        c = provider(t)
        if c is None:
            raise InternalStateError(f"Number of partitions is not set for topic: {t}")
        return c

    repartition = {t: count(t) for t in topics if t in fixed or t in flexible}
    external = {t: count(t) for t in topics if t not in repartition}
    if set(topics) == set(repartition):
        if fixed:
            fixed_counts = {t: count(t) for t in fixed}
            first = count(next(iter(java.hashmap_order(fixed))))
            if any(c != first for c in fixed_counts.values()):
                raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                              "Following topics do not have the same number of partitions: "
                                              f"[{_java_map(repartition)}]")
            n = first
        else:
            n = max(repartition.values(), default=0)
            if n == 0:
                raise InvalidTopologyError("All topics in the copartition group had undefined partition number: "
                                           + "[" + ", ".join(java.hashmap_order(repartition)) + "]")
    else:
        values = [external[t] for t in java.hashmap_order(external)]
        n = values[0]
        if any(v != n for v in values):
            raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                          "Following topics do not have the same number of partitions: "
                                          f"[{_java_map(external)}]")
    out = {}
    for t, c in repartition.items():
        out[t] = n
        if t in fixed and c != n:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{c}] of repartition topic [{t}] doesn't match number of partitions [{n}] "
                "of the source topic.")
    return out


def _internal(t: dict, decided: dict[str, int]) -> InternalTopic:
    partitions = t.get("partitions", 0)
    if partitions == 0 and t["name"] not in decided:
        raise InternalStateError(f"Number of partitions must be set for topic {t['name']}")
    rf = t.get("replication_factor", 0)
    return InternalTopic(t["name"], decided[t["name"]] if partitions == 0 else partitions, rf or None,
                         {c["key"]: c["value"] for c in t.get("topic_configs") or []})


def _configured_subtopology(s: dict, partitions_of, decided: dict[str, int]) -> ConfiguredSubtopology:
    counts = [_count(t, partitions_of, decided) for t in
              list(s["source_topics"]) + [t["name"] for t in s["repartition_source_topics"]]]
    if not counts:
        raise InternalStateError("Subtopology does not contain any source topics")
    if any(c is None for c in counts):
        raise InternalStateError("Number of partitions must be set for every source topic")
    return ConfiguredSubtopology(
        max(counts), set(s["source_topics"]),
        {t["name"]: _internal(t, decided) for t in s["repartition_source_topics"]},
        set(s["repartition_sink_topics"]),
        {t["name"]: _internal(t, decided) for t in s["state_changelog_topics"]})


def _missing_internal_topics(configured: dict[str, ConfiguredSubtopology], topology: StreamsTopology,
                             partitions_of) -> dict[str, dict]:
    wanted: dict[str, InternalTopic] = {}
    for s in configured.values():
        for t in s.repartition_source_topics.values():
            wanted[t.name] = t
        for t in s.state_changelog_topics.values():
            wanted[t.name] = t
    for topic in topology.required_topics():
        existing = partitions_of(topic)
        if existing is None:
            continue
        expected = wanted.pop(topic, None)
        if expected is not None and existing != expected.partitions:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {topic} has different number of partitions: expected {expected.partitions}, "
                f"found {existing}")
    return {name: t.creatable() for name, t in wanted.items()}
