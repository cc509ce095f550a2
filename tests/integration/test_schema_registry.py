"""The schema registry served by the broker, with real clients: confluent-kafka's SchemaRegistryClient
(sync and async) and its Avro, JSON Schema and Protobuf serializers through minikafka's registry and
broker; the ``_schemas`` records as Confluent writes them; ids stable across a restart and a kill -9."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BrokerProcess

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.minikafka_only(reason=(
    "the schema registry served by minikafka itself (Confluent's registry is not on Maven Central)"))

USER = {"type": "record", "name": "User", "namespace": "it.example",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def embedded():
    from minikafka import Broker

    with Broker(schema_registry=True) as broker:
        yield broker


@pytest.fixture
def sr(embedded):
    return SchemaRegistryClient({"url": embedded.schema_registry_url})


def _roundtrip(embedded, topic, serializer, deserializer, values):
    producer = Producer({"bootstrap.servers": embedded.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": embedded.bootstrap_servers, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return out


def test_avro_serializer_round_trip(embedded, sr):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    values = [{"name": f"u{i}", "age": i} for i in range(5)]
    serializer = AvroSerializer(sr, json.dumps(USER))
    deserializer = AvroDeserializer(sr)
    assert _roundtrip(embedded, "avro-users", serializer, deserializer, values) == values
    assert sr.get_latest_version("avro-users-value").schema_id >= 1


def test_json_serializer_round_trip(embedded, sr):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"]}
    values = [{"id": i, "item": f"thing {i}"} for i in range(5)]
    serializer = JSONSerializer(json.dumps(schema), sr)
    deserializer = JSONDeserializer(json.dumps(schema))
    assert _roundtrip(embedded, "json-orders", serializer, deserializer, values) == values


def test_protobuf_serializer_round_trip_with_a_well_known_import(embedded, sr):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2  # noqa: F401
    from google.protobuf.message_factory import GetMessageClass

    # A message type built at run time (no generated module in the tree): it imports Timestamp.
    fdp = descriptor_pb2.FileDescriptorProto(name="it_reading.proto", package="it", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    msg = fdp.message_type.add(name="Reading")
    msg.field.add(name="sensor", number=1, type=9, label=1)
    msg.field.add(name="value", number=2, type=1, label=1)
    msg.field.add(name="at", number=3, type=11, label=1, type_name=".google.protobuf.Timestamp")
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("it_reading.proto")
    except KeyError:
        pool.Add(fdp)
    Reading = GetMessageClass(pool.FindMessageTypeByName("it.Reading"))
    values = [Reading(sensor=f"s{i}", value=i / 2) for i in range(4)]
    for i, v in enumerate(values):
        v.at.seconds = 1_700_000_000 + i
    serializer = ProtobufSerializer(Reading, sr, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(Reading, {"use.deprecated.format": False})
    assert _roundtrip(embedded, "proto-readings", serializer, deserializer, values) == values
    registered = sr.get_latest_version("proto-readings-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message Reading" in registered.schema.schema_str


def test_async_client(embedded):
    from confluent_kafka.schema_registry import AsyncSchemaRegistryClient

    async def run():
        client = AsyncSchemaRegistryClient({"url": embedded.schema_registry_url})
        schema = Schema(json.dumps({**USER, "name": "AsyncUser"}), "AVRO")
        schema_id = await client.register_schema("async-subject", schema)
        found = await client.lookup_schema("async-subject", schema)
        versions = await client.get_versions("async-subject")
        with pytest.raises(SchemaRegistryError) as e:
            await client.get_version("async-subject", 9)
        return schema_id, found, versions, e.value

    schema_id, found, versions, error = asyncio.run(run())
    assert found.schema_id == schema_id and versions == [1]
    assert error.http_status_code == 404 and error.error_code == 40402


def test_schemas_topic_holds_confluent_records(embedded, sr):
    subject = "records-check"
    schema_id = sr.register_schema(subject, Schema(json.dumps({**USER, "name": "Rec"}), "AVRO"))
    sr.set_compatibility(subject_name=subject, level="FULL")
    sr.delete_version(subject, 1)
    consumer = Consumer({"bootstrap.servers": embedded.bootstrap_servers, "group.id": "schemas-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["_schemas"])
    seen = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and not any(
                json.loads(k).get("keytype") == "SCHEMA" and v is not None and json.loads(v).get("deleted")
                and json.loads(v)["subject"] == subject for k, v in seen):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    mine = [(json.loads(k), json.loads(v) if v is not None else None) for k, v in seen
            if json.loads(k).get("subject") == subject]
    assert (b'{"keytype":"SCHEMA","subject":"records-check","version":1,"magic":1}'
            in [k for k, _ in seen])
    schema_values = [v for k, v in mine if k["keytype"] == "SCHEMA"]
    assert schema_values[0]["id"] == schema_id and schema_values[0]["deleted"] is False
    assert "schemaType" not in schema_values[0]  # AVRO is the default, not written
    assert schema_values[-1]["deleted"] is True
    configs = [v for k, v in mine if k["keytype"] == "CONFIG"]
    assert configs == [{"compatibilityLevel": "FULL"}]
    assert ({"keytype": "CONFIG", "subject": subject, "magic": 0}) in [k for k, _ in mine]


def _http(url: str, method: str = "GET", body=None, auth: str | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    if auth:
        import base64

        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_ids_survive_a_restart_and_a_kill_minus_9(tmp_path):
    port = _free_port()
    broker = BrokerProcess(tmp_path, {"schema_registry_listeners": f"http://127.0.0.1:{port}"})
    url = f"http://127.0.0.1:{port}"
    try:
        acknowledged: dict[str, int] = {}
        stop = threading.Event()

        def register_forever():
            i = 0
            while not stop.is_set() and i < 5000:
                subject = f"s{i}"
                schema = {"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": "int"}]}
                try:
                    status, body = _http(f"{url}/subjects/{subject}/versions", "POST",
                                         {"schema": json.dumps(schema)})
                except (OSError, ValueError):
                    return  # the broker is gone
                if status == 200:
                    acknowledged[subject] = body["id"]
                i += 1

        status, _ = _http(f"{url}/config", "PUT", {"compatibility": "FULL_TRANSITIVE"})
        assert status == 200
        writer = threading.Thread(target=register_forever)
        writer.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        broker.restart(kill=True)  # SIGKILL while registrations are in flight
        stop.set()
        writer.join(10)
        assert len(acknowledged) >= 40
        for subject, schema_id in acknowledged.items():
            status, body = _http(f"{url}/subjects/{subject}/versions/1")
            assert status == 200, (subject, body)
            assert body["id"] == schema_id
        ids = sorted(acknowledged.values())
        assert len(set(ids)) == len(ids)
        status, body = _http(f"{url}/subjects/after-kill/versions", "POST", {"schema": json.dumps(
            {"type": "record", "name": "AfterKill", "fields": []})})
        assert status == 200 and body["id"] > max(ids)
        assert _http(f"{url}/config")[1]["compatibilityLevel"] == "FULL_TRANSITIVE"
        # And a clean restart keeps everything too.
        broker.restart()
        assert _http(f"{url}/subjects/after-kill/versions/1")[1]["id"] == body["id"]
        assert _http(f"{url}/schemas/ids/{ids[0]}")[0] == 200
    finally:
        broker.stop()


PLUGIN_PROJECT = '''
import json
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient


def test_registers(schema_registry_url, kafka_bootstrap):
    client = SchemaRegistryClient({"url": schema_registry_url})
    schema_id = client.register_schema("plugin-subject", Schema(json.dumps("string"), "AVRO"))
    assert client.get_schema(schema_id).schema_str == '"string"'


def test_no_registry_needed(kafka_bootstrap):
    assert kafka_bootstrap
'''


def test_pytest_plugin_fixture_embedded_and_external(tmp_path):
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_sr.py").write_text(PLUGIN_PROJECT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTEST_"))}
    run = lambda *args, extra=None: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", *args], cwd=project,
        env={**env, **(extra or {})}, capture_output=True, text=True, timeout=300)
    proc = run()
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr
    port = _free_port()
    external = BrokerProcess(tmp_path / "external", {"schema_registry_listeners": f"http://127.0.0.1:{port}"})
    try:
        proc = run(f"--kafka-bootstrap={external.bootstrap}")
        assert "1 passed, 1 skipped" in proc.stdout and "no schema registry was given" in proc.stdout, \
            proc.stdout + proc.stderr
        proc = run(f"--kafka-bootstrap={external.bootstrap}",
                   extra={"MINIKAFKA_SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{port}"})
        assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr
    finally:
        external.stop()


def test_kafkajs_confluent_schema_registry(embedded, tmp_path):
    """kafkajs' @kafkajs/confluent-schema-registry (npm, installed once into .venv/node) registers,
    encodes and decodes Avro, JSON Schema and Protobuf through the registry."""
    import shutil
    import subprocess
    from pathlib import Path

    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed for kafkajs' schema registry client")
    repo = Path(__file__).resolve().parents[2]
    prefix = repo / ".venv" / "node" / "schema-registry"
    package = prefix / "node_modules" / "@kafkajs" / "confluent-schema-registry"
    if not package.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        out = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
                              "@kafkajs/confluent-schema-registry@3.9.0"], capture_output=True, text=True,
                             timeout=240)
        assert out.returncode == 0, out.stderr
    script = Path(__file__).parent / "js" / "schema_registry_check.js"
    out = subprocess.run([node, str(script), embedded.schema_registry_url], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "NODE_PATH": str(prefix / "node_modules")})
    assert out.returncode == 0, out.stderr
    assert "7/7 ok" in out.stdout, out.stdout
