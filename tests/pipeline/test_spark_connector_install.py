"""The connector install script (tests/tools/spark_connector.py) and pipeline/connector.py, without
Maven or Spark: which jars are kept, which version is chosen, where the session finds them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from minikafka.pipeline import connector

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("spark_connector_tool", ROOT / "tests" / "tools" / "spark_connector.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK")
    return path


def test_provided_by_matches_the_artifact_id_not_a_longer_name(tmp_path):
    jars = tmp_path / "jars"
    touch(jars / "hadoop-client-api-3.5.0.jar")
    touch(jars / "commons-pool-1.5.4.jar")
    assert tool.provided_by(jars, "hadoop-client-api") == "hadoop-client-api-3.5.0.jar"
    assert tool.provided_by(jars, "hadoop-client") is None  # "hadoop-client-api-..." is another artifact
    assert tool.provided_by(jars, "commons-pool2") is None  # pyspark's commons-pool 1.x is not pool2
    assert tool.provided_by(jars, "commons-pool") == "commons-pool-1.5.4.jar"


def test_select_keeps_only_what_pyspark_does_not_ship(tmp_path):
    jars = tmp_path / "jars"
    for name in ("slf4j-api-2.0.17.jar", "spark-tags_2.13-4.3.0.jar", "lz4-java-1.11.0.jar"):
        touch(jars / name)
    staging = tmp_path / "m2"
    layout = [("org/apache/spark", "spark-sql-kafka-0-10_2.13", "4.2.0"),
              ("org/apache/spark", "spark-token-provider-kafka-0-10_2.13", "4.2.0"),
              ("org/apache/spark", "spark-tags_2.13", "4.2.0"),
              ("org/apache/kafka", "kafka-clients", "3.9.2"),
              ("org/apache/commons", "commons-pool2", "2.13.1"),
              ("org/slf4j", "slf4j-api", "1.7.36"),
              ("at/yawk/lz4", "lz4-java", "1.10.1")]
    for group, artifact, version in layout:
        touch(staging / group / artifact / version / f"{artifact}-{version}.jar")
    keep, provided, version = tool.select(staging, jars)
    assert version == "4.2.0"
    assert sorted(j.name for j in keep) == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                                            "spark-sql-kafka-0-10_2.13-4.2.0.jar",
                                            "spark-token-provider-kafka-0-10_2.13-4.2.0.jar"]
    assert provided == {"spark-tags_2.13-4.2.0.jar": "spark-tags_2.13-4.3.0.jar",
                        "slf4j-api-1.7.36.jar": "slf4j-api-2.0.17.jar",
                        "lz4-java-1.10.1.jar": "lz4-java-1.11.0.jar"}


def test_select_fails_without_the_connector(tmp_path):
    touch(tmp_path / "m2" / "org/apache/kafka" / "kafka-clients" / "3.9.2" / "kafka-clients-3.9.2.jar")
    with pytest.raises(SystemExit):
        tool.select(tmp_path / "m2", tmp_path / "jars")


@pytest.mark.parametrize("served, pyspark, expected", [
    (["4.0.0", "4.1.1", "4.2.0", "4.2.0-preview5"], "4.3.0", "4.2.0"),
    (["4.0.0", "4.1.1", "4.2.0", "4.2.1"], "4.2.0", "4.2.0"),
    (["4.0.0", "4.1.1", "4.2.0"], "4.1.3", "4.1.1"),  # never newer than pyspark
    (["3.5.1", "4.2.0-preview1"], "4.1.0", None),      # no release of the same major
    (["4.0.0"], "4.1.0.dev0", None),                   # not a release version
])
def test_newest_release_not_newer(served, pyspark, expected):
    assert tool.newest_release_not_newer(served, pyspark) == expected


def test_session_config_prefers_env_then_cache_then_packages(tmp_path, monkeypatch):
    monkeypatch.delenv("MINIKAFKA_SPARK_JARS", raising=False)
    version = connector.pyspark_version()
    assert connector.session_config(tmp_path) == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"}

    cache = tmp_path / "spark-jars" / version
    a, b = touch(cache / "a.jar"), touch(cache / "b.jar")
    (cache / "connector.json").write_text(json.dumps({"jars": ["a.jar", "b.jar"]}))
    assert connector.session_config(tmp_path) == {"spark.jars": f"{a},{b}"}
    b.unlink()  # a manifest whose jars are gone is no cache
    assert "spark.jars.packages" in connector.session_config(tmp_path)

    given = tmp_path / "given"
    touch(given / "x.jar")
    monkeypatch.setenv("MINIKAFKA_SPARK_JARS", str(given))
    assert connector.session_config(tmp_path) == {"spark.jars": str(given / "x.jar")}
    monkeypatch.setenv("MINIKAFKA_SPARK_JARS", "/p/one.jar,/p/two.jar")
    assert connector.cached_jars(tmp_path) == ["/p/one.jar", "/p/two.jar"]


class _Builder:
    """Stands in for SparkSession.builder: records the settings, starts nothing."""

    def __init__(self):
        self.settings = {}

    def appName(self, name):
        return self

    def master(self, master):
        self.settings["master"] = master
        return self

    def config(self, name, value):
        self.settings[name] = value
        return self

    def getOrCreate(self):
        return self.settings


@pytest.mark.parametrize("fmt, has_jars", [("kafka", True), ("minikafka", False)])
def test_the_job_puts_the_connector_on_its_own_sessions_classpath(monkeypatch, tmp_path, fmt, has_jars):
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from minikafka.pipeline import job

    touch(tmp_path / "c.jar")
    monkeypatch.setenv("MINIKAFKA_SPARK_JARS", str(tmp_path))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)  # not under spark-submit
    monkeypatch.setattr(SparkSession, "builder", _Builder())
    settings = job.get_session(job.parse_args(["--checkpoint", "c", "--format", fmt]))
    assert settings["master"] == "local[2]"
    assert settings.get("spark.jars") == (str(tmp_path / "c.jar") if has_jars else None)
