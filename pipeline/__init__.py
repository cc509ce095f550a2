"""PySpark side of minikafka: a Kafka data source for Spark and the streaming pipeline job.

``pipeline.options`` is pure Python (no Spark); ``pipeline.source`` needs pyspark, pyarrow and
confluent-kafka (the ``spark`` extra). ``register(spark)`` makes ``format("minikafka")``
available in a session. ``pipeline.connector`` finds Spark's own connector (``format("kafka")``)
for a session the job starts itself.
"""

from .options import FORMAT_NAME


def register(spark) -> str:
    """Register the Kafka data source with ``spark``; returns the format name."""
    from .source import register as _register

    return _register(spark)


__all__ = ["FORMAT_NAME", "register"]
