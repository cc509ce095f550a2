"""The registry's REST API per endpoint, over an in-memory ``_schemas`` log (no broker): Confluent's
answers, error codes and content type."""

import json

import aiohttp
import pytest

from minikafka.broker.schema_registry.api import CONTENT_TYPE, build_app
from minikafka.broker.schema_registry.http import HttpServer
from minikafka.broker.schema_registry.store import MemorySchemasLog, Registry

REC_V1 = {"type": "record", "name": "User", "namespace": "com.example",
          "fields": [{"name": "name", "type": "string"}]}
REC_V2 = {**REC_V1, "fields": REC_V1["fields"] + [{"name": "age", "type": "int", "default": 0}]}
REC_BAD = {**REC_V1, "fields": REC_V1["fields"] + [{"name": "age", "type": "int"}]}


def avro(schema) -> dict:
    return {"schema": json.dumps(schema)}


class Client:
    """aiohttp's client against the registry's own HTTP server on a free loopback port."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    def request(self, method, path, **kwargs):
        return self.session.request(method, self.base + path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)


@pytest.fixture
async def sr():
    log_ = MemorySchemasLog()
    app, _api = build_app(Registry(log_))
    server = HttpServer(app)
    port = await server.start("127.0.0.1", 0)
    async with aiohttp.ClientSession() as session:
        client = Client(session, f"http://127.0.0.1:{port}")
        client.log = log_
        try:
            yield client
        finally:
            await server.stop()


async def call(client, method, path, body=None, status=200):
    kwargs = {} if body is None else {"data": json.dumps(body),
                                      "headers": {"Content-Type": CONTENT_TYPE}}
    response = await client.request(method, path, **kwargs)
    text = await response.text()
    assert response.status == status, text
    assert response.headers["Content-Type"].startswith(CONTENT_TYPE)
    return json.loads(text)


async def test_register_returns_id_and_the_same_schema_twice_gets_the_same_id(sr):
    first = await call(sr, "POST", "/subjects/users-value/versions", avro(REC_V1))
    assert first["id"] == 1 and first["version"] == 1 and first["subject"] == "users-value"
    # Whitespace and indentation do not make another schema.
    again = await call(sr, "POST", "/subjects/users-value/versions", {"schema": json.dumps(REC_V1, indent=4)})
    assert again["id"] == 1 and again["version"] == 1
    # The same schema under another subject shares the id, with its own version 1.
    other = await call(sr, "POST", "/subjects/other/versions", avro(REC_V1))
    assert other["id"] == 1 and other["version"] == 1
    v2 = await call(sr, "POST", "/subjects/users-value/versions", avro(REC_V2))
    assert v2["id"] == 2 and v2["version"] == 2


async def test_normalize_makes_equivalent_spellings_one_schema(sr):
    a = {"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "f", "type": "int"}]}
    b = {"fields": [{"type": "int", "name": "f"}], "name": "n.R", "type": "record"}
    first = await call(sr, "POST", "/subjects/s/versions?normalize=true", avro(a))
    second = await call(sr, "POST", "/subjects/s/versions?normalize=True", avro(b))
    assert first["id"] == second["id"] and second["version"] == 1
    found = await call(sr, "POST", "/subjects/s?normalize=true", avro(b))
    assert found["id"] == first["id"]


async def test_lookup_and_its_errors(sr):
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    found = await call(sr, "POST", "/subjects/s", avro(REC_V1))
    assert (found["subject"], found["version"], found["id"]) == ("s", 1, 1)
    assert json.loads(found["schema"]) == REC_V1
    missing = await call(sr, "POST", "/subjects/nope", avro(REC_V1), status=404)
    assert missing["error_code"] == 40401 and "Subject 'nope' not found" in missing["message"]
    not_there = await call(sr, "POST", "/subjects/s", avro(REC_V2), status=404)
    assert not_there["error_code"] == 40403
    invalid = await call(sr, "POST", "/subjects/s", {"schema": '{"type": "record", "name": "X"}'}, status=422)
    assert invalid["error_code"] == 42201 and invalid["message"].startswith("Invalid schema")


async def test_invalid_schemas_get_42201(sr):
    for body in ({"schema": "{not json"}, {"schema": json.dumps({"type": "nope"})},
                 {"schema": json.dumps({"type": "object", "properties": 3}), "schemaType": "JSON"},
                 {"schema": "message {", "schemaType": "PROTOBUF"}):
        answer = await call(sr, "POST", "/subjects/s/versions", body, status=422)
        assert answer["error_code"] == 42201, body


async def test_incompatible_registration_is_409_with_details(sr):
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    answer = await call(sr, "POST", "/subjects/s/versions", avro(REC_BAD), status=409)
    assert answer["error_code"] == 409
    assert "Schema being registered is incompatible with an earlier schema" in answer["message"]
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in answer["message"]


async def test_subjects_versions_and_get_by_version(sr):
    await call(sr, "POST", "/subjects/b/versions", avro(REC_V1))
    await call(sr, "POST", "/subjects/a/versions", avro(REC_V1))
    await call(sr, "POST", "/subjects/a/versions", avro(REC_V2))
    assert await call(sr, "GET", "/subjects") == ["a", "b"]
    assert await call(sr, "GET", "/subjects?subjectPrefix=a") == ["a"]
    assert await call(sr, "GET", "/subjects/a/versions") == [1, 2]
    latest = await call(sr, "GET", "/subjects/a/versions/latest")
    assert latest["version"] == 2 and latest["id"] == 2 and "schemaType" not in latest
    assert (await call(sr, "GET", "/subjects/a/versions/-1"))["version"] == 2
    assert (await call(sr, "GET", "/subjects/a/versions/1"))["id"] == 1
    raw = await call(sr, "GET", "/subjects/a/versions/2/schema")
    assert raw == REC_V2
    nope = await call(sr, "GET", "/subjects/a/versions/3", status=404)
    assert nope["error_code"] == 40402 and "Version 3 not found" in nope["message"]
    bad = await call(sr, "GET", "/subjects/a/versions/abc", status=422)
    assert bad["error_code"] == 42202 and "is not a valid version id" in bad["message"]
    gone = await call(sr, "GET", "/subjects/zz/versions", status=404)
    assert gone["error_code"] == 40401


async def test_schema_by_id_its_subjects_versions_and_types(sr):
    await call(sr, "POST", "/subjects/a/versions", avro(REC_V1))
    await call(sr, "POST", "/subjects/b/versions", avro(REC_V1))
    by_id = await call(sr, "GET", "/schemas/ids/1")
    assert json.loads(by_id["schema"]) == REC_V1 and "schemaType" not in by_id
    assert await call(sr, "GET", "/schemas/ids/1/schema") == REC_V1
    assert await call(sr, "GET", "/schemas/ids/1/subjects") == ["a", "b"]
    assert await call(sr, "GET", "/schemas/ids/1/versions") == [{"subject": "a", "version": 1},
                                                                  {"subject": "b", "version": 1}]
    missing = await call(sr, "GET", "/schemas/ids/99", status=404)
    assert missing["error_code"] == 40403 and "Schema 99 not found" in missing["message"]
    assert sorted(await call(sr, "GET", "/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"]
    by_guid = await call(sr, "GET", f"/schemas/guids/{by_id['guid']}")
    assert by_guid["id"] == 1
    listed = await call(sr, "GET", "/schemas?subjectPrefix=a")
    assert [(s["subject"], s["version"]) for s in listed] == [("a", 1)]


async def test_soft_then_permanent_delete_of_a_version(sr):
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V2))
    early = await call(sr, "DELETE", "/subjects/s/versions/1?permanent=true", status=404)
    assert early["error_code"] == 40407
    assert await call(sr, "DELETE", "/subjects/s/versions/1") == 1
    again = await call(sr, "DELETE", "/subjects/s/versions/1", status=404)
    assert again["error_code"] == 40406
    assert await call(sr, "GET", "/subjects/s/versions") == [2]
    assert await call(sr, "GET", "/subjects/s/versions?deleted=true") == [1, 2]
    assert await call(sr, "GET", "/subjects/s/versions?deleted_only=true") == [1]
    assert (await call(sr, "GET", "/subjects/s/versions/1", status=404))["error_code"] == 40402
    assert (await call(sr, "GET", "/subjects/s/versions/1?deleted=true"))["id"] == 1
    # The id still answers: a consumer may still read data written with it.
    assert (await call(sr, "GET", "/schemas/ids/1"))["schema"]
    assert await call(sr, "DELETE", "/subjects/s/versions/1?permanent=true") == 1
    assert (await call(sr, "GET", "/schemas/ids/1", status=404))["error_code"] == 40403
    # The next version continues after the highest ever used.
    v3 = await call(sr, "POST", "/subjects/s/versions", avro({**REC_V2, "doc": "three"}))
    assert v3["version"] == 3 and v3["id"] == 3


async def test_soft_and_permanent_delete_of_a_subject(sr):
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V2))
    early = await call(sr, "DELETE", "/subjects/s?permanent=true", status=404)
    assert early["error_code"] == 40405
    assert await call(sr, "DELETE", "/subjects/s") == [1, 2]
    assert await call(sr, "GET", "/subjects") == []
    assert await call(sr, "GET", "/subjects?deleted=true") == ["s"]
    assert await call(sr, "GET", "/subjects?deleted_only=true") == ["s"]
    twice = await call(sr, "DELETE", "/subjects/s", status=404)
    assert twice["error_code"] == 40404
    # A soft-deleted schema can be looked up with deleted=true, and registered again (new version).
    assert (await call(sr, "POST", "/subjects/s?deleted=true", avro(REC_V1)))["version"] == 1
    assert await call(sr, "DELETE", "/subjects/s?permanent=true") == [1, 2]
    assert await call(sr, "GET", "/subjects?deleted=true") == []
    assert (await call(sr, "DELETE", "/subjects/s", status=404))["error_code"] == 40401
    fresh = await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    assert fresh["version"] == 1 and fresh["id"] == 3  # ids are never reused


async def test_references_and_referenced_by(sr):
    address = {"type": "record", "name": "Address", "namespace": "com.example",
               "fields": [{"name": "street", "type": "string"}]}
    await call(sr, "POST", "/subjects/address/versions", avro(address))
    person = {"type": "record", "name": "Person", "namespace": "com.example",
              "fields": [{"name": "home", "type": "com.example.Address"}]}
    refs = [{"name": "com.example.Address", "subject": "address", "version": 1}]
    registered = await call(sr, "POST", "/subjects/person/versions", {**avro(person), "references": refs})
    assert registered["references"] == refs
    assert await call(sr, "GET", "/subjects/address/versions/1/referencedby") == [registered["id"]]
    by_id = await call(sr, "GET", f"/schemas/ids/{registered['id']}")
    assert by_id["references"] == refs
    # A referenced version cannot be deleted.
    refused = await call(sr, "DELETE", "/subjects/address/versions/1", status=422)
    assert refused["error_code"] == 42206
    # Without its reference the schema does not parse.
    lone = await call(sr, "POST", "/subjects/lone/versions", avro(person), status=422)
    assert lone["error_code"] == 42201
    dangling = await call(sr, "POST", "/subjects/x/versions",
                          {**avro(person), "references": [{**refs[0], "version": 7}]}, status=422)
    assert dangling["error_code"] == 42201


async def test_config_global_and_per_subject(sr):
    assert await call(sr, "GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    assert await call(sr, "PUT", "/config", {"compatibility": "full"}) == {"compatibility": "FULL"}
    assert (await call(sr, "GET", "/config"))["compatibilityLevel"] == "FULL"
    missing = await call(sr, "GET", "/config/s", status=404)
    assert missing["error_code"] == 40408
    assert (await call(sr, "GET", "/config/s?defaultToGlobal=true"))["compatibilityLevel"] == "FULL"
    answer = await call(sr, "PUT", "/config/s", {"compatibility": "NONE", "normalize": True, "alias": "t"})
    assert answer == {"compatibility": "NONE", "normalize": True, "alias": "t"}
    assert await call(sr, "GET", "/config/s") == {"compatibilityLevel": "NONE", "normalize": True, "alias": "t"}
    bad = await call(sr, "PUT", "/config/s", {"compatibility": "INVALID"}, status=422)
    assert bad["error_code"] == 42203 and "Invalid compatibility level" in bad["message"]
    # NONE lets an otherwise incompatible schema in.
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    assert (await call(sr, "POST", "/subjects/s/versions", avro(REC_BAD)))["version"] == 2
    assert (await call(sr, "DELETE", "/config/s"))["compatibilityLevel"] == "NONE"
    assert (await call(sr, "GET", "/config/s", status=404))["error_code"] == 40408
    await call(sr, "DELETE", "/config")
    assert await call(sr, "GET", "/config") == {"compatibilityLevel": "BACKWARD"}


async def test_subject_normalize_config_applies_without_the_flag(sr):
    await call(sr, "PUT", "/config/s", {"normalize": True})
    a = {"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "f", "type": "int"}]}
    b = {"name": "n.R", "type": "record", "fields": [{"name": "f", "type": "int"}]}
    first = await call(sr, "POST", "/subjects/s/versions", avro(a))
    assert (await call(sr, "POST", "/subjects/s/versions", avro(b)))["version"] == first["version"]


async def test_modes_readonly_and_import(sr):
    assert await call(sr, "GET", "/mode") == {"mode": "READWRITE"}
    assert await call(sr, "PUT", "/mode/s", {"mode": "READONLY"}) == {"mode": "READONLY"}
    refused = await call(sr, "POST", "/subjects/s/versions", avro(REC_V1), status=422)
    assert refused["error_code"] == 42205
    assert await call(sr, "DELETE", "/mode/s") == {"mode": "READONLY"}
    assert (await call(sr, "GET", "/mode/s", status=404))["error_code"] == 40409
    assert (await call(sr, "GET", "/mode/s?defaultToGlobal=true")) == {"mode": "READWRITE"}
    bad = await call(sr, "PUT", "/mode", {"mode": "SIDEWAYS"}, status=422)
    assert bad["error_code"] == 42204
    # IMPORT: explicit ids (and versions) are kept; refused while subjects exist unless forced.
    assert await call(sr, "PUT", "/mode", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    imported = await call(sr, "POST", "/subjects/imp/versions", {**avro(REC_V1), "id": 42, "version": 3})
    assert (imported["id"], imported["version"]) == (42, 3)
    needs_id = await call(sr, "POST", "/subjects/imp2/versions", avro(REC_V2), status=422)
    assert needs_id["error_code"] == 42205
    clash = await call(sr, "POST", "/subjects/imp2/versions", {**avro(REC_V2), "id": 42}, status=422)
    assert clash["error_code"] == 42207
    await call(sr, "PUT", "/mode", {"mode": "READWRITE"})
    # New ids continue after the highest imported one.
    assert (await call(sr, "POST", "/subjects/after/versions", avro(REC_V2)))["id"] == 43
    refused = await call(sr, "PUT", "/mode", {"mode": "IMPORT"}, status=422)
    assert refused["error_code"] == 42205
    assert await call(sr, "PUT", "/mode?force=true", {"mode": "IMPORT"}) == {"mode": "IMPORT"}


async def test_explicit_id_outside_import_mode_is_refused(sr):
    refused = await call(sr, "POST", "/subjects/s/versions", {**avro(REC_V1), "id": 7}, status=422)
    assert refused["error_code"] == 42205


async def test_metadata_and_rule_set_are_carried_and_returned(sr):
    metadata = {"properties": {"owner": "team-a", "tier": "1"}}
    rule_set = {"domainRules": [{"name": "checkName", "kind": "CONDITION", "type": "CEL", "mode": "WRITE",
                                 "expr": "message.name != ''"}]}
    reg = await call(sr, "POST", "/subjects/s/versions", {**avro(REC_V1), "metadata": metadata,
                                                          "ruleSet": rule_set})
    assert reg["metadata"] == metadata and reg["ruleSet"] == rule_set
    got = await call(sr, "GET", "/subjects/s/versions/1")
    assert got["metadata"] == metadata and got["ruleSet"] == rule_set
    by_id = await call(sr, "GET", f"/schemas/ids/{reg['id']}")
    assert by_id["metadata"] == metadata and by_id["ruleSet"] == rule_set
    # New metadata on the same schema is a new version.
    reg2 = await call(sr, "POST", "/subjects/s/versions", {**avro(REC_V1), "metadata": {"properties": {"owner": "b"}}})
    assert reg2["version"] == 2
    by_meta = await call(sr, "GET", "/subjects/s/metadata?key=owner&value=team-a")
    assert by_meta["version"] == 1


async def test_compatibility_endpoints_with_verbose(sr):
    await call(sr, "POST", "/subjects/s/versions", avro(REC_V1))
    ok = await call(sr, "POST", "/compatibility/subjects/s/versions/latest", avro(REC_V2))
    assert ok == {"is_compatible": True}
    bad = await call(sr, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", avro(REC_BAD))
    assert bad["is_compatible"] is False and any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in bad["messages"])
    assert (await call(sr, "POST", "/compatibility/subjects/s/versions?verbose=true", avro(REC_V2))) == \
        {"is_compatible": True, "messages": []}
    assert (await call(sr, "POST", "/compatibility/subjects/new/versions/latest", avro(REC_V2)))["is_compatible"]
    missing = await call(sr, "POST", "/compatibility/subjects/s/versions/9", avro(REC_V2), status=404)
    assert missing["error_code"] == 40402


async def test_unknown_paths_and_bad_bodies_have_confluent_bodies(sr):
    nope = await call(sr, "GET", "/nothing/here", status=404)
    assert nope["error_code"] == 404
    response = await sr.post("/subjects/s/versions", data=b"{oops", headers={"Content-Type": "application/json"})
    assert response.status == 400 and (await response.json(content_type=None))["error_code"] == 400
    assert await call(sr, "GET", "/") == {}
    assert await call(sr, "GET", "/contexts") == ["."]


async def test_json_and_protobuf_schemas_round_trip(sr):
    js = {"type": "object", "properties": {"a": {"type": "string"}}}
    reg = await call(sr, "POST", "/subjects/j/versions", {"schema": json.dumps(js), "schemaType": "JSON"})
    got = await call(sr, "GET", f"/schemas/ids/{reg['id']}")
    assert got["schemaType"] == "JSON" and json.loads(got["schema"]) == js
    proto = 'syntax = "proto3";\npackage p;\nmessage M { string a = 1; int32 b = 2; }\n'
    reg = await call(sr, "POST", "/subjects/p/versions", {"schema": proto, "schemaType": "PROTOBUF"})
    got = await call(sr, "GET", f"/schemas/ids/{reg['id']}")
    assert got["schemaType"] == "PROTOBUF" and "message M" in got["schema"]
    serialized = await call(sr, "GET", f"/schemas/ids/{reg['id']}?format=serialized")
    import base64

    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized["schema"]))
    assert fdp.package == "p" and [f.name for f in fdp.message_type[0].field] == ["a", "b"]
    # The descriptor form of the same schema, registered again, is found by lookup of the text form.
    again = await call(sr, "POST", "/subjects/p2/versions", {"schema": serialized["schema"],
                                                             "schemaType": "PROTOBUF"})
    assert again["version"] == 1
    text = await call(sr, "GET", f"/subjects/p2/versions/1")
    assert "message M" in text["schema"]


async def test_subject_names_with_a_slash_percent_encoded(sr):
    reg = await call(sr, "POST", "/subjects/team%2Forders-value/versions", avro(REC_V1))
    assert reg["subject"] == "team/orders-value"
    assert await call(sr, "GET", "/subjects") == ["team/orders-value"]
    assert (await call(sr, "GET", "/subjects/team%2Forders-value/versions/1"))["id"] == reg["id"]


async def test_alias_config_redirects_reads(sr):
    reg = await call(sr, "POST", "/subjects/shared-user/versions", avro(REC_V1))
    await call(sr, "PUT", "/config/users-value", {"alias": "shared-user"})
    latest = await call(sr, "GET", "/subjects/users-value/versions/latest")
    assert (latest["subject"], latest["id"]) == ("shared-user", reg["id"])
    assert await call(sr, "GET", "/subjects/users-value/versions") == [1]
    found = await call(sr, "POST", "/subjects/users-value", avro(REC_V1))
    assert found["id"] == reg["id"]


async def test_compatibility_group_checks_only_the_same_group(sr):
    await call(sr, "PUT", "/config/g", {"compatibilityGroup": "major"})
    one = {"properties": {"major": "1"}}
    two = {"properties": {"major": "2"}}
    await call(sr, "POST", "/subjects/g/versions", {**avro(REC_V1), "metadata": one})
    # Incompatible with group 1's schema, but alone in group 2.
    reg = await call(sr, "POST", "/subjects/g/versions", {**avro(REC_BAD), "metadata": two})
    assert reg["version"] == 2
    refused = await call(sr, "POST", "/subjects/g/versions", {**avro(REC_BAD), "metadata": one}, status=409)
    assert refused["error_code"] == 409
