"""Fault injection for tests: scripted errors, delays, holds and closes on matching requests.

A fault has a *scope* (API key and version range, topic, partition, group, transactional id,
client id: every given field must match), a *duration* (the next ``count`` matching requests, a
``probability`` drawn from the fault's own seeded RNG, or until removed) and an *action*:

* ``error``        answer with ``error`` instead of handling the request;
* ``error_after``  handle the request (the write happens), then answer with ``error``, the case
                   idempotent producers exist for;
* ``delay``        handle it after ``delay_ms``;
* ``hold``         handle it only once the fault is released (``release``) or removed;
* ``close``        close the connection instead of answering; ``close_after`` closes it after
                   handling (the client never sees the response of a request that took effect).

Matching and the error responses are synchronous and free of I/O (``matches``, ``request_scope``,
``error_response``, ``fill_errors``); the connection calls ``FaultEngine.intercept`` only while a
fault or a stalled partition exists, so the normal path pays one attribute read.

Error responses follow the response schema of the API (protocol specs): every ``error_code``
field gets the code, arrays keyed by topic/partition/group mirror the request's entries, and
offsets, node ids and epochs are -1 as Kafka sends them with an error.

Stalled partitions (``stall``) make Produce and Fetch requests that touch them wait until
``unstall``.  Every injection is logged at WARNING with its fault id and scope.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from minikafka.protocol import specs
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.faults")

PRODUCE, FETCH, FIND_COORDINATOR = 0, 1, 10

ACTIONS = ("error", "error_after", "delay", "hold", "close", "close_after")
MAX_DELAY_MS = 300_000


class FaultError(ValueError):
    """A fault description or control request that is not valid; nothing was changed."""


def api_key_of(value: Any) -> int:
    """An API given as its key (8) or Kafka's name ("OffsetCommit"), validated."""
    if isinstance(value, bool):
        raise FaultError(f"unknown api {value!r}")
    if isinstance(value, int):
        if value in specs.API_NAMES or value in specs.known_api_keys():
            return value
        raise FaultError(f"unknown api key {value}")
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return api_key_of(int(text))
        for key, name in specs.API_NAMES.items():
            if name.lower() == text.lower():
                return key
        for key in specs.known_api_keys():
            if specs.api_name(key).lower() == text.lower():
                return key
    raise FaultError(f"unknown api {value!r}")


def error_code_of(value: Any) -> int:
    if isinstance(value, bool):
        raise FaultError(f"unknown error {value!r}")
    if isinstance(value, int):
        try:
            return int(ErrorCode(value))
        except ValueError:
            raise FaultError(f"unknown error code {value}") from None
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return error_code_of(int(text))
        try:
            return int(ErrorCode[text.upper()])
        except KeyError:
            raise FaultError(f"unknown error {value!r}") from None
    raise FaultError(f"unknown error {value!r}")


def _int(spec: dict, name: str, lo: int, hi: int) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultError(f"{name} must be an integer")
    if not lo <= value <= hi:
        raise FaultError(f"{name} must be between {lo} and {hi}")
    return value


def _str(spec: dict, name: str) -> str | None:
    value = spec.get(name)
    if value is not None and not isinstance(value, str):
        raise FaultError(f"{name} must be a string")
    return value


# -- request scope ----------------------------------------------------------------------------

@dataclass
class RequestScope:
    topics: set = field(default_factory=set)
    partitions: set = field(default_factory=set)  # (topic, partition)
    groups: set = field(default_factory=set)
    transactional_ids: set = field(default_factory=set)


_TOPIC_NAME_KEYS = ("name", "topic", "topic_name")
_PARTITION_KEYS = ("partition_index", "partition", "index")


def request_scope(api_key: int, body: Any) -> RequestScope:
    """The topics, partitions, groups and transactional ids a request body names."""
    scope = RequestScope()
    if not isinstance(body, dict):
        return scope
    if api_key == FIND_COORDINATOR:
        keys = list(body.get("coordinator_keys") or []) or ([body["key"]] if body.get("key") else [])
        (scope.transactional_ids if body.get("key_type", 0) == 1 else scope.groups).update(keys)
    for key in ("group_id", "transactional_id"):
        value = body.get(key)
        if isinstance(value, str):
            (scope.groups if key == "group_id" else scope.transactional_ids).add(value)
    for key in ("groups", "groups_names"):
        for g in body.get(key) or []:
            if isinstance(g, str):
                scope.groups.add(g)
            elif isinstance(g, dict) and isinstance(g.get("group_id"), str):
                scope.groups.add(g["group_id"])
                _walk_topics(g, scope)
    _walk_topics(body, scope)
    return scope


def _walk_topics(obj: dict, scope: RequestScope) -> None:
    for key, value in obj.items():
        if not (isinstance(value, list) and "topic" in key):
            continue
        for entry in value:
            if isinstance(entry, str):
                scope.topics.add(entry)
                continue
            if not isinstance(entry, dict):
                continue
            name = next((entry[k] for k in _TOPIC_NAME_KEYS if isinstance(entry.get(k), str)), None)
            if name is None:
                continue
            scope.topics.add(name)
            for pkey, pvalue in entry.items():
                if not (isinstance(pvalue, list) and "partition" in pkey):
                    continue
                for p in pvalue:
                    if isinstance(p, int):
                        scope.partitions.add((name, p))
                    elif isinstance(p, dict):
                        index = next((p[k] for k in _PARTITION_KEYS if isinstance(p.get(k), int)), None)
                        if index is not None:
                            scope.partitions.add((name, index))


# -- faults ------------------------------------------------------------------------------------

class Fault:
    def __init__(self, fault_id: int, spec: dict) -> None:
        if not isinstance(spec, dict):
            raise FaultError("a fault is a JSON object")
        known = {"api", "min_version", "max_version", "topic", "partition", "group", "transactional_id",
                 "client_id", "action", "error", "delay_ms", "count", "probability", "seed"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise FaultError(f"unknown fault field(s): {', '.join(unknown)}")
        self.id = fault_id
        action = spec.get("action", "error")
        if action not in ACTIONS:
            raise FaultError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
        self.action = action
        self.api_key = api_key_of(spec["api"]) if spec.get("api") is not None else None
        self.min_version = _int(spec, "min_version", 0, 32767)
        self.max_version = _int(spec, "max_version", 0, 32767)
        if self.min_version is not None and self.max_version is not None and self.min_version > self.max_version:
            raise FaultError("min_version is above max_version")
        self.topic = _str(spec, "topic")
        self.partition = _int(spec, "partition", 0, 2**31 - 1)
        if self.partition is not None and self.topic is None:
            raise FaultError("partition needs a topic")
        self.group = _str(spec, "group")
        self.transactional_id = _str(spec, "transactional_id")
        self.client_id = _str(spec, "client_id")
        self.error = None
        if action in ("error", "error_after"):
            if spec.get("error") is None:
                raise FaultError(f"action {action} needs an error (name or code)")
            self.error = error_code_of(spec["error"])
            if self.error == ErrorCode.NONE:
                raise FaultError("error NONE is not a fault")
        elif spec.get("error") is not None:
            raise FaultError(f"action {action} takes no error")
        self.delay_ms = _int(spec, "delay_ms", 0, MAX_DELAY_MS) or 0
        if action == "delay" and not self.delay_ms:
            raise FaultError("action delay needs delay_ms > 0")
        self.count = _int(spec, "count", 1, 2**31 - 1)
        probability = spec.get("probability")
        if probability is not None:
            if isinstance(probability, bool) or not isinstance(probability, (int, float)) \
                    or not 0 < probability <= 1:
                raise FaultError("probability must be a number in (0, 1]")
            probability = float(probability)
        self.probability = probability
        seed = _int(spec, "seed", -(2**63), 2**63 - 1)
        import random  # here, not at every broker start (test faults only)

        self._rng = random.Random(seed)
        self.seed = seed
        self.hits = 0
        self.released = asyncio.Event() if action == "hold" else None

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count

    def matches(self, api_key: int, api_version: int, client_id: str | None, scope: RequestScope) -> bool:
        if self.api_key is not None and api_key != self.api_key:
            return False
        if self.min_version is not None and api_version < self.min_version:
            return False
        if self.max_version is not None and api_version > self.max_version:
            return False
        if self.client_id is not None and client_id != self.client_id:
            return False
        if self.topic is not None:
            if self.partition is not None:
                if (self.topic, self.partition) not in scope.partitions:
                    return False
            elif self.topic not in scope.topics:
                return False
        if self.group is not None and self.group not in scope.groups:
            return False
        if self.transactional_id is not None and self.transactional_id not in scope.transactional_ids:
            return False
        return True

    def take(self) -> bool:
        """Count a hit if this match fires (the probability draw), False when it does not."""
        if self.exhausted:
            return False
        if self.probability is not None and self._rng.random() >= self.probability:
            return False
        self.hits += 1
        return True

    def scope_text(self) -> str:
        parts = []
        if self.api_key is not None:
            parts.append(f"api={specs.API_NAMES.get(self.api_key, self.api_key)}")
        if self.min_version is not None or self.max_version is not None:
            parts.append(f"versions={self.min_version or 0}-{'' if self.max_version is None else self.max_version}")
        for name in ("topic", "partition", "group", "transactional_id", "client_id"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        return " ".join(parts) or "every request"

    def describe(self) -> dict:
        return {
            "id": self.id, "action": self.action,
            "api": specs.API_NAMES.get(self.api_key, self.api_key) if self.api_key is not None else None,
            "api_key": self.api_key, "min_version": self.min_version, "max_version": self.max_version,
            "topic": self.topic, "partition": self.partition, "group": self.group,
            "transactional_id": self.transactional_id, "client_id": self.client_id,
            "error": ErrorCode(self.error).name if self.error is not None else None,
            "error_code": self.error, "delay_ms": self.delay_ms or None, "count": self.count,
            "probability": self.probability, "seed": self.seed, "hits": self.hits,
            "released": self.released.is_set() if self.released is not None else None,
        }


class FaultEngine:
    def __init__(self, broker=None) -> None:
        self.broker = broker
        self.faults: dict[int, Fault] = {}
        self.stalled: dict[tuple[str, int], asyncio.Event] = {}
        self._ids = itertools.count(1)
        self.injected = 0

    @property
    def active(self) -> bool:
        return bool(self.faults) or bool(self.stalled)

    def add(self, spec: dict) -> Fault:
        fault = Fault(next(self._ids), spec)
        self.faults[fault.id] = fault
        log.warning("fault #%d added: %s on %s%s", fault.id, fault.action, fault.scope_text(),
                    "" if fault.error is None else f" error={ErrorCode(fault.error).name}")
        return fault

    def get(self, fault_id: int) -> Fault:
        fault = self.faults.get(fault_id)
        if fault is None:
            raise FaultError(f"no fault {fault_id}")
        return fault

    def remove(self, fault_id: int) -> Fault:
        fault = self.get(fault_id)
        del self.faults[fault_id]
        if fault.released is not None:
            fault.released.set()  # held requests go on
        log.warning("fault #%d removed after %d hits", fault_id, fault.hits)
        return fault

    def release(self, fault_id: int) -> Fault:
        fault = self.get(fault_id)
        if fault.released is None:
            raise FaultError(f"fault {fault_id} is not a hold")
        fault.released.set()
        log.warning("fault #%d released", fault_id)
        return fault

    def list(self) -> list[dict]:
        return [f.describe() for f in self.faults.values()]

    def stall(self, topic: str, partition: int) -> None:
        self.stalled.setdefault((topic, partition), asyncio.Event())
        log.warning("partition %s-%d stalled: produce and fetch wait", topic, partition)

    def unstall(self, topic: str, partition: int) -> bool:
        event = self.stalled.pop((topic, partition), None)
        if event is not None:
            event.set()
            log.warning("partition %s-%d released", topic, partition)
        return event is not None

    def reset(self) -> None:
        for fault in self.faults.values():
            if fault.released is not None:
                fault.released.set()
        for event in self.stalled.values():
            event.set()
        if self.faults or self.stalled:
            log.warning("faults reset (%d faults, %d stalled partitions)", len(self.faults), len(self.stalled))
        self.faults.clear()
        self.stalled.clear()

    def match(self, api_key: int, api_version: int, client_id: str | None, body: Any) -> Fault | None:
        if not self.faults:
            return None
        scope = request_scope(api_key, body)
        for fault in list(self.faults.values()):
            if fault.matches(api_key, api_version, client_id, scope) and fault.take():
                log.warning("fault #%d injected: %s on %s v%d client_id=%s (scope %s, hit %d)",
                            fault.id, fault.action, specs.API_NAMES.get(api_key, api_key), api_version,
                            client_id, fault.scope_text(), fault.hits)
                self.injected += 1
                return fault
        return None

    def stalls_for(self, api_key: int, body: Any) -> list[asyncio.Event]:
        if not self.stalled or api_key not in (PRODUCE, FETCH):
            return []
        scope = request_scope(api_key, body)
        return [event for key, event in self.stalled.items() if key in scope.partitions]

    def intercept(self, handler, ctx, body):
        """The coroutine the connection runs instead of ``handler(ctx, body)``, or None when no
        fault or stall concerns this request."""
        stalls = self.stalls_for(ctx.api_key, body)
        fault = self.match(ctx.api_key, ctx.api_version, ctx.client_id, body)
        if fault is None and not stalls:
            return None
        return self._run(fault, stalls, handler, ctx, body)

    async def _run(self, fault: Fault | None, stalls, handler, ctx, body):
        connection = ctx.connection
        for event in stalls:
            await event.wait()
        if fault is not None:
            if fault.action == "close":
                if connection is not None:
                    connection.close()
                return None
            if fault.action == "error":
                return error_response(ctx.api_key, ctx.api_version, body, fault.error)
            if fault.delay_ms:
                await asyncio.sleep(fault.delay_ms / 1000.0)
            if fault.released is not None:
                await fault.released.wait()
        response = await handler(ctx, body)
        if fault is not None:
            if fault.action == "error_after" and response is not None:
                fill_errors(response, fault.error)
            elif fault.action == "close_after" and connection is not None:
                connection.close()
        return response


# -- error responses from the schema -----------------------------------------------------------

# Request array -> response array names where the two differ (the rest share their names).
_ARRAY_ALIASES = {
    (PRODUCE, "responses"): "topic_data", (PRODUCE, "partition_responses"): "partition_data",
    (FETCH, "responses"): "topics",
    (FIND_COORDINATOR, "coordinators"): "coordinator_keys",
    (42, "results"): "groups_names",  # DeleteGroups
    (19, "topics"): "topics", (20, "responses"): "topic_names",  # CreateTopics, DeleteTopics
    (23, "topics"): "topics",  # OffsetForLeaderEpoch
}
_ID_KEYS = ("name", "topic", "topic_id", "topic_name", "partition_index", "partition", "index", "group_id",
            "key", "transactional_id", "member_id", "group_instance_id")
_ID_ALIASES = {"partition_index": ("partition", "index"), "index": ("partition_index", "partition"),
               "partition": ("partition_index", "index"), "name": ("topic", "topic_name"),
               "topic": ("name", "topic_name")}
_MINUS_ONE = ("node_id", "leader_id", "leader_epoch", "base_offset", "high_watermark", "last_stable_offset",
              "log_start_offset", "offset", "committed_offset", "committed_leader_epoch", "producer_id",
              "producer_epoch", "generation_id", "port", "end_offset", "timestamp", "log_append_time_ms",
              "preferred_read_replica")


def _value_for(entry: Any, key: str):
    if isinstance(entry, dict):
        for k in (key,) + _ID_ALIASES.get(key, ()):
            if k in entry:
                return entry[k]
    return None


def _build(api_key: int, fields, version: int, request: Any, code: int) -> dict:
    from minikafka.protocol.codec import default_value

    out: dict = {}
    for f in fields:
        if not specs.in_range(f.versions, version):
            continue
        value = default_value(f, version)
        if f.key == "error_code":
            value = code
        elif f.key == "error_message" and isinstance(value, (str, type(None))):
            value = ErrorCode(code).name
        elif f.key in _MINUS_ONE and isinstance(value, int) and not isinstance(value, bool):
            value = -1
        elif f.is_array and f.is_struct:
            source_key = _ARRAY_ALIASES.get((api_key, f.key), f.key)
            entries = request.get(source_key) if isinstance(request, dict) else None
            if isinstance(entries, list):
                value = [_build_entry(api_key, f, version, e, code) for e in entries]
        elif f.is_struct and not f.is_array and isinstance(value, dict):
            value = _build(api_key, f.fields, version, request, code)
        elif f.key in _ID_KEYS:
            found = _value_for(request, f.key)
            if found is not None and type(found) is type(value):
                value = found
        out[f.key] = value
    return out


def _build_entry(api_key: int, f, version: int, entry: Any, code: int) -> dict:
    if not isinstance(entry, dict):
        # An array of names in the request (groups, coordinator keys, topic names): the response
        # entry carries it in its first string id field.
        built = _build(api_key, f.fields, version, {}, code)
        for sub in f.fields:
            if sub.key in _ID_KEYS and isinstance(built.get(sub.key), str):
                built[sub.key] = entry
                break
        return built
    return _build(api_key, f.fields, version, entry, code)


def error_response(api_key: int, api_version: int, request: Any, code: int) -> dict:
    """A response to ``request`` carrying ``code`` in every error field, shaped by the schema."""
    spec = specs.message(api_key, "response")
    if spec is None:
        raise FaultError(f"no response schema for api {api_key}")
    return _build(api_key, spec.fields, api_version, request, code)


def fill_errors(response: Any, code: int) -> None:
    """Set every ``error_code`` in an already built response (error after handling)."""
    if isinstance(response, dict):
        for key, value in response.items():
            if key == "error_code":
                response[key] = code
            elif isinstance(value, (dict, list)):
                fill_errors(value, code)
    elif isinstance(response, list):
        for item in response:
            fill_errors(item, code)
