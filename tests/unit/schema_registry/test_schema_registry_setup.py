"""The registry is off by default and costs nothing then (not even an import); `make run`, the
Dockerfile and docker-compose.yml serve it on port 8081 (loopback on the host)."""

import subprocess
import sys
from pathlib import Path

import yaml

from minikafka.broker.config import BrokerConfig
from minikafka.broker.schema_registry.server import parse_listeners

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import asyncio, sys, tempfile
from minikafka.broker.config import BrokerConfig
from minikafka.broker.server import Broker
listeners = sys.argv[1]
async def main():
    overrides = {"schema.registry.listeners": listeners} if listeners else {}
    config = BrokerConfig.load(environ={}, fields={"port": 0, "data_dir": tempfile.mkdtemp()}, overrides=overrides)
    broker = Broker(config)
    await broker.start()
    loaded = sorted(m for m in sys.modules if m.startswith("minikafka.broker.schema_registry")
                    or m.split(".")[0] in ("avro", "jsonschema", "proto_schema_parser", "aiohttp"))
    print(broker.controller.topic("_schemas") is not None, file=sys.stderr)
    print(broker.schema_registry is not None, ",".join(loaded))
    await broker.stop()
asyncio.run(main())
"""


def _probe(listeners: str) -> tuple[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, listeners], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    running, _, modules = out.stdout.strip().rpartition("\n")[2].partition(" ")
    # _schemas is created by the registry's first write, not by starting it.
    assert out.stderr.strip().splitlines()[-1] == "False", out.stderr
    return running, [m for m in modules.split(",") if m]


def test_off_by_default_and_not_even_imported():
    assert BrokerConfig().get("schema.registry.listeners") == ""
    running, modules = _probe("")
    assert running == "False" and modules == []


def test_on_it_loads_no_schema_parser_until_a_schema_arrives():
    running, modules = _probe("http://127.0.0.1:0")
    assert running == "True"
    assert "minikafka.broker.schema_registry.server" in modules
    # Neither a schema parser nor aiohttp (the registry has its own small HTTP server).
    assert not [m for m in modules if m.split(".")[0] in ("avro", "jsonschema", "proto_schema_parser", "aiohttp")]


def test_listeners_parse():
    assert parse_listeners("http://127.0.0.1:8081, https://0.0.0.0:8443") == [
        ("http", "127.0.0.1", 8081), ("https", "0.0.0.0", 8443)]
    assert parse_listeners("127.0.0.1:0") == [("http", "127.0.0.1", 0)]


def test_make_run_docker_and_compose_serve_it_on_8081():
    makefile = (ROOT / "Makefile").read_text()
    assert "SCHEMA_REGISTRY ?= http://127.0.0.1:8081" in makefile
    assert "--override schema.registry.listeners=$(SCHEMA_REGISTRY)" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert '"schema.registry.listeners=http://0.0.0.0:8081"' in dockerfile and "8081" in dockerfile
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert "127.0.0.1:8081:8081" in compose["services"]["minikafka"]["ports"]


def test_serving_dependencies_are_core_not_extras():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for name in ("avro", "jsonschema", "proto-schema-parser", "protobuf"):
        assert name in core
