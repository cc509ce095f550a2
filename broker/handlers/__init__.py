"""Request handlers, one module per API family.

Each module exposes ``register(registry, broker)`` which registers its handlers with the
version range of the "Serve" column of PROTOCOL.md, and optionally ``async start(broker)`` /
``async stop(broker)``.  The server imports the modules listed here; one that does not exist yet
is skipped with a log line, so parallel work never breaks the broker.
"""

HANDLER_MODULES: list[str] = [
    "broker.handlers.api_versions",
    "broker.handlers.metadata",
    "broker.handlers.produce",
    "broker.handlers.fetch",
    "broker.handlers.list_offsets",
    "broker.handlers.offset_for_leader_epoch",
    "broker.handlers.init_producer_id",
    "broker.handlers.admin_topics",
    "broker.handlers.admin_configs",
    "broker.handlers.admin_cluster",
    "broker.group.apis",
]
