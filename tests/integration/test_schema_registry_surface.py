"""The registry's surface: ``minikafka schema`` (list, get, register, check, delete, diff), the console
page per subject, the counters on the broker's /metrics, basic authentication against the broker's
SCRAM and PLAIN users, and TLS from the broker's PEM settings."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest

from minikafka import Broker
from minikafka.broker.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "the schema registry served by minikafka itself (Confluent's registry is not on Maven Central)"))]

V1 = {"type": "record", "name": "Pay", "namespace": "s", "fields": [{"name": "amount", "type": "long"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
BAD = {**V1, "fields": V1["fields"] + [{"name": "currency", "type": "string"}]}


@pytest.fixture(scope="module")
def broker():
    with Broker(schema_registry=True, http_port=0) as b:
        yield b


def _get(url: str, auth: str | None = None, context=None):
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_cli_register_get_check_list_diff_delete(broker, tmp_path, capsys):
    url = ["--url", broker.schema_registry_url]
    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(V1))
    v2.write_text(json.dumps(V2))
    bad.write_text(json.dumps(BAD))

    assert main(["schema", "register", "payments-value", str(v1), *url]) == 0
    assert "registered payments-value version 1 id" in capsys.readouterr().out
    assert main(["schema", "check", "payments-value", str(v2), *url]) == 0
    assert capsys.readouterr().out.startswith("compatible")
    assert main(["schema", "check", "payments-value", str(bad), *url]) == 1
    out = capsys.readouterr().out
    assert out.startswith("incompatible") and "READER_FIELD_MISSING_DEFAULT_VALUE" in out
    assert main(["schema", "register", "payments-value", str(bad), *url]) == 1
    assert "(error_code 409)" in capsys.readouterr().err
    assert main(["schema", "register", "payments-value", str(v2), *url]) == 0
    capsys.readouterr()
    assert main(["schema", "list", *url]) == 0
    assert "payments-value" in capsys.readouterr().out.split()
    assert main(["schema", "list", "--versions", "--json", *url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["subject"], r["version"]) for r in rows if r["subject"] == "payments-value"] == \
        [("payments-value", 1), ("payments-value", 2)]
    assert main(["schema", "get", "payments-value", "-v", "1", *url]) == 0
    assert json.loads(capsys.readouterr().out) == V1
    assert main(["schema", "diff", "payments-value", "1", "2", *url]) == 0
    assert '+      "default": "EUR"' in capsys.readouterr().out
    assert main(["schema", "delete", "payments-value", "-v", "1", *url]) == 0
    assert "deleted payments-value version(s) 1" in capsys.readouterr().out
    assert main(["schema", "get", "payments-value", "-v", "1", *url]) == 1
    assert "(error_code 40402)" in capsys.readouterr().err
    assert main(["schema", "get", "--url", "http://127.0.0.1:1", "x"]) == 3


def test_console_page_shows_versions_and_a_diff(broker):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": broker.schema_registry_url})
    client.register_schema("console-subject", Schema(json.dumps(V1), "AVRO"))
    client.register_schema("console-subject", Schema(json.dumps(V2), "AVRO"))
    status, page = _get(f"{broker.schema_registry_url}/console/subjects/console-subject")
    assert status == 200
    assert "Diff version 1 -> 2" in page and "+      &quot;default&quot;: &quot;EUR&quot;" in page
    status, index = _get(f"{broker.schema_registry_url}/console/")
    assert status == 200 and "console-subject" in index


def test_metrics_count_registry_requests(broker):
    status, before = _get(f"http://127.0.0.1:{broker.http_port}/metrics")
    assert status == 200
    _get(f"{broker.schema_registry_url}/subjects/nope/versions")
    _get(f"{broker.schema_registry_url}/subjects/nope/versions")
    status, after = _get(f"http://127.0.0.1:{broker.http_port}/metrics")

    def count(text):
        for line in text.splitlines():
            if line.startswith('schema_registry_requests_total{route="GET /subjects/{subject}/versions",'
                               'status="404"}'):
                return float(line.split()[-1])
        return 0.0

    assert count(after) - count(before) == 2
    assert "schema_registry_subjects " in after and "schema_registry_max_schema_id " in after


def test_basic_auth_against_scram_and_plain_users(tmp_path):
    data = tmp_path / "data"
    assert main(["users", "add", "alice", "--password", "alice-secret", "--mechanism", "SCRAM-SHA-512",
                 "--data-dir", str(data)]) == 0
    config = {"schema.registry.authentication.method": "BASIC",
              "listener.name.plaintext.plain.sasl.jaas.config":
                  'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'}
    with Broker(data_dir=data, schema_registry=True, config=config) as b:
        url = f"{b.schema_registry_url}/subjects"
        status, body = _get(url)
        assert status == 401 and json.loads(body)["error_code"] == 401
        assert _get(url, "alice:alice-secret")[0] == 200
        assert _get(url, "bob:bob-secret")[0] == 200
        assert _get(url, "alice:wrong")[0] == 401
        assert _get(url, "mallory:x")[0] == 401
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        client = SchemaRegistryClient({"url": b.schema_registry_url, "basic.auth.user.info": "alice:alice-secret"})
        assert client.register_schema("auth-subject", Schema(json.dumps(V1), "AVRO")) >= 1
        assert main(["schema", "list", "--url", b.schema_registry_url, "--user", "bob:bob-secret"]) == 0
        assert main(["schema", "list", "--url", b.schema_registry_url, "--user", "bob:nope"]) == 1


def test_tls_listener_uses_the_broker_pem_settings(tmp_path):
    from minikafka.broker.security.certs import generate

    paths = generate(tmp_path / "certs")
    port_url = "https://127.0.0.1:0"
    with Broker(config={"schema.registry.listeners": port_url,
                        "ssl.keystore.location": str(paths["broker"])}) as b:
        assert b.schema_registry_url.startswith("https://")
        context = ssl.create_default_context(cafile=str(paths["ca"]))
        status, body = _get(f"{b.schema_registry_url}/schemas/types", context=context)
        assert status == 200 and "AVRO" in json.loads(body)
        with pytest.raises(urllib.error.URLError):
            _get(f"{b.schema_registry_url}/schemas/types", context=ssl.create_default_context())
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        client = SchemaRegistryClient({"url": b.schema_registry_url, "ssl.ca.location": str(paths["ca"])})
        assert client.register_schema("tls-subject", Schema(json.dumps(V1), "AVRO")) >= 1
        assert main(["schema", "get", "tls-subject", "--url", b.schema_registry_url, "--ca", str(paths["ca"])]) == 0
