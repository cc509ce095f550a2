"""Avro schemas, parsed and validated by Apache Avro's Python library (``avro``).

Stored form: the schema's JSON, compact, as given (attribute order kept; whitespace gone).
Normal form (``normalize=true``): names fully qualified, no ``namespace`` attributes, attributes in
a fixed order, so that the same schema written two ways normalises to the same text.
References name other subjects' named types (records, enums, fixed); they are parsed first, into
the same name table.
"""

from __future__ import annotations

import json

from .. import errors
from . import Parsed

_ORDER = ("type", "name", "namespace", "doc", "aliases", "fields", "symbols", "items", "values", "size",
          "default", "order", "logicalType", "precision", "scale")


def _names_with(references: dict[str, Parsed]):
    import avro.name

    names = avro.name.Names()
    for ref in references.values():
        if ref.schema_type != "AVRO":
            continue
        _make(ref.model["json"], names, ref.references)
    return names


def _make(data, names, references):
    import avro.schema

    for ref in references.values():  # a reference's own references come first
        if ref.schema_type == "AVRO":
            _make(ref.model["json"], names, ref.references)
    try:
        return avro.schema.make_avsc_object(data, names)
    except Exception as exc:
        if "already in use" in str(exc) or "redefine" in str(exc).lower():
            return None
        raise


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    import avro.errors
    import avro.schema

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from None
    try:
        names = _names_with(references)
        schema = avro.schema.make_avsc_object(data, names)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from None
    if isinstance(data, dict) and len(data) == 1 and data.get("type") in _PRIMITIVES:
        data = data["type"]  # {"type": "string"} is the schema "string"
    canonical = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Parsed("AVRO", canonical, {"json": data, "schema": schema}, references, normalizer=_normalize)


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _full(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def normal_json(data, namespace: str | None = None):
    """The normal form of a schema's JSON (see the module docstring)."""
    if isinstance(data, str):
        return data if data in _PRIMITIVES else _full(data, namespace)
    if isinstance(data, list):
        return [normal_json(branch, namespace) for branch in data]
    if not isinstance(data, dict):
        return data
    kind = data.get("type")
    out: dict = {}
    ns = namespace
    if kind in ("record", "error", "enum", "fixed") and "name" in data:
        ns = data.get("namespace", namespace) if "." not in data["name"] else data["name"].rsplit(".", 1)[0]
        full = _full(data["name"], data.get("namespace", namespace))
    for key in _ORDER + tuple(sorted(k for k in data if k not in _ORDER)):
        if key not in data or key == "namespace":
            continue
        value = data[key]
        if key == "name" and kind in ("record", "error", "enum", "fixed"):
            value = full
        elif key == "type":
            value = normal_json(value, ns) if not (isinstance(value, str) and value in (
                "record", "error", "enum", "fixed", "array", "map")) else value
        elif key == "fields":
            value = [_normal_field(f, ns) for f in value]
        elif key in ("items", "values"):
            value = normal_json(value, ns)
        out[key] = value
    return out


def _normal_field(field: dict, namespace):
    out = {}
    for key in ("name", "doc", "aliases", "type", "default", "order"):
        if key in field:
            out[key] = normal_json(field[key], namespace) if key == "type" else field[key]
    for key in sorted(k for k in field if k not in out):
        out[key] = field[key]
    return out


def _normalize(parsed: Parsed) -> str:
    return json.dumps(normal_json(parsed.model["json"]), separators=(",", ":"), ensure_ascii=False)
