"""Protobuf compatibility, as Confluent's Protobuf diff defines it, over two ``FileDescriptorProto``.

Messages are matched by full name and fields by number (names and order do not matter on the
wire).  ``RULES`` says for each difference type whether it is compatible; scalar kinds that share
a wire encoding (``WIRE_GROUPS``) may replace each other.
"""

from __future__ import annotations

from . import Incompatibility

RULES: dict[str, bool] = {
    "PACKAGE_CHANGED": False,
    "SYNTAX_VERSION_CHANGED": True,
    "MESSAGE_ADDED": True,
    "MESSAGE_REMOVED": False,
    "ENUM_ADDED": True,
    "ENUM_REMOVED": False,
    "ENUM_CONST_ADDED": True,
    "ENUM_CONST_CHANGED": True,
    "ENUM_CONST_REMOVED": True,
    "FIELD_ADDED": True,
    "FIELD_REMOVED": True,
    "FIELD_NAME_CHANGED": True,
    "FIELD_KIND_CHANGED": False,
    "FIELD_SCALAR_KIND_CHANGED": False,
    "FIELD_NAMED_TYPE_CHANGED": False,
    "FIELD_LABEL_CHANGED": False,
    "REQUIRED_FIELD_ADDED": False,
    "REQUIRED_FIELD_REMOVED": False,
    "ONEOF_ADDED": True,
    "ONEOF_REMOVED": False,
    "ONEOF_FIELD_ADDED": True,
    "ONEOF_FIELD_REMOVED": False,
    "FIELD_MOVED_TO_EXISTING_ONEOF": False,
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": False,
}

# Scalar kinds (FieldDescriptorProto.Type) that read each other's encoding.
WIRE_GROUPS = (
    frozenset({3, 4, 5, 8, 13}),  # int64 uint64 int32 bool uint32 (varint)
    frozenset({17, 18}),  # sint32 sint64 (zigzag)
    frozenset({9, 12}),  # string bytes
    frozenset({7, 15}),  # fixed32 sfixed32
    frozenset({6, 16}),  # fixed64 sfixed64
)
_NAMED = (10, 11, 14)  # group, message, enum
LABEL_REQUIRED = 2


def _flatten(fdp) -> tuple[dict, dict]:
    messages, enums = {}, {}
    prefix = "." + fdp.package if fdp.package else ""

    def walk(scope, msgs, ens):
        for m in msgs:
            if m.options.map_entry:
                messages[f"{scope}.{m.name}"] = m
            else:
                messages[f"{scope}.{m.name}"] = m
            walk(f"{scope}.{m.name}", m.nested_type, m.enum_type)
        for e in ens:
            enums[f"{scope}.{e.name}"] = e

    walk(prefix, fdp.message_type, fdp.enum_type)
    return messages, enums


def differences(original, update) -> list[tuple[str, str]]:
    """Every (difference type, path) from ``original`` (writer) to ``update`` (reader)."""
    o, u = original.model["fdp"], update.model["fdp"]
    out: list[tuple[str, str]] = []
    if o.package != u.package:
        out.append(("PACKAGE_CHANGED", "#/"))
    if (o.syntax or "proto2") != (u.syntax or "proto2"):
        out.append(("SYNTAX_VERSION_CHANGED", "#/"))
    o_msgs, o_enums = _flatten(o)
    u_msgs, u_enums = _flatten(u)
    for name in o_msgs.keys() - u_msgs.keys():
        out.append(("MESSAGE_REMOVED", name.lstrip(".")))
    for name in u_msgs.keys() - o_msgs.keys():
        out.append(("MESSAGE_ADDED", name.lstrip(".")))
    for name in o_enums.keys() - u_enums.keys():
        out.append(("ENUM_REMOVED", name.lstrip(".")))
    for name in u_enums.keys() - o_enums.keys():
        out.append(("ENUM_ADDED", name.lstrip(".")))
    for name in sorted(o_enums.keys() & u_enums.keys()):
        ov = {v.number: v.name for v in o_enums[name].value}
        uv = {v.number: v.name for v in u_enums[name].value}
        for n in ov.keys() - uv.keys():
            out.append(("ENUM_CONST_REMOVED", f"{name.lstrip('.')}.{ov[n]}"))
        for n in uv.keys() - ov.keys():
            out.append(("ENUM_CONST_ADDED", f"{name.lstrip('.')}.{uv[n]}"))
        for n in ov.keys() & uv.keys():
            if ov[n] != uv[n]:
                out.append(("ENUM_CONST_CHANGED", f"{name.lstrip('.')}.{uv[n]}"))
    for name in sorted(o_msgs.keys() & u_msgs.keys()):
        _message(o_msgs[name], u_msgs[name], name.lstrip("."), out)
    return out


def _oneof_of(msg, field):
    if field.HasField("oneof_index") and not field.proto3_optional:
        return msg.oneof_decl[field.oneof_index].name
    return None


def _message(o, u, path: str, out: list) -> None:
    o_fields = {f.number: f for f in o.field}
    u_fields = {f.number: f for f in u.field}
    o_oneofs = {d.name for i, d in enumerate(o.oneof_decl) if any(
        f.oneof_index == i and f.HasField("oneof_index") and not f.proto3_optional for f in o.field)}
    u_oneofs = {d.name for i, d in enumerate(u.oneof_decl) if any(
        f.oneof_index == i and f.HasField("oneof_index") and not f.proto3_optional for f in u.field)}
    for name in o_oneofs - u_oneofs:
        out.append(("ONEOF_REMOVED", f"{path}.{name}"))
    for name in u_oneofs - o_oneofs:
        out.append(("ONEOF_ADDED", f"{path}.{name}"))
    moved_to_new: dict[str, int] = {}
    for number, of in o_fields.items():
        uf = u_fields.get(number)
        where = f"{path}.{of.name}"
        if uf is None:
            oneof = _oneof_of(o, of)
            if oneof is not None and oneof in u_oneofs:
                out.append(("ONEOF_FIELD_REMOVED", where))
            elif of.label == LABEL_REQUIRED:
                out.append(("REQUIRED_FIELD_REMOVED", where))
            else:
                out.append(("FIELD_REMOVED", where))
            continue
        if of.name != uf.name:
            out.append(("FIELD_NAME_CHANGED", where))
        o_named, u_named = of.type in _NAMED, uf.type in _NAMED
        if o_named != u_named or (o_named and (of.type == 14) != (uf.type == 14)):
            out.append(("FIELD_KIND_CHANGED", where))
        elif o_named:
            if of.type_name.rsplit(".", 1)[-1] != uf.type_name.rsplit(".", 1)[-1] and of.type_name != uf.type_name:
                out.append(("FIELD_NAMED_TYPE_CHANGED", where))
        elif of.type != uf.type and not any(of.type in g and uf.type in g for g in WIRE_GROUPS):
            out.append(("FIELD_SCALAR_KIND_CHANGED", where))
        if (of.label == 3) != (uf.label == 3):
            out.append(("FIELD_LABEL_CHANGED", where))
        o_oneof, u_oneof = _oneof_of(o, of), _oneof_of(u, uf)
        if o_oneof is None and u_oneof is not None:
            if u_oneof in o_oneofs:
                out.append(("FIELD_MOVED_TO_EXISTING_ONEOF", where))
            else:
                moved_to_new[u_oneof] = moved_to_new.get(u_oneof, 0) + 1
    for oneof, count in moved_to_new.items():
        if count > 1:
            out.append(("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}.{oneof}"))
    for number, uf in u_fields.items():
        if number in o_fields:
            continue
        where = f"{path}.{uf.name}"
        oneof = _oneof_of(u, uf)
        if oneof is not None and oneof in o_oneofs:
            out.append(("ONEOF_FIELD_ADDED", where))
        elif uf.label == LABEL_REQUIRED:
            out.append(("REQUIRED_FIELD_ADDED", where))
        else:
            out.append(("FIELD_ADDED", where))


def check(reader, writer) -> list[Incompatibility]:
    return [Incompatibility(kind, f"A {kind} difference at path '#/{path}' in the new schema", path)
            for kind, path in differences(writer, reader) if not RULES[kind]]
