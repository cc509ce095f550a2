"""Avro compatibility: can a reader schema read data written with a writer schema?

Avro's schema resolution rules, as Confluent applies them (through Avro's own checker), written
as a table of error types: every rule below has one entry in ``RULES`` and one unit test.  Logical
types are not compared (Avro resolves the underlying type), names compare unqualified or through
the reader's aliases, and recursion through named types stops at a pair already being checked.
"""

from __future__ import annotations

from . import Incompatibility

# error type -> description template (fields: path, name, reader, writer, symbols, ...)
RULES: dict[str, str] = {
    "NAME_MISMATCH": "The type (path '{path}') of a field in the new schema does not match with the old schema",
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the new schema does not match "
                           "with the old schema",
    "MISSING_ENUM_SYMBOLS": "The new schema is missing enum symbols '{symbols}' at path '{path}' in the old schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{name}' at path '{path}' in the new schema has no default "
                                          "value and is missing in the old schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the new schema does not match with the old schema",
    "MISSING_UNION_BRANCH": "The new schema is missing a type inside a union field at path '{path}' in the old "
                            "schema",
}

# Writer type -> reader types that read it (Avro's promotions).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

_NAMED = ("record", "error", "enum", "fixed")


def _issue(kind: str, info: str = "", **fields) -> Incompatibility:
    return Incompatibility(kind, RULES[kind].format(**fields), info)


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader, writer) -> bool:
    if _simple(reader.fullname) == _simple(writer.fullname):
        return True
    aliases = reader.props.get("aliases") or []
    return writer.fullname in aliases or _simple(writer.fullname) in [_simple(a) for a in aliases]


def check(reader_parsed, writer_parsed) -> list[Incompatibility]:
    out: list[Incompatibility] = []
    _check(reader_parsed.model["schema"], writer_parsed.model["schema"], "", set(), out)
    return out


def _check(reader, writer, path: str, seen: set, out: list) -> None:
    if reader.type in _NAMED and writer.type in _NAMED:
        pair = (id(reader), id(writer))
        if pair in seen:
            return
        seen.add(pair)
    if writer.type == "union":
        for i, branch in enumerate(writer.schemas):
            probe: list = []
            _check(reader, branch, f"{path}/{i}", seen, probe)
            if probe:
                out.append(_issue("MISSING_UNION_BRANCH", f"reader union lacking writer type: "
                                  f"{branch.type.upper()}", path=f"{path}/{i}"))
        return
    if reader.type == "union":
        for branch in reader.schemas:
            probe = []
            _check(branch, writer, path, set(seen), probe)
            if not probe:
                return
        out.append(_issue("MISSING_UNION_BRANCH", f"reader union lacking writer type: {writer.type.upper()}",
                          path=path))
        return
    if reader.type != writer.type:
        if reader.type in PROMOTIONS.get(writer.type, ()):
            return
        out.append(_issue("TYPE_MISMATCH", f"reader type: {reader.type.upper()} not compatible with writer type: "
                                           f"{writer.type.upper()}", path=path or "/"))
        return
    kind = reader.type
    if kind in _NAMED and not _names_match(reader, writer):
        out.append(_issue("NAME_MISMATCH", f"expected: {writer.fullname}", path=f"{path}/name"))
        return
    if kind == "fixed":
        if reader.size != writer.size:
            out.append(_issue("FIXED_SIZE_MISMATCH", f"expected: {writer.size}, found: {reader.size}",
                              path=f"{path}/size"))
    elif kind == "enum":
        missing = [s for s in writer.symbols if s not in reader.symbols]
        if missing and getattr(reader, "default", None) is None:
            out.append(_issue("MISSING_ENUM_SYMBOLS", str(missing), symbols=str(missing), path=f"{path}/symbols"))
    elif kind == "array":
        _check(reader.items, writer.items, f"{path}/items", seen, out)
    elif kind == "map":
        _check(reader.values, writer.values, f"{path}/values", seen, out)
    elif kind in ("record", "error"):
        by_name = {f.name: f for f in writer.fields}
        for i, field in enumerate(reader.fields):
            wfield = by_name.get(field.name)
            if wfield is None:
                for alias in field.props.get("aliases") or []:
                    wfield = by_name.get(alias)
                    if wfield is not None:
                        break
            if wfield is None:
                if not field.has_default:
                    out.append(_issue("READER_FIELD_MISSING_DEFAULT_VALUE", field.name, name=field.name,
                                      path=f"{path}/fields/{i}"))
            else:
                _check(field.type, wfield.type, f"{path}/fields/{i}/type", seen, out)
