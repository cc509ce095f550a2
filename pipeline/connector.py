"""Where Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) comes from.

The connector is a JVM jar that the pyspark wheel does not ship; it must be on the classpath when
the session starts.  ``session_config()`` returns the Spark settings that put it there, in this
order of preference:

1. ``MINIKAFKA_SPARK_JARS``: a directory of jars or a comma-separated list of jar paths;
2. the jars ``tests/tools/spark_connector.py`` (``make test``) copied from Maven Central into
   ``<venv>/spark-jars/<pyspark version>/`` (``connector.json`` lists them);
3. otherwise ``spark.jars.packages`` with the coordinate for the installed pyspark, which Spark
   resolves from Maven Central itself when the session starts (``--packages`` does the same).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def coordinate(version: str | None = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``."""
    return f"{ARTIFACT}:{version or pyspark_version()}"


def manifest(prefix: str | os.PathLike | None = None) -> dict | None:
    """``connector.json`` of the jars installed for the running pyspark, or None."""
    path = Path(prefix or sys.prefix) / "spark-jars" / pyspark_version() / "connector.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    doc["jars"] = [str(path.parent / name) for name in doc.get("jars", [])]
    if not doc["jars"] or not all(Path(j).is_file() for j in doc["jars"]):
        return None
    return doc


def cached_jars(prefix: str | os.PathLike | None = None) -> list[str]:
    """The connector's jar paths from ``MINIKAFKA_SPARK_JARS`` or the venv's cache ([] if none)."""
    given = os.environ.get("MINIKAFKA_SPARK_JARS")
    if given:
        if os.path.isdir(given):
            return sorted(str(p) for p in Path(given).glob("*.jar"))
        return [p for p in given.split(",") if p]
    doc = manifest(prefix)
    return doc["jars"] if doc else []


def session_config(prefix: str | os.PathLike | None = None) -> dict[str, str]:
    """Spark settings that make ``format("kafka")`` available to a session started now."""
    jars = cached_jars(prefix)
    if jars:
        return {"spark.jars": ",".join(jars)}
    return {"spark.jars.packages": coordinate()}
