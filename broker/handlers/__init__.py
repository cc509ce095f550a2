"""Request handlers, one module per API family.

Each module exposes ``register(registry, broker)`` which registers its handlers with the
version range of the "Serve" column of PROTOCOL.md, and optionally ``async start(broker)`` /
``async stop(broker)``.  The server imports every module listed here; one that is missing or
fails to import stops the broker from starting (``broker.server.HandlerModuleError``): a broker
that cannot serve its APIs must not run.
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
    "minikafka.broker.handlers.admin_replicas",
    "minikafka.broker.handlers.admin_quorum",
    "minikafka.broker.handlers.client_quotas",
    "minikafka.broker.handlers.client_telemetry",
    "minikafka.broker.txn.apis",  # before group.apis: TxnOffsetCommit needs broker.txn_coordinator
    "minikafka.broker.group.apis",
    "minikafka.broker.share.apis",  # share groups (KIP-932): ShareGroupHeartbeat/Describe
    "minikafka.broker.share.state.apis",  # the share coordinator (__share_group_state), APIs 83-87, 90-92
    "minikafka.broker.streams.apis",
    "minikafka.broker.handlers.sasl",
    "minikafka.broker.handlers.scram_credentials",
    "minikafka.broker.handlers.acls",
    "minikafka.broker.handlers.delegation_tokens",
    "minikafka.broker.handlers.kraft_membership",
    "minikafka.broker.handlers.config_resources",
    "minikafka.broker.handlers.write_txn_markers",
    "minikafka.broker.share.fetch_apis",  # ShareFetch/ShareAcknowledge (issue 21), served by share.fetch
]
