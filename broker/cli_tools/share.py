"""Share groups (KIP-932) for ``minikafka group list|describe``.

The client library the CLI uses (confluent-kafka) neither lists share groups nor describes them, so
these requests are sent with minikafka's own codec over a plain socket: ListGroups v5 with the type
filter ``share`` to every broker (Metadata names them), FindCoordinator and ShareGroupDescribe v1 to
the group's coordinator.  That works on PLAINTEXT listeners only (TLS/SASL settings given with -X
are not spoken here; the command says so).  Per share partition counts that no Kafka API carries
(records in flight, acquired, archived) come from a minikafka broker's HTTP API when ``--http URL``
names it (``/api/share-groups/{group}``).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request

from minikafka.protocol.errors import ErrorCode

from .common import CliError

LIST_GROUPS, METADATA, FIND_COORDINATOR, SHARE_GROUP_DESCRIBE = 16, 3, 10, 77


class _Conn:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise CliError(f"cannot connect to {host}:{port}: {exc}") from None
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: dict) -> dict:
        from minikafka.protocol.codec import decode_response, encode_request

        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, "minikafka-cli", body))
        size = int.from_bytes(self._read(4), "big", signed=True)
        _, response = decode_response(api_key, version, self._read(size))
        return response

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise CliError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def plaintext(args) -> bool:
    """Whether the CLI's settings leave the connection plain (no -X security.protocol other than PLAINTEXT)."""
    for item in getattr(args, "client_settings", []):
        name, _, value = item.partition("=")
        if name.strip() == "security.protocol" and value.strip().upper() != "PLAINTEXT":
            return False
    return True


def _address(text: str) -> tuple[str, int]:
    first = text.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise CliError(f"bad bootstrap address {first!r}")
    return host.strip("[]"), int(port)


def _brokers(args) -> list[tuple[str, int]]:
    conn = _Conn(*_address(args.bootstrap), args.timeout)
    try:
        metadata = conn.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    finally:
        conn.close()
    return [(b["host"], b["port"]) for b in metadata["brokers"]] or [_address(args.bootstrap)]


def list_share_groups(args) -> list[dict]:
    """[{group, state, type: "share"}] from every broker."""
    rows = []
    for host, port in _brokers(args):
        conn = _Conn(host, port, args.timeout)
        try:
            answer = conn.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        finally:
            conn.close()
        rows.extend({"group": g["group_id"], "state": g["group_state"], "type": "share"} for g in answer["groups"])
    return rows


def describe_share_group(args, name: str) -> dict | None:
    """The share group as ShareGroupDescribe answers it (None: no share group of that name)."""
    conn = _Conn(*_address(args.bootstrap), args.timeout)
    try:
        found = conn.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [name]})["coordinators"][0]
    finally:
        conn.close()
    if found["error_code"]:
        raise CliError(f"no coordinator for group {name}: error {found['error_code']}")
    conn = _Conn(found["host"], found["port"], args.timeout)
    try:
        group = conn.request(SHARE_GROUP_DESCRIBE, 1, {"group_ids": [name],
                                                         "include_authorized_operations": False})["groups"][0]
    finally:
        conn.close()
    if group["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if group["error_code"]:
        raise CliError(f"cannot describe share group {name}: error {group['error_code']} "
                       f"{group.get('error_message') or ''}".rstrip())
    members = [{"member_id": m["member_id"], "member_epoch": m["member_epoch"], "client_id": m["client_id"],
                "host": m["client_host"], "rack_id": m["rack_id"],
                "subscribed_topic_names": sorted(m["subscribed_topic_names"]),
                "assignment": [{"topic": tp["topic_name"], "partition": p}
                               for tp in sorted(m["assignment"]["topic_partitions"], key=lambda t: t["topic_name"])
                               for p in sorted(tp["partitions"])]}
               for m in sorted(group["members"], key=lambda m: m["member_id"])]
    described = {"group": name, "type": "share", "state": group["group_state"], "group_epoch": group["group_epoch"],
                 "assignment_epoch": group["assignment_epoch"], "assignor": group["assignor_name"],
                 "members": members, "partitions": []}
    http = getattr(args, "http", None)
    if http:
        described["partitions"] = _partitions_over_http(http, name, args.timeout)
    return described


def _partitions_over_http(base: str, name: str, timeout: float) -> list[dict]:
    url = base.rstrip("/") + "/api/share-groups/" + urllib.parse.quote(name, safe="")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read()).get("partitions", [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise CliError(f"{url}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise CliError(f"{url}: {exc}") from None
