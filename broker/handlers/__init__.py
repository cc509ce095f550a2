"""Request handlers, one module per API family.

Each module exposes ``register(registry, broker)`` which registers its handlers with the
version range of the "Serve" column of PROTOCOL.md, and optionally ``async start(broker)`` /
``async stop(broker)``.  The server imports the modules listed here; one that does not exist yet
is skipped with a log line, so parallel work never breaks the broker.
"""

HANDLER_MODULES: list[str] = [
    "minikafka.broker.handlers.api_versions",
    "minikafka.broker.handlers.metadata",
    "minikafka.broker.handlers.produce",
    "minikafka.broker.handlers.fetch",
    "minikafka.broker.handlers.list_offsets",
    "minikafka.broker.handlers.offset_for_leader_epoch",
    "minikafka.broker.handlers.init_producer_id",
    "minikafka.broker.handlers.admin_topics",
    "minikafka.broker.handlers.admin_configs",
    "minikafka.broker.handlers.admin_cluster",
    "minikafka.broker.group.apis",
    "minikafka.broker.handlers.sasl",
    "minikafka.broker.handlers.scram_credentials",
    "minikafka.broker.handlers.acls",
]
