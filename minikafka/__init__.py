"""minikafka: a Kafka broker in Python that real Kafka clients use unchanged.

This is the one import package the distribution installs. The repository keeps the design
card's folders at its top level and the build maps them in (pyproject.toml, package-dir)::

    broker/    -> minikafka.broker     the asyncio server, handlers, coordinators, CLI
    protocol/  -> minikafka.protocol   the sans-IO codec, framing, record batches
    storage/   -> minikafka.storage    partition logs and the metadata log
    pipeline/  -> minikafka.pipeline   the PySpark data source and job

Nothing heavy is imported here: Spark's Python workers import ``minikafka.pipeline`` and must
not pay for (or need) the broker.
"""

__version__ = "0.1.0"

__all__ = ["Broker", "Control", "ControlError"]


def __getattr__(name: str):
    # Lazy: ``import minikafka`` stays free of the broker for Spark workers.
    if name in ("Broker", "Control", "ControlError"):
        from . import embedded

        return getattr(embedded, name)
    raise AttributeError(f"module 'minikafka' has no attribute {name!r}")
