"""A Kafka Streams 4.2 application with ``group.protocol=streams`` (KIP-1071 streams groups, issue 20).

``java/StreamsWordCount.java`` counts the words of four lines: the words are re-keyed (a repartition
topic) and counted in a state store (a changelog topic), with two stream threads per instance.  Once
with one instance and at-least-once processing (OffsetCommit by member epoch), once with two instances
and exactly-once v2 (transactions, TxnOffsetCommit into the streams group): four members in two
processes, the second instance joining once the first runs, so tasks move between processes
(revocation, then assignment).  The broker
creates both internal topics with two partitions (the input topic's count) when the first member's
heartbeat reports them missing, assigns the four tasks, and the counts reach the output topic.  The same program runs against Apache Kafka 4.2 (``broker_kind``) and
prints the same lines.  Kafka Streams comes from Maven Central (tests/streams/pom.xml, installed into
``.venv/streams-jars`` by tests/tools/system-deps.sh).
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from clienttools import ROOT, require_tool
from conftest import broker_for

pytestmark = [pytest.mark.integration]

JARS = ROOT / os.environ.get("VENV", ".venv") / "streams-jars"

EXPECTED = {"a": 2, "and": 1, "barks": 1, "brown": 1, "dog": 3, "fox": 2, "jumps": 1, "lazy": 1, "over": 1,
            "quick": 1, "the": 3}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory):
    if not (JARS / ".installed").exists():
        if os.environ.get("MINIKAFKA_KAFKA_ORACLE") == "required":
            pytest.fail(f"Kafka Streams jars missing in {JARS}: run tests/tools/system-deps.sh")
        pytest.skip(f"Kafka Streams jars missing in {JARS} (tests/tools/system-deps.sh installs them)")
    javac = require_tool("javac")
    out = tmp_path_factory.mktemp("streams-java")
    jars = f"{JARS}/*"
    subprocess.run([javac, "-cp", jars, "-d", str(out), str(ROOT / "tests" / "integration" / "java" /
                                                             "StreamsWordCount.java")], check=True, timeout=180)
    return f"{out}:{jars}"


# One run per broker: two instances with exactly-once v2 (tasks moving between processes, transactional
# commits).  A single-instance at-least-once run was dropped: it added ~1.5 min to make test and checks
# less (StreamsWordCount still takes "at_least_once 1" for a run by hand).
@pytest.mark.parametrize("guarantee,instances", [("exactly_once_v2", 2)])
def test_kafka_streams_word_count_with_the_streams_protocol(request, broker_kind, tmp_path, classpath, guarantee,
                                                           instances):
    broker = broker_for(request, broker_kind, tmp_path, group_streams_heartbeat_interval_ms=500,
                        group_streams_min_heartbeat_interval_ms=500, group_streams_initial_rebalance_delay_ms=0)
    java = require_tool("java")
    run = uuid.uuid4().hex[:8]
    app = f"wordcount-{run}"
    proc = subprocess.run([java, "-cp", classpath, "StreamsWordCount", broker.bootstrap, f"wc-in-{run}",
                           f"wc-out-{run}", app, str(tmp_path / "state"), str(instances), guarantee],
                          capture_output=True, text=True, timeout=240)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
        lines = proc.stdout.splitlines()
        assert lines.count("STATE RUNNING") == instances, proc.stdout
        counts = {line.split()[1]: int(line.split()[2]) for line in lines if line.startswith("COUNT ")}
        assert counts == EXPECTED
        # The four lines consumed: the application's offsets of its input topic add up to 4
        # (OffsetCommit with member epochs, or TxnOffsetCommit inside its transactions).
        assert "COMMITTED 4" in lines, proc.stdout
        # Each instance has two stream threads (members); the topology has two subtopologies.
        assert f"GROUP Stable {2 * instances} 2" in lines, proc.stdout
        # Internal topics created by the broker with the input topic's partition count.
        assert "TOPIC counts-changelog 2" in lines and "TOPIC counts-repartition 2" in lines, proc.stdout
    finally:
        if broker_kind == "minikafka":
            broker.stop()
