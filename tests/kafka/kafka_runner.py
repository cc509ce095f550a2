"""Apache Kafka 4.2 as the test oracle: install, start and stop a single-node KRaft broker.

The jars come from ``tests/kafka/pom.xml`` (``mvn dependency:copy-dependencies`` into
``tests/kafka/target/libs``, ignored by git); :func:`ensure_installed` runs Maven only when they
are missing.  :class:`KafkaBroker` formats a fresh storage directory (``StorageTool format
--standalone``), writes ``server.properties``, starts ``kafka.Kafka`` as a child process on free
loopback ports, waits (bounded) until it answers Metadata with itself as a registered broker,
and stops it by its PID (SIGTERM, then SIGKILL).

Settings are the ones our tests use (see :data:`DEFAULT_CONFIG`); ``overrides`` replaces or adds
any of them (``{"authorizer.class.name": ...}``).  Nothing here imports minikafka, so bench
scripts can use it with any Python.

CLI::

    python tests/kafka/kafka_runner.py install        # fetch the jars when missing
    python tests/kafka/kafka_runner.py start [--dir D] [--override k=v ...]
                                                      # prints "kafka ready on 127.0.0.1:PORT pid PID"
    python tests/kafka/kafka_runner.py stop [--dir D]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LIBS = HERE / "target" / "libs"
STAMP = LIBS / ".installed"
DEFAULT_RUN_DIR = HERE / "target" / "run"

NODE_ID = 1
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
INSTALL_TIMEOUT_S = 600.0

# Kafka's own G1 flags (kafka-run-class.sh) with a small heap.
DEFAULT_JVM_OPTS = (
    "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

# The topic and group defaults of minikafka's embedded test broker (minikafka/embedded.py
# TEST_DEFAULTS) on a one-node cluster: replication 1 everywhere, 5 partitions for the internal
# topics, no initial rebalance delay.
DEFAULT_CONFIG = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

LOG4J2 = """\
status = warn
shutdownHook = disable
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
"""


class KafkaError(RuntimeError):
    pass


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def installed() -> bool:
    return STAMP.exists() and any(LIBS.glob("kafka_2.13-*.jar"))


def kafka_version() -> str | None:
    jars = sorted(LIBS.glob("kafka_2.13-*.jar"))
    return jars[0].name[len("kafka_2.13-"):-len(".jar")] if jars else None


def ensure_installed(quiet: bool = True) -> Path:
    """Fetch the jars with Maven when missing; returns the libs directory."""
    if installed():
        return LIBS
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaError("mvn not found: install maven (apt-get install maven) to fetch Apache Kafka")
    if java_binary() is None:
        raise KafkaError("java not found: install a JDK 17 (apt-get install default-jdk-headless)")
    if LIBS.exists():
        shutil.rmtree(LIBS)
    cmd = [mvn, "-B", "-f", str(POM), "dependency:copy-dependencies"]
    if quiet:
        cmd.insert(1, "-q")
    result = subprocess.run(cmd, cwd=str(HERE), capture_output=quiet, text=True,
                            timeout=INSTALL_TIMEOUT_S)
    if result.returncode != 0:
        raise KafkaError(f"mvn failed ({result.returncode}):\n{result.stdout or ''}{result.stderr or ''}")
    STAMP.write_text(kafka_version() or "")
    return LIBS


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """A Kafka Uuid string: 16 random bytes, base64url without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _set_parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the process that started us
    except Exception:
        pass


# --- a tiny Metadata v4 probe, hand-encoded so that this module needs nothing but the stdlib ---

def _metadata_probe(host: str, port: int, timeout: float) -> tuple[list[int], int] | None:
    """Send Metadata v4 (all topics) and return (broker node ids, controller id), or None."""
    client_id = b"kafka-runner"
    body = struct.pack(">hhih", 3, 4, 1, len(client_id)) + client_id + struct.pack(">i?", 0, False)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _read_exact(sock, 4))[0]
            data = _read_exact(sock, size)
    except (OSError, struct.error):
        return None
    pos = 4 + 4  # correlation id, throttle time
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    nodes = []
    for _ in range(count):
        node_id, hlen = struct.unpack_from(">ih", data, pos)
        pos += 6 + hlen
        pos += 4  # port
        (rlen,) = struct.unpack_from(">h", data, pos)
        pos += 2 + max(rlen, 0)
        nodes.append(node_id)
    (clen,) = struct.unpack_from(">h", data, pos)
    pos += 2 + max(clen, 0)
    (controller,) = struct.unpack_from(">i", data, pos)
    return nodes, controller


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


class KafkaBroker:
    """One Apache Kafka KRaft node (broker + controller) in ``run_dir``.

    ``KafkaBroker(run_dir, overrides).start()``; ``bootstrap`` is ``127.0.0.1:PORT``; ``stop()``.
    Usable as a context manager.  With ``die_with_parent`` (the default) the JVM is killed when
    the *thread* that called ``start()`` ends (PR_SET_PDEATHSIG), so start it from a thread that
    outlives it, e.g. the main thread.  The storage is formatted afresh at every start unless
    ``keep_data=True`` and it already holds a formatted log directory.
    """

    def __init__(self, run_dir: str | Path | None = None, overrides: dict | None = None, *,
                 port: int = 0, jvm_opts: tuple[str, ...] = DEFAULT_JVM_OPTS,
                 log_level: str = "WARN", keep_data: bool = False,
                 die_with_parent: bool = True):
        self._own_dir = run_dir is None
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="kafka-oracle-"))
        self.overrides = {k: str(v).lower() if isinstance(v, bool) else str(v)
                          for k, v in (overrides or {}).items()}
        self.port = port
        self.controller_port = 0
        self.host = "127.0.0.1"
        self.jvm_opts = tuple(jvm_opts)
        self.log_level = log_level
        self.keep_data = keep_data
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.cluster_id: str | None = None
        self.start_seconds: float | None = None

    # -- paths -------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def config_path(self) -> Path:
        return self.run_dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "kafka.log"

    @property
    def stdout_path(self) -> Path:
        return self.run_dir / "kafka.out"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def node_id(self) -> int:
        """The node id: NODE_ID unless an override gives node.id (client suites whose own
        brokers are node 0 assign replicas to it)."""
        return int(self.overrides.get("node.id", NODE_ID))

    def config(self) -> dict[str, str]:
        config = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
        }
        config.update(DEFAULT_CONFIG)
        # an override may name the runner's ports ("{port}", "{controller_port}"), e.g. to add a
        # SASL listener beside the two the runner sets up
        ports = {"{port}": str(self.port), "{controller_port}": str(self.controller_port)}
        for name, value in self.overrides.items():
            for placeholder, port in ports.items():
                value = value.replace(placeholder, port)
            config[name] = value
        return config

    def _classpath(self) -> str:
        return str(LIBS / "*")

    def _java(self, main: str, *args: str, jvm: tuple[str, ...] = ()) -> list[str]:
        java = java_binary()
        if java is None:
            raise KafkaError("java not found")
        return [java, *jvm, f"-Dlog4j2.configurationFile={self.run_dir / 'log4j2.properties'}",
                "-cp", self._classpath(), main, *args]

    # -- life cycle --------------------------------------------------------------------------
    def _write_files(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "log4j2.properties").write_text(
            LOG4J2.format(log=self.log_path, level=self.log_level))
        lines = [f"{k}={v}" for k, v in self.config().items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    def _format(self) -> None:
        meta = self.data_dir / "meta.properties"
        if self.keep_data and meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    self.cluster_id = line.split("=", 1)[1]
            return
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.cluster_id = random_cluster_id()
        cmd = self._java("kafka.tools.StorageTool", "format", "--standalone", "-t", self.cluster_id,
                         "-c", str(self.config_path), jvm=("-Xmx256m", "-XX:TieredStopAtLevel=1"))
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise KafkaError(f"kafka storage format failed ({result.returncode}):\n"
                             f"{result.stdout}{result.stderr}")

    def start(self, timeout: float = START_TIMEOUT_S) -> "KafkaBroker":
        if self.proc is not None and self.proc.poll() is None:
            return self
        ensure_installed()
        if not self.port:
            self.port = free_port()
        if not self.controller_port:
            self.controller_port = free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
        began = time.monotonic()
        self._write_files()
        self._format()
        cmd = self._java("kafka.Kafka", str(self.config_path), jvm=self.jvm_opts)
        out = open(self.stdout_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd, cwd=str(self.run_dir), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_set_parent_death_signal if self.die_with_parent else None,
                start_new_session=not self.die_with_parent)
        finally:
            out.close()
        self.pid = self.proc.pid
        try:
            self.wait_ready(timeout - (time.monotonic() - began))
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + max(timeout, 1.0)
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise KafkaError(f"kafka exited with {self.proc.returncode} before it was ready\n"
                                 f"{self.tail_logs()}")
            probe = _metadata_probe(self.host, self.port, timeout=2.0)
            node_id = self.node_id
            if probe is not None and node_id in probe[0] and probe[1] == node_id:
                return
            if time.monotonic() >= deadline:
                raise KafkaError(f"kafka not ready on {self.bootstrap} within {timeout:.0f}s\n"
                                 f"{self.tail_logs()}")
            time.sleep(0.1)

    def tail_logs(self, lines: int = 40) -> str:
        parts = []
        for path in (self.stdout_path, self.log_path):
            try:
                parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                pass
        return "\n".join(parts)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM the broker's PID, wait up to ``timeout``, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


# --- CLI -----------------------------------------------------------------------------------

def _stop_pid(pid: int, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM ``pid`` (a broker this CLI started), then SIGKILL; True when it is gone."""
    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    if not alive():
        return True
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive():
        time.sleep(0.1)
    return not alive()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="fetch the Kafka jars with Maven when missing")
    start = sub.add_parser("start", help="start a broker in the background")
    start.add_argument("--dir", default=str(DEFAULT_RUN_DIR))
    start.add_argument("--port", type=int, default=0)
    start.add_argument("--override", action="append", default=[], metavar="NAME=VALUE")
    stop = sub.add_parser("stop", help="stop the broker started by `start`")
    stop.add_argument("--dir", default=str(DEFAULT_RUN_DIR))
    args = parser.parse_args(argv)

    if args.command == "install":
        ensure_installed()
        print(f"kafka {kafka_version()} in {LIBS}")
        return 0
    state_path = Path(args.dir) / "state.json"
    if args.command == "start":
        if state_path.exists():
            print(f"a broker is already recorded in {state_path}; stop it first", file=sys.stderr)
            return 1
        overrides = dict(item.split("=", 1) for item in args.override)
        broker = KafkaBroker(args.dir, overrides, port=args.port, die_with_parent=False)
        broker.start()
        state_path.write_text(json.dumps({"pid": broker.pid, "port": broker.port,
                                          "cluster_id": broker.cluster_id}))
        print(f"kafka ready on {broker.bootstrap} pid {broker.pid}", flush=True)
        return 0
    if args.command == "stop":
        if not state_path.exists():
            print("no broker recorded", file=sys.stderr)
            return 1
        state = json.loads(state_path.read_text())
        ok = _stop_pid(int(state["pid"]))
        state_path.unlink()
        print(f"kafka pid {state['pid']} stopped" if ok else f"kafka pid {state['pid']} did not stop")
        return 0 if ok else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
