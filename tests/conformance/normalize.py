"""Normalisation of decoded responses before they are compared: the rules, all of them.

Values that legitimately differ between two brokers in the same state are replaced by
placeholders.  Identities (topic ids, producer ids, member ids, session ids, transactional
coordinators' generated ids) become ``<kind-N>``, numbered per scenario and per broker in order
of first appearance: so "the same id as before" and "a different id" still compare, only the
concrete value does not.  The rules, by field name (snake_case, at any depth):

1. ``throttle_time_ms``                   -> ``<throttle>`` (a quota scenario checks it itself)
2. ``cluster_id``                         -> ``<cluster-id>`` when not null
3. ``host``, ``port`` (brokers, nodes, coordinators, endpoints, voters) -> ``<host>``/``<port>``
   when the port is not -1 / the host is not empty
4. ``topic_id`` (and ``*_topic_id``)      -> ``<topic-id-N>``; the zero uuid stays
5. ``producer_id`` / ``*_producer_id``    -> ``<pid-N>``; -1 stays
6. ``member_id``, ``leader`` (group), ``*_member_id``, ``member_id`` in lists -> ``<member-N>``;
   "" stays; a member id's shape (``client-id-UUID``) is checked by ``member_shape``
7. timestamps: names containing ``timestamp`` or ending in ``_time_ms``/``_time`` (except
   ``throttle_time_ms``, rule 1) -> ``<time>`` unless -1 or 0
8. ``session_id`` (fetch sessions)        -> ``<session-N>``; 0 stays
9. ``client_instance_id`` (telemetry)     -> ``<uuid-N>``
10. record batches (``records``): each v2 batch header's CRC, producer id (rule 5) and, with
    LogAppendTime or in a control batch (a transaction marker, stamped when written), its
    timestamps, are replaced; the record bytes compare as they are
11. ``incarnation_id``, ``directory_id``/``log_dir`` uuids, ``voter`` directory ids -> ``<uuid-N>``;
    ``log_dir``/``path`` strings -> ``<path>``
12. ``error_message``: kept (differences in wording are listed in allowed.toml, rule by rule)
13. lists of results keyed by a name or index (topics, partitions, configs, groups, ...): Kafka
    builds many of them from hash maps, so their order is unspecified; such a list (every item a
    dict with the same key field, values unique) becomes a mapping from that key to the item, so
    differences show up per topic / partition / config name (path ``.../configs/retention.ms/value``)
14. ``total_bytes``/``usable_bytes`` of log directories -> ``<bytes>`` when >= 0 (disk state)
15. the scenario's name prefix in any string -> ``<p>`` (done by the engine, engine.Ctx)
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

ZERO_UUID = uuid.UUID(int=0)

_HOST_KEYS = {"host"}
_PORT_KEYS = {"port"}
_MEMBER_KEYS = {"member_id", "leader", "group_leader", "leader_id_str"}


class Placeholders:
    """Per-scenario, per-broker numbering of identities."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[Any, str]] = {}

    def get(self, kind: str, value: Any) -> str:
        m = self.maps.setdefault(kind, {})
        if value not in m:
            m[value] = f"<{kind}-{len(m) + 1}>"
        return m[value]


def _is_time(key: str) -> bool:
    if key == "throttle_time_ms":
        return False
    return ("timestamp" in key or key.endswith("_time_ms") or key.endswith("_time")
            or key in ("time_ms",))


_LIST_KEYS = ("name", "topic", "topic_name", "resource_name", "partition_index", "partition", "index",
              "group_id", "transactional_id", "api_key", "key", "member_id")


def _keyed(items: list) -> dict | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for k in _LIST_KEYS:
        if all(k in i for i in items):
            keys = [i[k] for i in items]
            if len(set(map(repr, keys))) == len(keys) and all(isinstance(x, (str, int)) for x in keys):
                return {f"{k}={x}": i for x, i in zip(keys, items)}
            return None
    return None


def normalize(value: Any, ph: Placeholders, key: str = "", parent: str = "") -> Any:
    if isinstance(value, dict):
        return {k: normalize(v, ph, k, key) for k, v in value.items()}
    if isinstance(value, list):
        if key in _MEMBER_KEYS or key.endswith("member_ids"):
            return [ph.get("member", v) if v else v for v in value]
        items = [normalize(v, ph, key, parent) for v in value]
        keyed = _keyed(items) if key != "records" else None
        return keyed if keyed is not None else items
    k = key
    if k == "throttle_time_ms":
        return "<throttle>"
    if k == "cluster_id":
        return None if value is None else "<cluster-id>"
    if k in _HOST_KEYS and isinstance(value, str):
        return "<host>" if value else value
    if k in _PORT_KEYS and isinstance(value, int):
        return "<port>" if value >= 0 else value
    if isinstance(value, uuid.UUID):
        if value == ZERO_UUID:
            return value
        if k.endswith("topic_id"):
            return ph.get("topic-id", value)
        return ph.get("uuid", value)
    if k.endswith("producer_id") and isinstance(value, int):
        return value if value < 0 else ph.get("pid", value)
    if (k in _MEMBER_KEYS or k.endswith("member_id")) and isinstance(value, str):
        return ph.get("member", value) if value else value
    if _is_time(k) and isinstance(value, int):
        return value if value in (-1, 0) else "<time>"
    if k == "session_id" and isinstance(value, int):
        return value if value == 0 else ph.get("session", value)
    if k in ("records",) and isinstance(value, (bytes, bytearray)):
        return _records(bytes(value), ph)
    if k in ("total_bytes", "usable_bytes") and isinstance(value, int):
        return "<bytes>" if value >= 0 else value
    if k in ("log_dir", "path") and isinstance(value, str):
        return "<path>"
    return value


_HEADER = struct.Struct(">qiibIhiqqqhii")


def _records(data: bytes, ph: Placeholders) -> Any:
    """A list of batch headers (with rule 5/7/10 applied) and their record bytes."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        (base_offset, length, epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, pepoch,
         base_seq, count) = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != 2 or end > len(data):
            break
        log_append = bool(attrs & 0x08) or bool(attrs & 0x20)  # control batches carry the write time
        out.append({
            "base_offset": base_offset, "leader_epoch": epoch, "attributes": attrs,
            "last_offset_delta": last_delta,
            "base_timestamp": "<time>" if log_append else base_ts,
            "max_timestamp": "<time>" if log_append else max_ts,
            "producer_id": pid if pid < 0 else ph.get("pid", pid), "producer_epoch": pepoch,
            "base_sequence": base_seq, "record_count": count,
            "records": data[pos + 61:end] if not (attrs & 0x20) else data[pos + 61:end],
        })
        pos = end
    if pos < len(data):
        out.append({"trailing_bytes": len(data) - pos})
    return out


def member_shape(member_id: str) -> bool:
    """A generated member id: ``<client id or instance id>-<uuid>``."""
    head, _, tail = member_id.rpartition("-")
    try:
        uuid.UUID(member_id[-36:])
        return True
    except ValueError:
        return bool(head) and len(tail) > 0
