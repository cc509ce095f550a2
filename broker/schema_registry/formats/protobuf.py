"""Protobuf schemas: ``.proto`` text (parsed by ``proto-schema-parser``) or a base64
``FileDescriptorProto`` (what confluent-kafka's serializer sends), both turned into one
``FileDescriptorProto`` (``protobuf``) that compatibility reads.

Stored form: the text as given (stripped), or for a descriptor its deterministic re-serialisation
in base64.  ``serialized(parsed)`` gives the base64 descriptor (``?format=serialized``), ``text(parsed)``
the ``.proto`` text.  References are imports (``import "other.proto"``), named by the import path;
``google/protobuf/*.proto`` resolve from the protobuf package's well-known types.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re

from .. import errors
from . import Parsed

SCALARS = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7, "bool": 8,
    "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16, "sint32": 17, "sint64": 18,
}
TYPE_MESSAGE, TYPE_ENUM, TYPE_GROUP = 11, 14, 10
SCALAR_NAMES = {v: k for k, v in SCALARS.items()}
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3

WELL_KNOWN = {
    "google/protobuf/any.proto": "any_pb2", "google/protobuf/api.proto": "api_pb2",
    "google/protobuf/descriptor.proto": "descriptor_pb2", "google/protobuf/duration.proto": "duration_pb2",
    "google/protobuf/empty.proto": "empty_pb2", "google/protobuf/field_mask.proto": "field_mask_pb2",
    "google/protobuf/source_context.proto": "source_context_pb2", "google/protobuf/struct.proto": "struct_pb2",
    "google/protobuf/timestamp.proto": "timestamp_pb2", "google/protobuf/type.proto": "type_pb2",
    "google/protobuf/wrappers.proto": "wrappers_pb2",
}
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+=*\s*$")


def _fdp():
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FileDescriptorProto()


def well_known(name: str):
    module = WELL_KNOWN.get(name)
    if module is None:
        return None
    fdp = _fdp()
    importlib.import_module(f"google.protobuf.{module}").DESCRIPTOR.CopyToProto(fdp)
    return fdp


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    stripped = text.strip()
    if stripped and _BASE64.match(stripped) and "syntax" not in stripped and "message" not in stripped:
        try:
            raw = base64.b64decode(stripped, validate=False)
            fdp = _fdp()
            fdp.ParseFromString(raw)
        except (binascii.Error, ValueError, Exception) as exc:  # DecodeError is an Exception
            raise errors.invalid_schema(f"{text[:200]}, details: not a serialized FileDescriptorProto: {exc}") \
                from None
        canonical = base64.b64encode(fdp.SerializeToString(deterministic=True)).decode()
        return Parsed("PROTOBUF", canonical, {"fdp": fdp, "form": "serialized"}, references,
                      normalizer=_normalize)
    try:
        fdp = text_to_descriptor(stripped, references)
    except errors.RegistryError:
        raise
    except Exception as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from None
    return Parsed("PROTOBUF", stripped, {"fdp": fdp, "form": "text"}, references, normalizer=_normalize)


def _normalize(parsed: Parsed) -> str:
    return descriptor_to_text(parsed.model["fdp"])


def serialized(parsed: Parsed) -> str:
    return base64.b64encode(parsed.model["fdp"].SerializeToString(deterministic=True)).decode()


def text(parsed: Parsed) -> str:
    return parsed.canonical if parsed.model["form"] == "text" else descriptor_to_text(parsed.model["fdp"])


# == .proto text -> FileDescriptorProto ===========================================================

def _known_types(fdp, table: dict) -> None:
    prefix = "." + fdp.package if fdp.package else ""

    def walk(scope, messages, enums):
        for m in messages:
            table[f"{scope}.{m.name}"] = TYPE_MESSAGE
            walk(f"{scope}.{m.name}", m.nested_type, m.enum_type)
        for e in enums:
            table[f"{scope}.{e.name}"] = TYPE_ENUM

    walk(prefix, fdp.message_type, fdp.enum_type)


def _strict(recognizer) -> None:
    """ANTLR recovers from syntax errors and prints them; a registry must refuse the schema."""
    from antlr4.error.ErrorListener import ErrorListener

    class Raise(ErrorListener):
        def syntaxError(self, recognizer, offending, line, column, msg, e):
            raise ValueError(f"line {line}:{column} {msg}")

    recognizer.removeErrorListeners()
    recognizer.addErrorListener(Raise())


def text_to_descriptor(source: str, references: dict[str, Parsed]):
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    tree = Parser(setup_lexer=_strict, setup_parser=_strict).parse(source)
    fdp = _fdp()
    fdp.name = "schema.proto"
    fdp.syntax = tree.syntax or "proto2"
    table: dict[str, int] = {}
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            fdp.package = element.name
        elif isinstance(element, ast.Import):
            if element.public:
                fdp.public_dependency.append(len(fdp.dependency))
            fdp.dependency.append(element.name)
            dep = references.get(element.name)
            dep_fdp = dep.model["fdp"] if dep is not None and dep.schema_type == "PROTOBUF" else well_known(element.name)
            if dep_fdp is None:
                raise errors.invalid_schema(f"{source[:200]}, details: import {element.name!r} is not a reference")
            _known_types(dep_fdp, table)
            for ref in (dep.references.values() if dep is not None else ()):
                if ref.schema_type == "PROTOBUF":
                    _known_types(ref.model["fdp"], table)
        elif isinstance(element, ast.Option):
            _set_option(fdp.options, element)
    scope = "." + fdp.package if fdp.package else ""
    pending: list = []
    for element in tree.file_elements:
        if isinstance(element, ast.Message):
            _message(fdp.message_type.add(), element, scope, table, pending, fdp.syntax)
        elif isinstance(element, ast.Enum):
            _enum(fdp.enum_type.add(), element, scope, table)
    for field, type_name, field_scope in pending:
        _resolve(field, type_name, field_scope, table)
    return fdp


def _set_option(options, option) -> None:
    name = option.name.strip("()")
    value = getattr(option, "value", None)
    if name in options.DESCRIPTOR.fields_by_name and not isinstance(value, (list, dict)):
        try:
            field = options.DESCRIPTOR.fields_by_name[name]
            if field.enum_type is not None and isinstance(value, str):
                value = field.enum_type.values_by_name[value].number
            elif field.enum_type is not None:
                value = getattr(value, "value", value)
            setattr(options, name, getattr(value, "value", value) if not isinstance(value, (bool, int, float, str))
                    else value)
        except (TypeError, ValueError, KeyError, AttributeError):
            pass


def _message(msg, node, scope: str, table: dict, pending: list, syntax: str) -> None:
    from proto_schema_parser import ast

    msg.name = node.name
    full = f"{scope}.{node.name}"
    table[full] = TYPE_MESSAGE
    # Nested types first, so that the fields can see them.
    for element in node.elements:
        if isinstance(element, ast.Message):
            _message(msg.nested_type.add(), element, full, table, pending, syntax)
        elif isinstance(element, ast.Enum):
            _enum(msg.enum_type.add(), element, full, table)
    synthetic: list = []
    for element in node.elements:
        if isinstance(element, ast.Field):
            _field(msg, msg.field.add(), element, full, pending, syntax, None, synthetic)
        elif isinstance(element, ast.MapField):
            entry = msg.nested_type.add()
            entry.name = "".join(p[:1].upper() + p[1:] for p in element.name.split("_")) + "Entry"
            entry.options.map_entry = True
            table[f"{full}.{entry.name}"] = TYPE_MESSAGE
            for number, (name, type_name) in enumerate((("key", element.key_type), ("value", element.value_type)), 1):
                f = entry.field.add()
                f.name, f.number, f.label = name, number, LABEL_OPTIONAL
                f.json_name = name
                if type_name in SCALARS:
                    f.type = SCALARS[type_name]
                else:
                    pending.append((f, type_name, full))
            f = msg.field.add()
            f.name, f.number, f.label = element.name, element.number, LABEL_REPEATED
            f.json_name = _json_name(element.name)
            f.type = TYPE_MESSAGE
            f.type_name = f"{full}.{entry.name}"
        elif isinstance(element, ast.OneOf):
            index = len(msg.oneof_decl)
            msg.oneof_decl.add().name = element.name
            for inner in element.elements:
                if isinstance(inner, ast.Field):
                    _field(msg, msg.field.add(), inner, full, pending, syntax, index, synthetic)
        elif isinstance(element, ast.Reserved):
            for item in element.ranges:
                text = str(item)
                lo, _, hi = text.partition(" to ")
                rng = msg.reserved_range.add()
                rng.start = int(lo)
                rng.end = (536870912 if hi.strip() == "max" else int(hi)) + 1 if hi else int(lo) + 1
            for name in element.names:
                msg.reserved_name.append(str(name).strip('"'))
    for f in synthetic:  # proto3 optional: a synthetic oneof after the real ones
        f.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add().name = "_" + f.name


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _field(msg, f, node, scope, pending, syntax, oneof_index, synthetic) -> None:
    from proto_schema_parser import ast

    f.name, f.number = node.name, node.number
    f.json_name = _json_name(node.name)
    card = node.cardinality
    if card == ast.FieldCardinality.REPEATED:
        f.label = LABEL_REPEATED
    elif card == ast.FieldCardinality.REQUIRED:
        f.label = LABEL_REQUIRED
    else:
        f.label = LABEL_OPTIONAL
        if card == ast.FieldCardinality.OPTIONAL and syntax == "proto3" and oneof_index is None:
            f.proto3_optional = True
            synthetic.append(f)
    if oneof_index is not None:
        f.oneof_index = oneof_index
    if node.type in SCALARS:
        f.type = SCALARS[node.type]
    else:
        pending.append((f, node.type, scope))
    for option in node.options or []:
        if option.name == "default":
            f.default_value = str(getattr(option, "value", option.value)).lower() \
                if isinstance(option.value, bool) else str(option.value)
        else:
            _set_option(f.options, option)


def _enum(enum, node, scope: str, table: dict) -> None:
    from proto_schema_parser import ast

    enum.name = node.name
    table[f"{scope}.{node.name}"] = TYPE_ENUM
    for element in node.elements:
        if isinstance(element, ast.EnumValue):
            value = enum.value.add()
            value.name, value.number = element.name, element.number
        elif isinstance(element, ast.Option):
            _set_option(enum.options, element)


def _resolve(field, type_name: str, scope: str, table: dict) -> None:
    """Protobuf's scoping: innermost scope first, then outwards; a leading dot is absolute."""
    if type_name.startswith("."):
        candidates = [type_name]
    else:
        parts = scope.split(".") if scope else [""]
        candidates = [".".join(parts[:i] + [type_name]) for i in range(len(parts), 0, -1)]
        candidates = [c if c.startswith(".") else "." + c for c in candidates] + ["." + type_name]
    for candidate in candidates:
        kind = table.get(candidate)
        if kind is not None:
            field.type = kind
            field.type_name = candidate
            return
    raise errors.invalid_schema(f"type {type_name!r} of field {field.name!r} is not defined")


# == FileDescriptorProto -> .proto text ===========================================================

def descriptor_to_text(fdp) -> str:
    lines = [f'syntax = "{fdp.syntax or "proto2"}";']
    if fdp.package:
        lines.append(f"package {fdp.package};")
    public = set(fdp.public_dependency)
    for i, dep in enumerate(fdp.dependency):
        lines.append(f'import {"public " if i in public else ""}"{dep}";')
    for field, value in fdp.options.ListFields():
        lines.append(f"option {field.name} = {_literal(field, value)};")
    lines.append("")
    pkg = "." + fdp.package if fdp.package else ""
    for msg in fdp.message_type:
        _print_message(msg, lines, 0, pkg, fdp.syntax)
    for enum in fdp.enum_type:
        _print_enum(enum, lines, 0)
    return "\n".join(lines) + "\n"


def _literal(field, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return str(value)


def _type_ref(field, scope: str) -> str:
    if field.type in (TYPE_MESSAGE, TYPE_ENUM, TYPE_GROUP):
        name = field.type_name
        if scope and name.startswith(scope + "."):
            return name[len(scope) + 1:]
        return name
    return SCALAR_NAMES[field.type]


def _print_message(msg, lines: list, depth: int, scope: str, syntax: str) -> None:
    pad = "  " * depth
    lines.append(f"{pad}message {msg.name} {{")
    inner = f"{scope}.{msg.name}"
    entries = {f"{inner}.{n.name}": n for n in msg.nested_type if n.options.map_entry}
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            _print_message(nested, lines, depth + 1, inner, syntax)
    for enum in msg.enum_type:
        _print_enum(enum, lines, depth + 1)
    real_oneofs = {}
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            real_oneofs.setdefault(f.oneof_index, []).append(f)
    printed_oneofs = set()
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            if f.oneof_index in printed_oneofs:
                continue
            printed_oneofs.add(f.oneof_index)
            lines.append(f"{pad}  oneof {msg.oneof_decl[f.oneof_index].name} {{")
            for member in real_oneofs[f.oneof_index]:
                lines.append(f"{pad}    {_type_ref(member, inner)} {member.name} = {member.number};")
            lines.append(f"{pad}  }}")
            continue
        entry = entries.get(f.type_name) if f.type == TYPE_MESSAGE else None
        if entry is not None:
            key, value = entry.field[0], entry.field[1]
            lines.append(f"{pad}  map<{_type_ref(key, inner)}, {_type_ref(value, inner)}> {f.name} = {f.number};")
            continue
        label = ""
        if f.label == LABEL_REPEATED:
            label = "repeated "
        elif f.label == LABEL_REQUIRED:
            label = "required "
        elif f.proto3_optional or (syntax != "proto3" and f.label == LABEL_OPTIONAL):
            label = "optional "
        opts = []
        if f.HasField("default_value"):
            opts.append(f"default = {f.default_value}")
        for of, ov in f.options.ListFields():
            opts.append(f"{of.name} = {_literal(of, ov)}")
        suffix = f" [{', '.join(opts)}]" if opts else ""
        lines.append(f"{pad}  {label}{_type_ref(f, inner)} {f.name} = {f.number}{suffix};")
    for rng in msg.reserved_range:
        lines.append(f"{pad}  reserved {rng.start}" + (f" to {rng.end - 1};" if rng.end - 1 != rng.start else ";"))
    for name in msg.reserved_name:
        lines.append(f'{pad}  reserved "{name}";')
    lines.append(f"{pad}}}")


def _print_enum(enum, lines: list, depth: int) -> None:
    pad = "  " * depth
    lines.append(f"{pad}enum {enum.name} {{")
    for value in enum.value:
        lines.append(f"{pad}  {value.name} = {value.number};")
    lines.append(f"{pad}}}")
