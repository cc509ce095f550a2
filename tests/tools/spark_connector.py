"""Install Spark's own Kafka connector (spark-sql-kafka-0-10) for the installed pyspark.

Run with the venv's Python (``tests/tools/system-deps.sh`` does, so ``make test`` does):

    .venv/bin/python tests/tools/spark_connector.py

It asks Maven (``mvn dependency:copy-dependencies`` on ``tests/spark/pom.xml``) for
``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the installed pyspark's version and its run-time
dependencies, then keeps only the jars that pyspark's own ``jars/`` directory does not already ship
(pyspark has hadoop-client-*, scala-library, snappy-java, lz4-java, slf4j-api, spark-tags...: a
second copy in another version would put two versions of one class on the classpath; what the
connector adds is itself, the token provider, kafka-clients and commons-pool2).  The result goes to
``<venv>/spark-jars/<pyspark version>/`` with ``connector.json`` (the coordinate, the jars, what
pyspark provided instead), which ``minikafka.pipeline.connector`` reads to set ``spark.jars``.
A second run finds ``connector.json`` and does nothing; Maven's own cache (~/.m2) keeps the
downloads.

When Maven Central does not serve the connector at pyspark's exact version (a pyspark release can
reach PyPI before its jars reach Maven), the newest served version of the same major version that
is not newer than pyspark is used instead, and said so: ``connector.json`` records both versions.
``SPARK_KAFKA_CONNECTOR_VERSION=4.1.1`` asks for one version and nothing else.

Exit status: 0 when the jars are in place; when Maven fails, 1 under CI (``CI=true``), else 0 with
a warning (the ``format("kafka")`` tests then skip).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "tests" / "spark" / "pom.xml"
ARTIFACT = "spark-sql-kafka-0-10_2.13"
GROUP = "org.apache.spark"
LOCAL_REPO = Path(os.environ.get("MAVEN_REPO_LOCAL") or Path.home() / ".m2" / "repository")


def pyspark_info() -> tuple[str, Path]:
    import pyspark

    return pyspark.__version__, Path(pyspark.__file__).resolve().parent / "jars"


def provided_by(jars_dir: Path, artifact_id: str) -> str | None:
    """The jar of pyspark's jars/ that is ``artifact_id`` in some version, if any."""
    for jar in sorted(jars_dir.glob(f"{artifact_id}-*.jar")):
        rest = jar.name[len(artifact_id) + 1:]
        if rest[:1].isdigit():
            return jar.name
    return None


def maven(args: list[str]) -> None:
    cmd = ["mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(POM), f"-Dmaven.repo.local={LOCAL_REPO}", *args]
    print("spark-connector: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, timeout=600)


def copy_dependencies(version: str, staging: Path) -> None:
    maven([f"-Dspark.version={version}", "dependency:copy-dependencies", "-DincludeScope=runtime",
           "-Dmdep.useRepositoryLayout=true", f"-DoutputDirectory={staging}"])


def release_key(version: str) -> tuple[int, ...] | None:
    """(4, 2, 0) for a release ``4.2.0``; None for previews and other qualifiers."""
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        return None
    return tuple(int(part) for part in version.split("."))


def newest_release_not_newer(served, pyspark_version: str) -> str | None:
    """The newest release in ``served`` with pyspark's major version, not newer than pyspark."""
    wanted = release_key(pyspark_version.split("+")[0])
    if wanted is None:
        return None
    candidates = sorted((key, v) for v in served if (key := release_key(v)) is not None
                        and key[0] == wanted[0] and key <= wanted)
    return candidates[-1][1] if candidates else None


def fallback_version(pyspark_version: str) -> str:
    """``newest_release_not_newer`` over the version list Maven keeps for the artifact (fetched
    by asking for RELEASE)."""
    maven(["dependency:get", f"-Dartifact={GROUP}:{ARTIFACT}:RELEASE", "-Dtransitive=false"])
    folder = LOCAL_REPO / GROUP.replace(".", "/") / ARTIFACT
    served = set()
    for metadata in folder.glob("maven-metadata*.xml"):
        served.update(re.findall(r"<version>([^<]+)</version>", metadata.read_text()))
    chosen = newest_release_not_newer(served, pyspark_version)
    if chosen is None:
        raise SystemExit(f"spark-connector: Maven serves no {ARTIFACT} release for pyspark "
                         f"{pyspark_version} (versions: {sorted(served)})")
    return chosen


def select(staging: Path, jars_dir: Path) -> tuple[list[Path], dict[str, str], str]:
    """(jars to add, {jar: pyspark's jar used instead}, connector version) from the staging tree
    (Maven's repository layout: group/path/artifact/version/artifact-version.jar)."""
    keep, provided, connector = [], {}, None
    for jar in sorted(staging.rglob("*.jar")):
        artifact_id, version = jar.parent.parent.name, jar.parent.name
        if artifact_id == ARTIFACT:
            connector = version
        theirs = provided_by(jars_dir, artifact_id)
        if theirs:
            provided[jar.name] = theirs
        else:
            keep.append(jar)
    if connector is None:
        raise SystemExit(f"spark-connector: Maven copied no {ARTIFACT} jar")
    return keep, provided, connector


def install(venv: Path) -> Path:
    version, jars_dir = pyspark_info()
    dest = venv / "spark-jars" / version
    manifest = dest / "connector.json"
    if manifest.exists():
        print(f"spark-connector: cached in {dest}", flush=True)
        return dest
    with tempfile.TemporaryDirectory(prefix="spark-connector-") as tmp:
        staging = Path(tmp) / "m2"
        wanted = os.environ.get("SPARK_KAFKA_CONNECTOR_VERSION") or version
        try:
            copy_dependencies(wanted, staging)
        except subprocess.CalledProcessError:
            if os.environ.get("SPARK_KAFKA_CONNECTOR_VERSION"):
                raise
            print(f"spark-connector: {ARTIFACT}:{version} not found; looking for the newest older "
                  "release", flush=True)
            shutil.rmtree(staging, ignore_errors=True)
            copy_dependencies(fallback_version(version), staging)
        keep, provided, connector = select(staging, jars_dir)
        part = dest.with_name(dest.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        for jar in keep:
            shutil.copy2(jar, part / jar.name)
        (part / "connector.json").write_text(json.dumps({
            "coordinate": f"{GROUP}:{ARTIFACT}:{connector}",
            "pyspark": version,
            "jars": [jar.name for jar in keep],
            "provided_by_pyspark": provided,
        }, indent=2) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        part.rename(dest)
    if connector != version:
        print(f"spark-connector: WARNING: Maven Central does not serve {ARTIFACT}:{version}; "
              f"using {connector}, the newest older version it serves", flush=True)
    print(f"spark-connector: {GROUP}:{ARTIFACT}:{connector} -> {dest}: "
          + " ".join(jar.name for jar in keep), flush=True)
    return dest


def main() -> int:
    venv = Path(sys.prefix)
    try:
        install(venv)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        print(f"spark-connector: could not fetch {ARTIFACT} with Maven: {exc}", file=sys.stderr)
        return 1 if os.environ.get("CI", "").lower() in ("1", "true", "yes") else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
