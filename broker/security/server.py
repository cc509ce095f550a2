"""Opening the listeners: one asyncio server per listener, plain or with a TLS handshake first.

Each accepted connection is a ``KafkaConnection`` that knows its listener (for the advertised
address and the security protocol); on a TLS listener the connection is created only after a
successful handshake (``tls.TlsServer``).  Every listener is logged; ``minikafka serve`` (broker/cli.py)
also prints each on stdout as ``minikafka listener NAME SECURITY_PROTOCOL on host:port`` so scripts
can find ports bound with ``:0``.  Nothing here writes to stdout: an embedded broker runs inside a
user's process, whose stdout is not ours.
"""

from __future__ import annotations

import logging

from .listeners import parse_listeners

log = logging.getLogger("minikafka.listeners")


async def open_listeners(broker, connection_class):
    """Bind every listener; each accepted connection is ``connection_class(broker, listener=...)``
    (broker/connection.py's KafkaConnection, handed in by the server: nothing here imports it)."""
    listeners = parse_listeners(broker.config)
    contexts = {}
    if any(item.uses_tls for item in listeners):
        from .tls import build_context

        for item in listeners:
            if item.uses_tls:
                contexts[item.name] = build_context(item, broker.config)
    from .session import Security

    broker.security = Security(broker, listeners)
    servers = []
    loop = broker.loop
    for item in listeners:
        if item.uses_tls:
            from .tls import TlsServer

            server = TlsServer(loop, contexts[item.name], item,
                               lambda item=item: connection_class(broker, listener=item))
            await server.start(item.host, item.port)
        else:
            sock = _bound_socket(item.host, item.port)
            if sock is not None:
                server = await loop.create_server(lambda item=item: connection_class(broker, listener=item),
                                                  sock=sock, backlog=1024)
            else:
                server = await loop.create_server(lambda item=item: connection_class(broker, listener=item),
                                                  host=item.host, port=item.port, reuse_address=True,
                                                  backlog=1024)
        sockets = server.sockets or ()
        if item.port == 0 and sockets:
            item.port = sockets[0].getsockname()[1]
        servers.append(server)
        log.info("listener %s (%s) on %s:%d, advertised %s:%d", item.name, item.security_protocol,
                 item.host, item.port, *item.advertised)
    return listeners, servers


def _bound_socket(host, port: int):
    """A listening socket for an IP-literal host (127.0.0.1, 0.0.0.0, ::1), bound here: the loop's
    own bind resolves the host first, which loads the IDNA codec with stringprep and unicodedata
    (~0.5 MB of every idle broker) even for an address.  None for a host name: the loop resolves it."""
    import socket

    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, TypeError, ValueError):
            continue
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
            sock.listen(1024)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock
    return None
