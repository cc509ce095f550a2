"""The client commands (``minikafka topic|produce|consume|group``) run as a user runs them:
the installed ``minikafka`` script in a subprocess, against the real broker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason="minikafka's CLI")]

SCRIPT = shutil.which("minikafka", path=str(Path(sys.executable).parent)) or "minikafka"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("cli"), group_min_session_timeout_ms=100)
    yield handle
    handle.stop()


def mk(broker, *args, stdin: str | None = None, check: bool = True, timeout: float = 60):
    cmd = [SCRIPT, *args]
    if broker is not None and not any(a in ("-b", "--bootstrap") for a in args):
        cmd += ["-b", broker.bootstrap]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, (cmd, proc.returncode, proc.stderr)
    return proc


def mkjson(broker, *args, **kw):
    return json.loads(mk(broker, *args, "--json", **kw).stdout)


def test_topic_verbs(broker):
    assert mk(broker, "topic", "create", "cli-a", "-p", "3", "-c", "retention.ms=3600000").stdout == "created cli-a\n"
    again = mk(broker, "topic", "create", "cli-a", check=False)
    assert again.returncode == 1
    assert again.stderr.count("\n") == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    listed = mkjson(broker, "topic", "list")
    assert {"name": "cli-a", "partitions": 3, "internal": False} in listed
    assert "NAME" in mk(broker, "topic", "list").stdout

    desc = mkjson(broker, "topic", "describe", "cli-a")
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["log_start_offset"] == 0 and p["high_watermark"] == 0 and p["last_stable_offset"] == 0
               for p in desc["partitions"])
    configs = {c["name"]: c for c in desc["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"

    mk(broker, "topic", "alter-config", "cli-a", "--set", "segment.ms=100000", "--delete", "retention.ms")
    configs = {c["name"]: c for c in mkjson(broker, "topic", "describe", "cli-a")["configs"]}
    assert configs["segment.ms"]["value"] == "100000" and configs["segment.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    bad = mk(broker, "topic", "alter-config", "cli-a", "--set", "retention.ms=abc", check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1

    assert mkjson(broker, "topic", "delete", "cli-a") == {"deleted": ["cli-a"]}
    gone = mk(broker, "topic", "describe", "cli-a", check=False)
    assert gone.returncode == 1 and "unknown topic: cli-a" in gone.stderr


def test_produce_consume_round_trip(broker):
    mk(broker, "topic", "create", "cli-pc", "-p", "2")
    lines = "".join(f"k{i}|value {i}\n" for i in range(10)) + "no key here\n"
    out = mkjson(broker, "produce", "cli-pc", "--key-separator", "|", "-H", "source=cli", "-p", "1", "-z", "gzip",
                 "--acks", "1", stdin=lines)
    assert out == {"topic": "cli-pc", "produced": 11, "failed": 0}

    records = [json.loads(line) for line in mk(broker, "consume", "cli-pc", "--format", "json").stdout.splitlines()]
    assert [r["offset"] for r in records] == list(range(11))
    assert {r["partition"] for r in records} == {1}
    assert records[0]["key"] == "k0" and records[0]["value"] == "value 0"
    assert records[0]["headers"] == [["source", "cli"]]
    assert records[10]["key"] is None and records[10]["value"] == "no key here"

    text = mk(broker, "consume", "cli-pc", "-p", "1", "-o", "8", "-n", "2", "--format", r"%p:%o %k=%s %h\n").stdout
    assert text == "1:8 k8=value 8 source=cli\n1:9 k9=value 9 source=cli\n"
    assert mk(broker, "consume", "cli-pc", "-o", "-1").stdout == "no key here\n"
    assert mk(broker, "consume", "cli-pc", "-o", "end").stdout == ""

    # By timestamp: a record produced after a recorded instant is where consumption starts.
    time.sleep(0.01)  # the next record's timestamp must be strictly later than `mark`
    mark = int(time.time() * 1000)
    mk(broker, "produce", "cli-pc", "-p", "0", stdin="late\n")
    assert mk(broker, "consume", "cli-pc", "-t", str(mark)).stdout == "late\n"

    # --follow keeps waiting; --count ends it once the new record arrives.
    follow = subprocess.Popen([SCRIPT, "consume", "cli-pc", "-p", "0", "-o", "end", "-f", "-n", "1",
                               "-b", broker.bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while follow.poll() is None and time.monotonic() < deadline:
            mk(broker, "produce", "cli-pc", "-p", "0", stdin="tail\n")
            try:
                follow.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        assert follow.wait(timeout=5) == 0
        assert follow.stdout.read() == "tail\n"
    finally:
        follow.kill()
        follow.wait()


def test_group_verbs(broker):
    mk(broker, "topic", "create", "cli-g", "-p", "2")
    mk(broker, "produce", "cli-g", "-p", "0", stdin="".join(f"a{i}\n" for i in range(5)))
    mk(broker, "produce", "cli-g", "-p", "1", stdin="".join(f"b{i}\n" for i in range(3)))
    got = mk(broker, "consume", "cli-g", "-g", "cli-group").stdout.splitlines()
    assert sorted(got) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(3)])

    assert {"group": "cli-group", "type": "classic", "state": "Empty", "simple": False} in mkjson(broker, "group", "list")
    mk(broker, "produce", "cli-g", "-p", "0", stdin="a5\na6\n")
    desc = mkjson(broker, "group", "describe", "cli-group")
    assert desc["state"] == "Empty" and desc["members"] == []
    offsets = {(o["topic"], o["partition"]): o for o in desc["offsets"]}
    assert offsets[("cli-g", 0)]["committed_offset"] == 5 and offsets[("cli-g", 0)]["lag"] == 2
    assert offsets[("cli-g", 1)]["committed_offset"] == 3 and offsets[("cli-g", 1)]["lag"] == 0
    assert "LAG" in mk(broker, "group", "describe", "cli-group").stdout

    plan = mkjson(broker, "group", "reset-offsets", "cli-group", "--to-earliest", "--dry-run")
    assert plan["dry_run"] and {(r["partition"], r["current_offset"], r["new_offset"]) for r in plan["offsets"]} == \
        {(0, 5, 0), (1, 3, 0)}
    assert mkjson(broker, "group", "describe", "cli-group")["offsets"][0]["committed_offset"] == 5  # unchanged

    mk(broker, "group", "reset-offsets", "cli-group", "--topic", "cli-g:0", "--shift-by", "-2")
    assert mk(broker, "consume", "cli-g", "-g", "cli-group").stdout.splitlines() == ["a3", "a4", "a5", "a6"]
    mk(broker, "group", "reset-offsets", "cli-group", "--topic", "cli-g", "--to-offset", "1")
    assert len(mk(broker, "consume", "cli-g", "-g", "cli-group").stdout.splitlines()) == 6 + 2
    mk(broker, "group", "reset-offsets", "cli-group", "--to-latest")
    assert mk(broker, "consume", "cli-g", "-g", "cli-group").stdout == ""
    mk(broker, "group", "reset-offsets", "cli-group", "--to-datetime", "1970-01-01T00:00:00+00:00")
    assert len(mk(broker, "consume", "cli-g", "-g", "cli-group").stdout.splitlines()) == 10

    assert mkjson(broker, "group", "delete", "cli-group") == {"deleted": ["cli-group"]}
    again = mk(broker, "group", "delete", "cli-group", check=False)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stderr and again.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [
    ["topic"], ["topic", "bogus"], ["topic", "create"], ["consume", "t", "--count", "x"],
    ["group", "reset-offsets", "g"], ["topic", "create", "t", "-X", "novalue"],
    ["consume", "t", "--format", "%Q"],
])
def test_bad_arguments_one_line_exit_2(broker, args):
    proc = mk(broker, *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("minikafka"), proc.stderr


def test_unreachable_broker_one_line_exit_3():
    proc = mk(None, "topic", "list", "-b", "127.0.0.1:1", "--timeout", "2", check=False, timeout=30)
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "cannot reach the cluster at 127.0.0.1:1" in proc.stderr


def test_serve_still_default():
    # `python -m minikafka --help` still lists serve next to the client commands.
    out = subprocess.run([sys.executable, "-m", "minikafka", "--help"], capture_output=True, text=True,
                         timeout=30, env=dict(os.environ)).stdout
    assert "serve" in out and "topic" in out and "group" in out
