"""Kafka's JSON message specs, read from the installed kafka-python wheel.

The wheel ships Apache Kafka's ``clients/src/main/resources/common/message/*.json`` as package
data (``kafka.protocol.schemas.resources``).  We read them with importlib.resources instead of
copying them, so the spec text stays Apache Kafka's and the version range of kafka-python pinned
in pyproject.toml decides which Kafka release we speak.

kafka-python does not ship every spec we serve (the KIP-848 consumer-group APIs and the records the
group coordinator writes to ``__consumer_offsets``).  Those live in ``protocol/schemas/`` in the same
format and are found by the same ``load``/``message``: kafka-python's folder is searched first, ours
second, so a kafka-python release that adds a spec takes it over.

The files are JSON with ``//`` line comments.  This module turns one into a tree of ``Field``
objects with parsed version ranges; ``protocol.codec`` compiles those into functions.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import re
from dataclasses import dataclass, field as dc_field

from . import specs_kafka4

SPEC_PACKAGE = "kafka.protocol.schemas.resources"
# Specs kafka-python lacks, written for this project in the same format (see schemas/README.md).
LOCAL_SPECS = pathlib.Path(__file__).with_name("schemas")

# A version range: (low, high) inclusive; high is None for "N+".  EMPTY never matches.
Range = tuple[int, int | None]
EMPTY: Range = (1, 0)

_INT_TYPES = {"int8", "int16", "uint16", "int32", "int64"}
PRIMITIVES = _INT_TYPES | {"bool", "float64", "string", "bytes", "records", "uuid"}


def parse_range(text: str | None) -> Range:
    """Kafka's version-range syntax: "3+", "0-12", "5", "none"."""
    if text is None or text == "none" or text == "":
        return EMPTY
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), None)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(r: Range, version: int) -> bool:
    lo, hi = r
    return version >= lo and (hi is None or version <= hi)


def snake(name: str) -> str:
    """Spec field name to dict key, the rule kafka-python uses: ProducerId -> producer_id."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass
class Field:
    name: str  # the spec's CamelCase name
    key: str  # snake_case dict key
    type: str  # primitive name, struct name, or "[]" + element type
    versions: Range
    nullable: Range
    tagged: Range
    tag: int | None
    default: object  # the raw "default" string from the spec, or None when absent
    flexible: Range | None  # a per-field override (RequestHeader ClientId: "none")
    fields: list["Field"] = dc_field(default_factory=list)  # struct members (struct or []struct)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES


@dataclass
class MessageSpec:
    name: str
    api_key: int | None
    kind: str  # "request", "response", "header", "data"
    valid: Range
    flexible: Range
    fields: list[Field]


# A JSON string (kept whole, so "//" inside it survives) or a // comment (dropped).
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')


def strip_comments(text: str) -> str:
    """Drop ``//`` comments that are outside JSON strings."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else "", text)


def _parse_fields(raw: list[dict], common: dict[str, list[dict]]) -> list[Field]:
    result = []
    for f in raw:
        ftype = f["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        sub_raw = f.get("fields")
        if sub_raw is None and elem not in PRIMITIVES:
            sub_raw = common.get(elem)
            if sub_raw is None:
                raise ValueError(f"struct type {elem} has no fields")
        result.append(
            Field(
                name=f["name"],
                key=snake(f["name"]),
                type=ftype,
                versions=parse_range(f.get("versions")),
                nullable=parse_range(f.get("nullableVersions")),
                tagged=parse_range(f.get("taggedVersions")),
                tag=f.get("tag"),
                default=f.get("default"),
                flexible=parse_range(f["flexibleVersions"]) if "flexibleVersions" in f else None,
                fields=_parse_fields(sub_raw, common) if sub_raw is not None else [],
            )
        )
    return result


@functools.lru_cache(maxsize=None)
def _resources():
    """The folder of spec files inside the installed kafka-python.

    importlib.resources would import the ``kafka`` package to find it, and kafka-python's
    ``__init__`` pulls in its whole client (about a quarter of a second, most of the broker's
    start-up).  Locating the package with ``find_spec`` does not run it; importlib.resources stays
    the fallback for installs that are not plain folders (zip imports).
    """
    found = importlib.util.find_spec("kafka")
    for location in (found.submodule_search_locations or []) if found else []:
        folder = pathlib.Path(location, *SPEC_PACKAGE.split(".")[1:])
        if folder.is_dir():
            return folder
    from importlib import resources  # only here: importing it costs ~30 ms of broker start-up

    return resources.files(SPEC_PACKAGE)


def _folders():
    return (_resources(), LOCAL_SPECS)


def _find(name: str):
    """The file of a spec: kafka-python's first, then ours; None when neither has it."""
    for folder in _folders():
        entry = folder / f"{name}.json"
        if entry.is_file():
            return entry
    return None


@functools.lru_cache(maxsize=None)
def load(name: str) -> MessageSpec:
    """Load one spec by its file name without ``.json`` (e.g. "FetchRequest")."""
    data = specs_kafka4.SPECS.get(name)  # specs the wheel does not ship (KIP-714)
    if data is None:
        entry = _find(name)  # kafka-python's folder, then ours (protocol/schemas: KIP-848)
        if entry is None:
            raise FileNotFoundError(f"no message spec {name}")
        data = json.loads(strip_comments(entry.read_text(encoding="utf-8")))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    return MessageSpec(
        name=data["name"],
        api_key=data.get("apiKey"),
        kind=data["type"],
        valid=parse_range(data.get("validVersions")),
        flexible=parse_range(data.get("flexibleVersions")),
        fields=_parse_fields(data.get("fields", []), common),
    )


_API_KEY = re.compile(r'"apiKey"\s*:\s*(\d+)')
_KIND = re.compile(r'"type"\s*:\s*"(request|response)"')


@functools.lru_cache(maxsize=None)
def _index() -> dict[tuple[int, str], str]:
    """(api_key, "request"|"response") -> spec file name.

    Built from two regex look-ups per file rather than a full parse: the broker's first request
    needs this index, and parsing all ~100 specs would add most of a second to start-up.
    """
    index = {}
    for entry in [e for folder in reversed(_folders()) for e in folder.iterdir()]:
        fname = entry.name
        if not fname.endswith(".json"):
            continue
        stem = fname[:-5]
        if not (stem.endswith("Request") or stem.endswith("Response")):
            continue
        text = strip_comments(entry.read_text(encoding="utf-8"))
        key, kind = _API_KEY.search(text), _KIND.search(text)
        if key and kind:
            index[(int(key.group(1)), kind.group(1))] = stem
    return index


# Kafka's API names, which are also the spec file names (<Name>Request.json, <Name>Response.json).
# Knowing them spares the broker's first request a scan of every spec file; any other key is
# found through the scanned index.
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs",
    36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs",
    47: "OffsetDelete", 60: "DescribeCluster", 61: "DescribeProducers", 65: "DescribeTransactions",
    66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    # issue 20
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 64: "UnregisterBroker", 74: "ListConfigResources",
    80: "AddRaftVoter", 81: "RemoveRaftVoter",
}


@functools.lru_cache(maxsize=None)
def message(api_key: int, kind: str) -> MessageSpec | None:
    """The request or response spec of an API key, or None if kafka-python ships none.

    Cached: finding the file costs two stat calls, and every generic response encoding asks
    for its API's spec (header version), so uncached it was ~15 us of each Produce answer."""
    extra = specs_kafka4.SPEC_BY_KEY.get((api_key, kind))
    if extra is not None:
        return load(extra)
    name = API_NAMES.get(api_key) or specs_kafka4.API_NAMES.get(api_key)
    if name is not None:
        stem = name + kind.capitalize()
        if _find(stem) is not None:
            spec = load(stem)
            if spec.api_key == api_key and spec.kind == kind:
                return spec
    stem = _index().get((api_key, kind))
    return load(stem) if stem else None


def known_api_keys() -> set[int]:
    return {key for key, _ in _index()}


def api_name(api_key: int) -> str:
    spec = message(api_key, "request")
    return spec.name[: -len("Request")] if spec else f"Api{api_key}"
