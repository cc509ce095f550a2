"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) v0 and PushTelemetry (72) v0.

Off by default, as in Kafka without a metrics reporter: the two APIs are then not advertised
and clients (Java, librdkafka >= 2.5) never push.  With ``client.telemetry.enable=true`` every
client is subscribed to the metric prefixes of ``client.telemetry.metrics`` (``*``: all)
every ``client.telemetry.push.interval.ms``; what it pushes (OpenTelemetry metrics, decoded by
``protocol.otlp``) is kept per client instance in ``ClientTelemetry`` (``broker.telemetry``):
the latest value of each metric, the client's id, address and software, and logged (one INFO
line per push, every value at DEBUG).  The metrics endpoint and console read the same object.

Kafka's rules (ClientMetricsManager):
- A zero ``client_instance_id`` gets a new one; the subscription id changes when the
  subscription does, and a push naming another one (or an instance never seen) gets
  UNKNOWN_SUBSCRIPTION_ID, upon which the client asks again.
- A push is accepted once per push interval (the first one after a GetTelemetrySubscriptions
  at any time, as clients jitter it); earlier ones get THROTTLING_QUOTA_EXCEEDED.  So does a
  GetTelemetrySubscriptions repeated within the interval.  A terminating push is always taken,
  and anything after it is INVALID_REQUEST.
- Payloads above ``telemetry.max.bytes`` get TELEMETRY_TOO_LARGE, compression types not
  offered UNSUPPORTED_COMPRESSION_TYPE, bytes that do not decompress or parse INVALID_RECORD.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from dataclasses import dataclass, field

from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import decompress

log = logging.getLogger("minikafka.telemetry")

GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY = 71, 72
ZERO_UUID = uuid.UUID(int=0)
# Kafka offers these, in this order of preference: zstd, lz4, gzip, snappy (and none is allowed).
ACCEPTED_COMPRESSION = [4, 3, 1, 2]
MAX_CLIENTS = 10_000


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    client_id: str | None
    client_host: str
    first_seen_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    pushes: int = 0
    terminated: bool = False
    resource: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)  # name -> (value, kind, attributes, time_unix_nano)


class ClientTelemetry:
    def __init__(self, config) -> None:
        prefixes = [p for p in str(config.get("client.telemetry.metrics")).split(",") if p]
        self.requested = [""] if "*" in prefixes else prefixes
        self.push_interval_ms = config.get("client.telemetry.push.interval.ms")
        self.max_bytes = config.get("telemetry.max.bytes")
        self.clients: dict[uuid.UUID, ClientInstance] = {}

    def subscription_id(self, instance_id: uuid.UUID) -> int:
        text = f"{','.join(self.requested)}|{self.push_interval_ms}|{instance_id}".encode()
        value = zlib.crc32(text)
        return value - (1 << 32) if value >= 1 << 31 else value

    def snapshot(self) -> list[dict]:
        """Every client instance with its latest metrics, for logs, HTTP and the console."""
        return [{"client_instance_id": str(c.instance_id), "client_id": c.client_id, "client_host": c.client_host,
                 "pushes": c.pushes, "last_push_ms": c.last_push_ms, "terminated": c.terminated,
                 "resource": dict(c.resource),
                 "metrics": {name: value for name, (value, _, _, _) in sorted(c.metrics.items())}}
                for c in self.clients.values()]

    def _instance(self, instance_id, ctx, now: int) -> ClientInstance:
        client = self.clients.get(instance_id)
        if client is None:
            if len(self.clients) >= MAX_CLIENTS:
                oldest = min(self.clients.values(), key=lambda c: max(c.last_push_ms, c.last_get_ms))
                del self.clients[oldest.instance_id]
            client = self.clients[instance_id] = ClientInstance(instance_id, ctx.client_id, ctx.client_host, now)
        return client

    def get_subscriptions(self, ctx, body: dict) -> dict:
        now = ctx.broker.now_ms()
        instance_id = body.get("client_instance_id") or ZERO_UUID
        if instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
        client = self._instance(instance_id, ctx, now)
        error = ErrorCode.NONE
        if client.last_get_ms and client.last_push_ms < client.last_get_ms \
                and now - client.last_get_ms < self.push_interval_ms:
            error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
        else:
            client.last_get_ms = now
        return {"throttle_time_ms": 0, "error_code": error, "client_instance_id": instance_id,
                "subscription_id": self.subscription_id(instance_id),
                "accepted_compression_types": ACCEPTED_COMPRESSION, "push_interval_ms": self.push_interval_ms,
                "telemetry_max_bytes": self.max_bytes, "delta_temporality": True,
                "requested_metrics": self.requested}

    def push(self, ctx, body: dict) -> int:
        now = ctx.broker.now_ms()
        instance_id = body.get("client_instance_id") or ZERO_UUID
        if instance_id == ZERO_UUID:
            return ErrorCode.INVALID_REQUEST
        client = self.clients.get(instance_id)
        if client is None or body.get("subscription_id") != self.subscription_id(instance_id):
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if client.terminated:
            return ErrorCode.INVALID_REQUEST
        terminating = bool(body.get("terminating"))
        if not terminating:
            accept = client.last_get_ms > client.last_push_ms or \
                now - max(client.last_get_ms, client.last_push_ms) >= self.push_interval_ms
            if not accept:
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        compression = body.get("compression_type", 0)
        if compression != 0 and compression not in ACCEPTED_COMPRESSION:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        payload = body.get("metrics") or b""
        if len(payload) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        try:
            raw = decompress(compression, payload) if compression else bytes(payload)
            if len(raw) > 64 * self.max_bytes:
                return ErrorCode.TELEMETRY_TOO_LARGE
            from minikafka.protocol import otlp  # loaded with the first push, not at start-up

            decoded = otlp.decode_metrics_data(raw)
        except Exception as exc:  # a bad payload is the client's error, not ours
            log.warning("client telemetry from %s client_id=%s is unreadable: %s", ctx.client_host, ctx.client_id, exc)
            return ErrorCode.INVALID_RECORD
        client.last_push_ms = now
        client.pushes += 1
        client.terminated = terminating
        client.client_id = ctx.client_id or client.client_id
        client.resource.update(decoded.resource)
        for p in decoded.points:
            key = p.name if not p.attributes else p.name + "{" + ",".join(
                f"{k}={v}" for k, v in sorted(p.attributes.items())) + "}"
            client.metrics[key] = (p.value, p.kind, p.attributes, p.time_unix_nano)
        software = " ".join(str(decoded.resource.get(k, "")) for k in ("client_software_name",
                                                                       "client_software_version")).strip()
        sample = ", ".join(f"{p.name}={p.value:g}" if isinstance(p.value, (int, float)) else p.name
                           for p in decoded.points[:3])
        log.info("client metrics from client_id=%s %s(%s) instance=%s: %d points%s%s", ctx.client_id,
                 f"{software} " if software else "", ctx.client_host, instance_id, len(decoded.points),
                 f" e.g. {sample}" if sample else "", " (terminating)" if terminating else "")
        if log.isEnabledFor(logging.DEBUG):
            for p in decoded.points:
                log.debug("  %s %s = %s %s", p.kind, p.name, p.value, p.attributes or "")
        return 0


def register(registry, broker) -> None:
    if not broker.config.get("client.telemetry.enable"):
        broker.telemetry = None
        return  # not advertised: clients do not push (Kafka without a metrics reporter)
    telemetry = broker.telemetry = ClientTelemetry(broker.config)

    async def get_subscriptions(ctx, body: dict) -> dict:
        return telemetry.get_subscriptions(ctx, body)

    async def push(ctx, body: dict) -> dict:
        return {"throttle_time_ms": 0, "error_code": telemetry.push(ctx, body)}

    registry.register(GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_subscriptions)
    registry.register(PUSH_TELEMETRY, 0, 0, push)
