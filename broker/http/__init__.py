"""One HTTP server on the broker's event loop (aiohttp), off unless ``http.port`` is set.

It sits on top of the broker and only calls its public surface. Each feature is a route module
listed in ``ROUTE_MODULES`` with ``setup(app, broker)``; a module decides itself whether it is
enabled (the control API, for example, only with ``http.control.enable=true``).  Bound to
loopback by default (``http.host``).
"""

ROUTE_MODULES: list[str] = [
    "minikafka.broker.http.control",
    "minikafka.broker.http.metrics",
    "minikafka.broker.http.health",
    "minikafka.broker.http.console",
    "minikafka.broker.http.share_groups",
]
