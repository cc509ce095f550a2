"""Compatibility rules, one case per rule of each table (Avro, JSON Schema, Protobuf), the levels
(BACKWARD/FORWARD/FULL and transitive) and canonical/normal forms."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.broker.schema_registry import compat, formats
from minikafka.broker.schema_registry.compat import avro as avro_rules
from minikafka.broker.schema_registry.compat import json_schema as json_rules
from minikafka.broker.schema_registry.compat import protobuf as proto_rules


def A(schema):
    return formats.parse("AVRO", json.dumps(schema))


def J(schema):
    return formats.parse("JSON", json.dumps(schema))


def P(text):
    return formats.parse("PROTOBUF", text)


def rec(*fields, name="R"):
    return {"type": "record", "name": name, "fields": list(fields)}


def f(name, type_, **extra):
    return {"name": name, "type": type_, **extra}


# == Avro: (rule, writer, reader) -> the reader cannot read the writer's data for exactly that rule ==

AVRO_CASES = {
    "NAME_MISMATCH": (rec(f("a", "int"), name="R"), rec(f("a", "int"), name="S")),
    "FIXED_SIZE_MISMATCH": ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}),
    "MISSING_ENUM_SYMBOLS": ({"type": "enum", "name": "E", "symbols": ["A", "B"]},
                             {"type": "enum", "name": "E", "symbols": ["A"]}),
    "READER_FIELD_MISSING_DEFAULT_VALUE": (rec(f("a", "int")), rec(f("a", "int"), f("b", "string"))),
    "TYPE_MISMATCH": (rec(f("a", "string")), rec(f("a", "int"))),
    "MISSING_UNION_BRANCH": (rec(f("a", ["null", "string"])), rec(f("a", ["null", "int"]))),
}

AVRO_COMPATIBLE = [
    ("field added with a default", rec(f("a", "int")), rec(f("a", "int"), f("b", "string", default="x"))),
    ("field removed", rec(f("a", "int"), f("b", "int")), rec(f("a", "int"))),
    ("int promoted to long", rec(f("a", "int")), rec(f("a", "long"))),
    ("int promoted to double", "int", "double"),
    ("long promoted to float", "long", "float"),
    ("float promoted to double", "float", "double"),
    ("string read as bytes", "string", "bytes"),
    ("bytes read as string", "bytes", "string"),
    ("enum symbol added", {"type": "enum", "name": "E", "symbols": ["A"]},
     {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
    ("enum symbol removed with a reader default", {"type": "enum", "name": "E", "symbols": ["A", "B"]},
     {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}),
    ("writer type in a reader union", rec(f("a", "string")), rec(f("a", ["null", "string"]))),
    ("union branch added", rec(f("a", ["null", "string"])), rec(f("a", ["null", "string", "int"]))),
    ("field renamed through an alias", rec(f("old", "int")), rec(f("new", "int", aliases=["old"]))),
    ("record renamed through an alias", rec(f("a", "int"), name="Old"),
     {"type": "record", "name": "New", "aliases": ["Old"], "fields": [f("a", "int")]}),
    ("logical type ignored", rec(f("a", "long")), rec(f("a", {"type": "long", "logicalType": "timestamp-millis"}))),
    ("array items promoted", {"type": "array", "items": "int"}, {"type": "array", "items": "long"}),
    ("map values promoted", {"type": "map", "values": "int"}, {"type": "map", "values": "long"}),
    ("namespace differs, simple name equal", rec(f("a", "int"), name="x.R"), rec(f("a", "int"), name="y.R")),
]


def test_every_avro_rule_has_a_case():
    assert set(AVRO_CASES) == set(avro_rules.RULES)


@pytest.mark.parametrize("rule", sorted(AVRO_CASES))
def test_avro_rule(rule):
    writer, reader = AVRO_CASES[rule]
    found = compat.check_pair(A(reader), A(writer))
    assert [i.error_type for i in found] == [rule]
    assert found[0].description and "errorType:'" + rule in found[0].message()


@pytest.mark.parametrize("why, writer, reader", AVRO_COMPATIBLE, ids=[c[0] for c in AVRO_COMPATIBLE])
def test_avro_compatible(why, writer, reader):
    assert compat.check_pair(A(reader), A(writer)) == []


def test_avro_promotions_do_not_go_backwards():
    assert [i.error_type for i in compat.check_pair(A("int"), A("long"))] == ["TYPE_MISMATCH"]
    assert [i.error_type for i in compat.check_pair(A("float"), A("double"))] == ["TYPE_MISMATCH"]


def test_avro_recursive_types_terminate():
    node = {"type": "record", "name": "Node", "fields": [f("value", "int"), f("next", ["null", "Node"])]}
    node2 = {"type": "record", "name": "Node", "fields": [f("value", "long"), f("next", ["null", "Node"])]}
    assert compat.check_pair(A(node2), A(node)) == []
    assert compat.check_pair(A(node), A(node2)) != []


# == levels =====================================================================================

V1 = rec(f("a", "int"))
V2 = rec(f("a", "int"), f("b", "string", default="x"))  # reads V1 (default), read by V1 (ignored)
V3 = rec(f("a", "int"), f("b", "string"))  # reads V2 but not V1; V2 reads it
NO_A = rec(f("b", "string", default="y"))  # drops a: reads V1's data, but V1 (a has no default) cannot read its


@pytest.mark.parametrize("level, previous, new, ok", [
    ("NONE", [V1], rec(f("z", "bytes")), True),
    ("BACKWARD", [V1], V2, True),
    ("BACKWARD", [V1], V3, False),
    ("BACKWARD", [V1, V2], V3, True),  # only the latest counts
    ("BACKWARD_TRANSITIVE", [V1, V2], V3, False),  # every live version counts
    ("FORWARD", [V2], V3, True),  # V2 reads V3's data
    ("FORWARD", [V2], NO_A, False),  # V2 needs a, which NO_A's data lacks
    ("FORWARD_TRANSITIVE", [V1, V2], V3, True),
    ("FULL", [V1], V2, True),
    ("FULL", [V2], V3, True),  # both have b; V2's default is not needed
    ("FULL_TRANSITIVE", [V1, V2], V2, True),
])
def test_levels(level, previous, new, ok):
    prev = [(i + 1, A(s)) for i, s in enumerate(previous)]
    expected_backward = all(compat.check_pair(A(new), p) == [] for _, p in
                            (prev if level.endswith("TRANSITIVE") else prev[-1:]))
    expected_forward = all(compat.check_pair(p, A(new)) == [] for _, p in
                           (prev if level.endswith("TRANSITIVE") else prev[-1:]))
    want = {"NONE": True, "BACKWARD": expected_backward, "FORWARD": expected_forward,
            "FULL": expected_backward and expected_forward}[level.replace("_TRANSITIVE", "")]
    messages = compat.check(level, A(new), prev)
    assert (messages == []) == want
    assert (messages == []) == ok
    if messages:
        assert messages[-1] == f"{{compatibility: '{level}'}}"
        assert any(m.startswith("{oldSchemaVersion: ") for m in messages)


def test_forward_detects_a_removed_field_without_default():
    # V1 needs a; a schema without a cannot be read by V1.
    assert compat.check("FORWARD", A(NO_A), [(1, A(V1))]) != []
    assert compat.check("BACKWARD", A(NO_A), [(1, A(V1))]) == []


def test_transitive_skips_none_and_reports_the_failing_version():
    messages = compat.check("BACKWARD_TRANSITIVE", A(V3), [(1, A(V1)), (2, A(V2))])
    assert "{oldSchemaVersion: 1}" in messages


# == JSON Schema: (rule, original, update) -> that difference, compatible as the table says =========

OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
CLOSED = {**OPEN, "additionalProperties": False}

JSON_CASES = {
    "TYPE_EXTENDED": ({"type": "string"}, {"type": ["string", "null"]}),
    "TYPE_NARROWED": ({"type": ["string", "null"]}, {"type": "string"}),
    "TYPE_CHANGED": ({"type": "string"}, {"type": "integer"}),
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": (OPEN, {**OPEN, "properties": {**OPEN["properties"], "b": {}}}),
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": (
        CLOSED, {**CLOSED, "properties": {**OPEN["properties"], "b": {"type": "string"}}, "required": ["b"]}),
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL": (
        CLOSED, {**CLOSED, "properties": {**OPEN["properties"], "b": {"type": "string", "default": "x"}},
                 "required": ["b"]}),
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": (
        CLOSED, {**CLOSED, "properties": {**OPEN["properties"], "b": {"type": "string"}}}),
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL": (OPEN, {"type": "object", "properties": {}}),
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": (CLOSED, {**CLOSED, "properties": {}}),
    "REQUIRED_ATTRIBUTE_ADDED": (OPEN, {**OPEN, "required": ["a"]}),
    "REQUIRED_ATTRIBUTE_REMOVED": ({**OPEN, "required": ["a"]}, OPEN),
    "ADDITIONAL_PROPERTIES_ADDED": (OPEN, CLOSED),
    "ADDITIONAL_PROPERTIES_REMOVED": (CLOSED, OPEN),
    "ENUM_ARRAY_EXTENDED": ({"enum": ["a"]}, {"enum": ["a", "b"]}),
    "ENUM_ARRAY_NARROWED": ({"enum": ["a", "b"]}, {"enum": ["a"]}),
    "ENUM_ARRAY_CHANGED": ({"enum": ["a", "b"]}, {"enum": ["a", "c"]}),
    "PATTERN_ADDED": ({"type": "string"}, {"type": "string", "pattern": "^a"}),
    "PATTERN_CHANGED": ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}),
    "PATTERN_REMOVED": ({"type": "string", "pattern": "^a"}, {"type": "string"}),
    "UNIQUE_ITEMS_ADDED": ({"type": "array"}, {"type": "array", "uniqueItems": True}),
    "UNIQUE_ITEMS_REMOVED": ({"type": "array", "uniqueItems": True}, {"type": "array"}),
    "SUM_TYPE_EXTENDED": ({"oneOf": [{"type": "string"}]}, {"oneOf": [{"type": "string"}, {"type": "null"}]}),
    "SUM_TYPE_NARROWED": ({"oneOf": [{"type": "string"}, {"type": "null"}]}, {"oneOf": [{"type": "string"}]}),
    "PRODUCT_TYPE_EXTENDED": ({"allOf": [{"type": "string"}]}, {"allOf": [{"type": "string"}, {"minLength": 1}]}),
    "PRODUCT_TYPE_NARROWED": ({"allOf": [{"type": "string"}, {"minLength": 1}]}, {"allOf": [{"type": "string"}]}),
    "COMBINED_TYPE_CHANGED": ({"oneOf": [{"type": "string"}]}, {"anyOf": [{"type": "string"}]}),
}
JSON_CASES.update({
    "MULTIPLE_OF_ADDED": ({"type": "integer"}, {"type": "integer", "multipleOf": 2}),
    "MULTIPLE_OF_REMOVED": ({"type": "integer", "multipleOf": 2}, {"type": "integer"}),
    "MULTIPLE_OF_EXPANDED": ({"multipleOf": 2}, {"multipleOf": 4}),
    "MULTIPLE_OF_REDUCED": ({"multipleOf": 4}, {"multipleOf": 2}),
    "MULTIPLE_OF_CHANGED": ({"multipleOf": 2}, {"multipleOf": 3}),
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": ({"items": [{"type": "string"}]},
                                         {"items": [{"type": "string"}, {"type": "integer"}]}),
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL": ({"items": [{"type": "string"}], "additionalItems": False},
                                           {"items": [{"type": "string"}, {"type": "integer"}],
                                            "additionalItems": False}),
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL": ({"items": [{"type": "string"}, {"type": "integer"}]},
                                             {"items": [{"type": "string"}]}),
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": ({"items": [{"type": "string"}, {"type": "integer"}],
                                               "additionalItems": False},
                                              {"items": [{"type": "string"}], "additionalItems": False}),
    "DEPENDENCY_ARRAY_ADDED": ({"type": "object"}, {"type": "object", "dependencies": {"a": ["b"]}}),
    "DEPENDENCY_ARRAY_REMOVED": ({"type": "object", "dependencies": {"a": ["b"]}}, {"type": "object"}),
    "DEPENDENCY_ARRAY_EXTENDED": ({"dependencies": {"a": ["b"]}}, {"dependencies": {"a": ["b", "c"]}}),
    "DEPENDENCY_ARRAY_NARROWED": ({"dependencies": {"a": ["b", "c"]}}, {"dependencies": {"a": ["b"]}}),
    "DEPENDENCY_ARRAY_CHANGED": ({"dependencies": {"a": ["b"]}}, {"dependencies": {"a": ["c"]}}),
    "DEPENDENCY_SCHEMA_ADDED": ({"type": "object"}, {"type": "object", "dependencies": {"a": {"required": ["b"]}}}),
    "DEPENDENCY_SCHEMA_REMOVED": ({"type": "object", "dependencies": {"a": {"required": ["b"]}}},
                                  {"type": "object"}),
})
for _keyword, (_prefix, _wider) in json_rules.BOUNDS.items():
    small, big = 1, 5
    lo, hi = (small, big) if _wider else (big, small)  # lo -> hi is the widening direction
    for _suffix, (o, u) in {"ADDED": (None, 3), "REMOVED": (3, None),
                            "INCREASED": (small, big), "DECREASED": (big, small)}.items():
        name = f"{_prefix}_{_suffix}"
        if name in JSON_CASES:
            continue
        JSON_CASES[name] = ({} if o is None else {_keyword: o}, {} if u is None else {_keyword: u})


def test_every_json_rule_has_a_case():
    assert set(JSON_CASES) == set(json_rules.RULES)


@pytest.mark.parametrize("rule", sorted(JSON_CASES))
def test_json_rule(rule):
    original, update = JSON_CASES[rule]
    kinds = [kind for kind, _path in json_rules.differences(J(original), J(update))]
    assert rule in kinds, kinds
    incompatible = [i.error_type for i in compat.check_pair(J(update), J(original))]
    assert (rule in incompatible) == (not json_rules.RULES[rule])


def test_json_nested_properties_and_refs_are_followed():
    original = {"type": "object", "definitions": {"X": {"type": "string"}},
                "properties": {"x": {"$ref": "#/definitions/X"}}}
    update = {"type": "object", "definitions": {"X": {"type": "integer"}},
              "properties": {"x": {"$ref": "#/definitions/X"}}}
    assert [(k, p) for k, p in json_rules.differences(J(original), J(update))] == \
        [("TYPE_CHANGED", "#/properties/x/")]


def test_json_additional_properties_schema_is_compared():
    original = {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
    update = {"type": "object", "additionalProperties": {"type": "string"}}
    assert ("TYPE_NARROWED", "#/additionalProperties/") in json_rules.differences(J(original), J(update))
    assert compat.check_pair(J(update), J(original)) != []


def test_json_identical_schemas_have_no_difference():
    assert json_rules.differences(J(CLOSED), J(CLOSED)) == []


# == Protobuf: (rule, original .proto, update .proto) ===============================================

def proto(body: str, package: str = "p", syntax: str = "proto3") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


BASE = proto("message M { string a = 1; int32 b = 2; }")
PROTO_CASES = {
    "PACKAGE_CHANGED": (BASE, proto("message M { string a = 1; int32 b = 2; }", package="q")),
    "SYNTAX_VERSION_CHANGED": (proto("message M { optional string a = 1; }", syntax="proto2"),
                               proto("message M { optional string a = 1; }")),
    "MESSAGE_ADDED": (BASE, proto("message M { string a = 1; int32 b = 2; } message N { }")),
    "MESSAGE_REMOVED": (proto("message M { string a = 1; int32 b = 2; } message N { }"), BASE),
    "ENUM_ADDED": (BASE, proto("message M { string a = 1; int32 b = 2; } enum E { X = 0; }")),
    "ENUM_REMOVED": (proto("message M { string a = 1; int32 b = 2; } enum E { X = 0; }"), BASE),
    "ENUM_CONST_ADDED": (proto("enum E { X = 0; }"), proto("enum E { X = 0; Y = 1; }")),
    "ENUM_CONST_REMOVED": (proto("enum E { X = 0; Y = 1; }"), proto("enum E { X = 0; }")),
    "ENUM_CONST_CHANGED": (proto("enum E { X = 0; Y = 1; }"), proto("enum E { X = 0; Z = 1; }")),
    "FIELD_ADDED": (BASE, proto("message M { string a = 1; int32 b = 2; bool c = 3; }")),
    "FIELD_REMOVED": (BASE, proto("message M { string a = 1; }")),
    "FIELD_NAME_CHANGED": (BASE, proto("message M { string a = 1; int32 renamed = 2; }")),
    "FIELD_KIND_CHANGED": (proto("message M { N n = 1; } message N { }"),
                           proto("message M { string n = 1; } message N { }")),
    "FIELD_SCALAR_KIND_CHANGED": (BASE, proto("message M { string a = 1; string b = 2; }")),
    "FIELD_NAMED_TYPE_CHANGED": (proto("message M { N n = 1; } message N { } message O { }"),
                                 proto("message M { O n = 1; } message N { } message O { }")),
    "FIELD_LABEL_CHANGED": (BASE, proto("message M { string a = 1; repeated int32 b = 2; }")),
    "REQUIRED_FIELD_ADDED": (proto("message M { optional string a = 1; }", syntax="proto2"),
                             proto("message M { optional string a = 1; required int32 b = 2; }", syntax="proto2")),
    "REQUIRED_FIELD_REMOVED": (proto("message M { optional string a = 1; required int32 b = 2; }", syntax="proto2"),
                               proto("message M { optional string a = 1; }", syntax="proto2")),
    "ONEOF_ADDED": (BASE, proto("message M { string a = 1; oneof o { int32 b = 2; } }")),
    "ONEOF_REMOVED": (proto("message M { string a = 1; oneof o { int32 b = 2; } }"), BASE),
    "ONEOF_FIELD_ADDED": (proto("message M { oneof o { int32 b = 2; } }"),
                          proto("message M { oneof o { int32 b = 2; string c = 3; } }")),
    "ONEOF_FIELD_REMOVED": (proto("message M { oneof o { int32 b = 2; string c = 3; } }"),
                            proto("message M { oneof o { int32 b = 2; } }")),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (proto("message M { string a = 1; oneof o { int32 b = 2; } }"),
                                      proto("message M { oneof o { int32 b = 2; string a = 1; } }")),
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (BASE, proto("message M { oneof o { string a = 1; int32 b = 2; } }")),
}


def test_every_protobuf_rule_has_a_case():
    assert set(PROTO_CASES) == set(proto_rules.RULES)


@pytest.mark.parametrize("rule", sorted(PROTO_CASES))
def test_protobuf_rule(rule):
    original, update = PROTO_CASES[rule]
    kinds = [kind for kind, _ in proto_rules.differences(P(original), P(update))]
    assert rule in kinds, kinds
    incompatible = [i.error_type for i in compat.check_pair(P(update), P(original))]
    assert (rule in incompatible) == (not proto_rules.RULES[rule])


def test_protobuf_wire_compatible_scalars():
    for a, b in (("int32", "int64"), ("uint32", "bool"), ("sint32", "sint64"), ("string", "bytes"),
                 ("fixed32", "sfixed32"), ("fixed64", "sfixed64")):
        assert compat.check_pair(P(proto(f"message M {{ {b} x = 1; }}")),
                                 P(proto(f"message M {{ {a} x = 1; }}"))) == [], (a, b)


def test_protobuf_text_and_descriptor_forms_compare_equal():
    from minikafka.broker.schema_registry.formats import protobuf

    text = P(BASE)
    serialized = P(protobuf.serialized(text))
    assert proto_rules.differences(text, serialized) == []
    assert text.normalized() == serialized.normalized()


# == canonical and normal forms ====================================================================

def test_avro_canonical_form_ignores_whitespace_and_primitive_wrapping():
    assert A(V1).canonical == formats.parse("AVRO", json.dumps(V1, indent=3)).canonical
    assert A({"type": "string"}).canonical == A("string").canonical == '"string"'


def test_avro_normal_form_qualifies_names_and_orders_attributes():
    a = {"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "f", "type": "int"}]}
    b = {"fields": [{"type": "int", "name": "f"}], "name": "n.R", "type": "record"}
    assert A(a).canonical != A(b).canonical
    assert A(a).normalized() == A(b).normalized()
    assert '"name":"n.R"' in A(a).normalized() and "namespace" not in A(a).normalized()


_names = st.text(alphabet="abcdefghij", min_size=1, max_size=6)
_prims = st.sampled_from(["int", "long", "string", "boolean", "double", "bytes"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_names, _prims), min_size=1, max_size=6, unique_by=lambda t: t[0]),
       st.sampled_from(["", "ns", "a.b"]))
def test_avro_normal_form_is_the_same_for_any_spelling(fields, namespace):
    base = {"type": "record", "name": "R", "fields": [{"name": n, "type": t} for n, t in fields]}
    if namespace:
        base["namespace"] = namespace
    full = (namespace + ".R") if namespace else "R"
    respelled = {"fields": [{"type": t, "name": n} for n, t in fields], "name": full, "type": "record"}
    assert A(base).normalized() == A(respelled).normalized()
    # A schema is always compatible with itself, in both directions.
    assert compat.check_pair(A(base), A(respelled)) == [] == compat.check_pair(A(respelled), A(base))


def test_json_normal_form_sorts_keys():
    assert J({"b": 1, "type": "object"}).normalized() == J({"type": "object", "b": 1}).normalized()
