"""TLS on a listener: Kafka's PEM key/trust store settings -> ``ssl.SSLContext``, the TLS
handshake on an accepted socket, and the principal of a mutual-TLS client.

Settings (each may be prefixed ``listener.name.<listener>.``, as in Kafka):

- ``ssl.keystore.type=PEM`` with either ``ssl.keystore.location`` (a PEM file holding the private
  key and the certificate chain) or the inline ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key``; ``ssl.key.password`` decrypts an encrypted key.
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``: the CAs that client certificates must chain to.
- ``ssl.client.auth``: ``none``, ``requested`` (verify a certificate if one is sent) or
  ``required``.
- ``ssl.enabled.protocols``: ``TLSv1.2,TLSv1.3`` (Kafka's default); nothing older is offered.
- ``ssl.principal.mapping.rules``: ``DEFAULT`` (the subject's distinguished name in RFC 2253
  form, as Java's ``X500Principal.getName()``) or ``RULE:regex/replacement/[LU]`` entries tried in
  order, as Kafka's ``SslPrincipalMapper``.

Handshake: the listener accepts sockets itself instead of handing the SSLContext to
``create_server``, because asyncio drops a failed handshake (a plaintext client on a TLS port,
garbage, an untrusted client certificate) without telling anyone; here each failure closes that
one connection with a log line naming the peer.  The handshake and the connection's encryption
run in the loop's SSL protocol (uvloop's), or, with ``TlsServer.offload = True``, on a thread of
the listener's own (broker/security/tls_thread.py), which does the handshake and all of the
connection's encryption and socket I/O off the event loop.  Measured side by side on a 2-core
machine that also runs the clients (bench/RESULTS.md, "tls2"), the thread moves ~1.2 ms per MB
produced off the loop but costs as much CPU in all: it was no faster for produce and 15% slower
for consume, so the loop's path is the default; the thread is for a machine whose loop, not its
cores, is the limit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import ssl
import tempfile

from minikafka.broker.config import ConfigError

log = logging.getLogger("minikafka.tls")

HANDSHAKE_TIMEOUT_S = 10.0

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _inline_pem_file(text: str) -> str:
    """Write inline PEM (Kafka lets key stores be given as config values) to a private temp file;
    ``ssl`` loads key material only from files.  The caller removes it after loading."""
    fd, path = tempfile.mkstemp(prefix="minikafka-", suffix=".pem")
    with os.fdopen(fd, "w") as fh:
        fh.write(text.replace("\\n", "\n"))
    return path


def build_context(listener, config) -> ssl.SSLContext:
    def get(name):
        return listener.setting(config, name)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p.strip() for p in str(get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = [_PROTOCOLS[p] for p in enabled if p in _PROTOCOLS]
    if not versions:
        raise ConfigError(f"listener {listener.name}: ssl.enabled.protocols {enabled} has no TLSv1.2/TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        value = str(get(kind) or "PEM").upper()
        if value != "PEM":
            raise ConfigError(f"listener {listener.name}: {kind}={value}: only PEM stores are supported")
    password = get("ssl.key.password") or None
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            cert_path, key_path = _inline_pem_file(chain), _inline_pem_file(key)
            try:
                ctx.load_cert_chain(cert_path, key_path, password=password)
            finally:
                os.unlink(cert_path)
                os.unlink(key_path)
        else:
            raise ConfigError(f"listener {listener.name} ({listener.security_protocol}) needs "
                              "ssl.keystore.location or ssl.keystore.certificate.chain + ssl.keystore.key")
        trust_location, trust_inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
        if trust_location:
            ctx.load_verify_locations(cafile=trust_location)
        elif trust_inline:
            ctx.load_verify_locations(cadata=trust_inline.replace("\\n", "\n"))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener.name}: cannot load TLS key/trust store: {exc}") from None
    client_auth = str(get("ssl.client.auth") or "none").lower()
    if client_auth == "required":
        ctx.verify_mode = ssl.CERT_REQUIRED
    elif client_auth == "requested":
        ctx.verify_mode = ssl.CERT_OPTIONAL
    elif client_auth == "none":
        ctx.verify_mode = ssl.CERT_NONE
    else:
        raise ConfigError(f"ssl.client.auth={client_auth}: expected none, requested or required")
    if ctx.verify_mode != ssl.CERT_NONE and not (get("ssl.truststore.location") or get("ssl.truststore.certificates")):
        raise ConfigError(f"listener {listener.name}: ssl.client.auth={client_auth} needs a trust store")
    # No TLS tickets/compression games: a dev broker wants the plain, widely supported defaults.
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


# -- principals ------------------------------------------------------------------------------

# Java's X500Principal.getName() (RFC 2253) keyword per attribute; others appear as OIDs.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4"}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(peercert: dict) -> str | None:
    """The subject of ``SSLSocket.getpeercert()`` as RFC 2253 text (last RDN first)."""
    subject = peercert.get("subject") if peercert else None
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            keyword = _RFC2253_KEYWORDS.get(attr) or _OIDS.get(attr) or attr
            parts.append(f"{keyword}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


_RULE = re.compile(r"RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)")


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: the first rule whose pattern matches the whole DN
    gives the name; ``DEFAULT`` gives the DN itself; no match is an error (no principal)."""

    def __init__(self, rules: str | None):
        self.rules: list[tuple[str, re.Pattern | None, str, str]] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            while pos < len(text) and text[pos] in ", \n\t":
                pos += 1
            if pos >= len(text):
                break
            if text.startswith("DEFAULT", pos):
                self.rules.append(("DEFAULT", None, "", ""))
                pos += len("DEFAULT")
                continue
            match = _RULE.match(text, pos)
            if match is None:
                raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
            pattern, replacement, case = match.groups()
            # Java's $1 becomes Python's \g<1>.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", replacement.replace("\\/", "/"))
            self.rules.append(("RULE", re.compile(pattern.replace("\\/", "/")), replacement, case))
            pos = match.end()

    def name(self, dn: str) -> str | None:
        for kind, pattern, replacement, case in self.rules:
            if kind == "DEFAULT":
                return dn
            if pattern.fullmatch(dn):
                value = pattern.sub(replacement, dn, count=1)
                return value.lower() if case == "L" else value.upper() if case == "U" else value
        return None


# -- the handshake ---------------------------------------------------------------------------


class TlsServer:
    """A TLS listener: accepts sockets itself and hands each to the listener's TLS thread
    (``offload``), or runs ``loop.connect_accepted_socket(ssl=...)`` per connection, which raises
    when the handshake fails (``create_server(ssl=...)`` swallows the failure, and uvloop's
    ``start_tls`` on an accepted transport loses early bytes).  Offers the
    ``close``/``wait_closed``/``sockets`` surface of an asyncio server."""

    # True: TLS on a thread of the listener's own (broker/security/tls_thread.py); False (the
    # default, the faster on a small machine: see the module's docstring): the loop's SSL protocol.
    # bench/security.py --tls-path loop|thread|both compares them.
    offload = False

    def __init__(self, loop, context: ssl.SSLContext, listener, make_connection) -> None:
        self.loop = loop
        self.context = context
        self.listener = listener
        self.make_connection = make_connection
        self.sockets: list[socket.socket] = []
        self._accepting: asyncio.Task | None = None
        self._handshakes: set[asyncio.Task] = set()
        self._worker = None

    async def start(self, host: str, port: int, backlog: int = 1024) -> None:
        infos = await self.loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                            flags=socket.AI_PASSIVE)
        family, _, proto, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sockets = [sock]
        if self.offload:
            from .tls_thread import TlsWorker

            self._worker = TlsWorker(self.loop, self.context, self.listener, self.make_connection)
        self._accepting = self.loop.create_task(self._accept_loop(sock))

    async def _accept_loop(self, sock) -> None:
        while True:
            try:
                conn, address = await self.loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # e.g. EMFILE: keep serving the others
                log.warning("accept on listener %s failed: %s", self.listener.name, exc)
                await asyncio.sleep(0.1)
                continue
            if self._worker is not None:  # the listener's TLS thread does the handshake and the rest
                self._worker.add(conn, address)
                continue
            task = self.loop.create_task(self._handshake(conn, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, address) -> None:
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self.loop.connect_accepted_socket(self.make_connection, conn, ssl=self.context,
                                                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            log.warning("TLS handshake from %s on listener %s failed: %s; closing the connection",
                        peer, self.listener.name, reason)
            conn.close()

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        for sock in self.sockets:
            sock.close()
        if self._worker is not None:
            self._worker.stop()

    async def wait_closed(self) -> None:
        if self._accepting is not None:
            try:
                await self._accepting
            except (asyncio.CancelledError, Exception):
                pass
        if self._worker is not None:
            worker = self._worker
            deadline = self.loop.time() + 1.0
            while worker.alive() and self.loop.time() < deadline:
                await asyncio.sleep(0.01)


def peer_principal(transport, listener, config) -> str | None:
    """``User:<name>`` of a verified client certificate, or None without one."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    try:
        cert = ssl_object.getpeercert()
    except ValueError:
        return None
    dn = subject_dn(cert) if cert else None
    if dn is None:
        return None
    mapper = PrincipalMapper(listener.setting(config, "ssl.principal.mapping.rules"))
    name = mapper.name(dn)
    return f"User:{name}" if name is not None else None
