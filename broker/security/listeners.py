"""Listeners as Kafka configures them.

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093`` names one server socket per
entry.  The name before ``://`` is the listener name; its security protocol comes from
``listener.security.protocol.map`` (Kafka's default maps each protocol name to itself), so
``CLIENT://:9094`` with ``listener.security.protocol.map=CLIENT:SASL_SSL`` is a SASL_SSL listener
named CLIENT.  ``advertised.listeners`` gives, per listener name, the address clients are told in
Metadata/FindCoordinator/DescribeCluster; a client always learns the address of the listener it
came in on (Kafka answers with the endpoints of the request's listener).

Without ``listeners`` the broker has one PLAINTEXT listener on ``--host``/``--port``, as before.
Listener-specific settings use Kafka's prefix ``listener.name.<name lower case>.<setting>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.broker.config import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class Listener:
    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, self.advertised_port or self.port

    def setting(self, config, name: str):
        """``listener.name.<listener>.<name>`` if set, else the broker-wide ``name``."""
        prefixed = f"listener.name.{self.name.lower()}.{name}"
        if prefixed in config.overrides:
            return config.overrides[prefixed]
        try:
            return config.get(name)
        except ConfigError:
            return None

    def __str__(self) -> str:
        return f"{self.name}({self.security_protocol})://{self.host}:{self.port}"


def _split_endpoints(text: str, what: str) -> list[tuple[str, str, int]]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ConfigError(f"{what}: {item!r} is not NAME://host:port")
        host, colon, port = rest.rpartition(":")
        if not colon:
            raise ConfigError(f"{what}: {item!r} has no port")
        host = host.strip("[]")
        try:
            port_no = int(port)
        except ValueError:
            raise ConfigError(f"{what}: bad port in {item!r}") from None
        if not 0 <= port_no <= 65535:
            raise ConfigError(f"{what}: port outside 0..65535 in {item!r}")
        out.append((name.upper(), host, port_no))
    return out


def protocol_map(text: str) -> dict[str, str]:
    mapping = {p: p for p in SECURITY_PROTOCOLS}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: bad entry {item!r}")
        mapping[name.strip().upper()] = proto
    return mapping


def parse_listeners(config) -> list[Listener]:
    """The broker's listeners, in configuration order (the first is the one ``--port`` reports)."""
    text = config.get("listeners")
    if not text:
        return [Listener("PLAINTEXT", "PLAINTEXT", config.host, config.port,
                         config.advertised_host, config.advertised_port)]
    mapping = protocol_map(config.get("listener.security.protocol.map"))
    listeners: list[Listener] = []
    seen = set()
    for name, host, port in _split_endpoints(text, "listeners"):
        if name in seen:
            raise ConfigError(f"listeners: listener {name} named twice")
        seen.add(name)
        proto = mapping.get(name)
        if proto is None:
            raise ConfigError(f"listeners: no security protocol for listener {name} "
                              "(add it to listener.security.protocol.map)")
        listeners.append(Listener(name, proto, host or "0.0.0.0", port))
    advertised = config.get("advertised.listeners")
    by_name = {item.name: item for item in listeners}
    for name, host, port in _split_endpoints(advertised or "", "advertised.listeners"):
        item = by_name.get(name)
        if item is None:
            raise ConfigError(f"advertised.listeners: {name} is not in listeners")
        item.advertised_host, item.advertised_port = host or None, port or None
    return listeners


def endpoint_for(ctx) -> tuple[str, int]:
    """The address a client should use: that of the listener its request came in on."""
    listener = getattr(getattr(ctx, "connection", None), "listener", None)
    if listener is not None:
        return listener.advertised
    return ctx.broker.config.advertised
