"""Seeding: create topics and preload records at start (``minikafka serve --seed FILE``), from
the embedded broker and the pytest fixtures, and over the control API.

A seed file is JSON lines; blank lines and lines starting with ``#`` are skipped.  Two kinds:

* a topic: ``{"topic": "orders", "partitions": 3, "configs": {"cleanup.policy": "compact"}}``
  (a line with ``partitions`` or ``configs`` and no ``value``/``key``); an existing topic is kept;
* a record: ``{"topic": "orders", "partition": 0, "key": "k1", "value": "v1",
  "headers": {"h": "x"}, "timestamp": 1700000000000}``.  ``partition`` defaults to 0,
  ``timestamp`` to the broker clock; key and value are text (UTF-8), ``null``, or any other JSON
  value (written as its JSON text); ``{"base64": "..."}`` gives raw bytes.  Headers are an object
  or a list of ``[name, value]`` pairs.  A record's topic is created (default partitions) if the
  file did not create it.

Consecutive records of one partition are written as one batch, in file order.  Any error names the
line and nothing after it is applied.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, Iterable

from minikafka.protocol.errors import KafkaError
from minikafka.protocol.records import build_batch

log = logging.getLogger("minikafka.seed")

_RECORD_KEYS = {"topic", "partition", "key", "value", "headers", "timestamp"}
_TOPIC_KEYS = {"topic", "partitions", "configs", "replication_factor"}


class SeedError(ValueError):
    pass


def _bytes(value: Any, what: str, where: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and set(value) == {"base64"}:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise SeedError(f"{where}: {what} is not valid base64: {exc}") from None
    return json.dumps(value, separators=(",", ":")).encode()


def parse_lines(lines: Iterable[str], source: str = "seed") -> list[dict]:
    """Parse JSON lines into items ``{"kind": "topic"|"record", ...}``; raises SeedError."""
    items = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SeedError(f"{source}:{number}: not JSON: {exc.msg}") from None
        items.append(parse_item(obj, f"{source}:{number}"))
    return items


def parse_item(obj: Any, where: str = "seed") -> dict:
    if not isinstance(obj, dict):
        raise SeedError(f"{where}: expected a JSON object")
    topic = obj.get("topic")
    if not isinstance(topic, str) or not topic:
        raise SeedError(f"{where}: 'topic' must be a non-empty string")
    is_topic = ("partitions" in obj or "configs" in obj) and not ({"key", "value"} & set(obj))
    if is_topic:
        unknown = set(obj) - _TOPIC_KEYS
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {sorted(unknown)}")
        partitions = obj.get("partitions", -1)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or not (partitions == -1 or 1 <= partitions <= 10000):
            raise SeedError(f"{where}: 'partitions' must be an integer between 1 and 10000")
        configs = obj.get("configs") or {}
        if not isinstance(configs, dict):
            raise SeedError(f"{where}: 'configs' must be an object")
        return {"kind": "topic", "topic": topic, "partitions": partitions,
                "configs": {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in configs.items()},
                "where": where}
    unknown = set(obj) - _RECORD_KEYS
    if unknown:
        raise SeedError(f"{where}: unknown field(s) {sorted(unknown)}")
    partition = obj.get("partition", 0)
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise SeedError(f"{where}: 'partition' must be a non-negative integer")
    timestamp = obj.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0):
        raise SeedError(f"{where}: 'timestamp' must be epoch milliseconds")
    headers_in = obj.get("headers") or []
    if isinstance(headers_in, dict):
        headers_in = list(headers_in.items())
    if not isinstance(headers_in, list):
        raise SeedError(f"{where}: 'headers' must be an object or a list of [name, value]")
    headers = []
    for h in headers_in:
        if not (isinstance(h, (list, tuple)) and len(h) == 2 and isinstance(h[0], str)):
            raise SeedError(f"{where}: a header must be [name, value]")
        headers.append((h[0], _bytes(h[1], "header value", where)))
    return {"kind": "record", "topic": topic, "partition": partition,
            "key": _bytes(obj.get("key"), "key", where), "value": _bytes(obj.get("value"), "value", where),
            "headers": headers, "timestamp": timestamp, "where": where}


def apply(broker, items: list[dict]) -> dict:
    """Create the topics and append the records (on the broker's loop); returns counts."""
    controller = broker.controller
    topics_created = 0
    records = 0
    pending: list[tuple] = []
    pending_key: tuple[str, int] | None = None

    def flush() -> None:
        nonlocal pending, pending_key, records
        if not pending:
            return
        topic, partition = pending_key
        batch = build_batch(pending)
        controller.log(topic, partition).append(batch)
        broker.notify_append(topic, partition)
        records += len(pending)
        pending, pending_key = [], None

    for item in items:
        topic = item["topic"]
        try:
            if item["kind"] == "topic":
                flush()
                if controller.topic(topic) is None:
                    controller.create_topic(topic, num_partitions=item["partitions"], configs=item["configs"])
                    topics_created += 1
                continue
            if controller.topic(topic) is None:
                flush()
                controller.create_topic(topic)
                topics_created += 1
            info = controller.topic(topic)
            if item["partition"] >= info.num_partitions:
                raise SeedError(f"{item['where']}: {topic} has {info.num_partitions} partitions, "
                                f"no partition {item['partition']}")
            key = (topic, item["partition"])
            if key != pending_key:
                flush()
                pending_key = key
            ts = item["timestamp"] if item["timestamp"] is not None else broker.now_ms()
            pending.append((item["key"], item["value"], item["headers"], ts))
        except KafkaError as exc:
            raise SeedError(f"{item['where']}: {exc}") from None
    try:
        flush()
    except KafkaError as exc:
        raise SeedError(f"{items[-1]['where']}: {exc}") from None
    if topics_created or records:
        log.info("seeded %d topics and %d records", topics_created, records)
    return {"topics_created": topics_created, "records": records}


def load_file(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return parse_lines(f, source=path)
