"""JSON Schema compatibility, as Confluent's JSON Schema diff defines it.

The diff walks the old schema (``original``, the writer) and the new one (``update``, the reader)
together and names every difference; ``RULES`` says for each difference type whether it keeps
the update able to validate everything the original did (compatible) or not.  A check is
incompatible when any difference is.  Covered: types, enums, string/number/array/object bounds
(exclusive ones apart), ``multipleOf``, patterns, ``uniqueItems``, properties against open/closed
content models (and ``additionalProperties`` schemas), required, tuple ``items`` against
``additionalItems``, ``dependencies`` (arrays and schemas), oneOf/anyOf/allOf.  ``$ref`` inside a schema (``#/definitions/..``, ``#/$defs/..``)
and to references (by name) are followed, with a guard against cycles.
"""

from __future__ import annotations

from . import Incompatibility

# difference type -> compatible?
RULES: dict[str, bool] = {
    "TYPE_EXTENDED": True,
    "TYPE_NARROWED": False,
    "TYPE_CHANGED": False,
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": False,
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": False,
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL": True,
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": True,
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL": True,
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": False,
    "REQUIRED_ATTRIBUTE_ADDED": False,
    "REQUIRED_ATTRIBUTE_REMOVED": True,
    "ADDITIONAL_PROPERTIES_ADDED": False,
    "ADDITIONAL_PROPERTIES_REMOVED": True,
    "ENUM_ARRAY_EXTENDED": True,
    "ENUM_ARRAY_NARROWED": False,
    "ENUM_ARRAY_CHANGED": False,
    "MAX_LENGTH_ADDED": False, "MAX_LENGTH_DECREASED": False, "MAX_LENGTH_INCREASED": True, "MAX_LENGTH_REMOVED": True,
    "MIN_LENGTH_ADDED": False, "MIN_LENGTH_INCREASED": False, "MIN_LENGTH_DECREASED": True, "MIN_LENGTH_REMOVED": True,
    "PATTERN_ADDED": False, "PATTERN_CHANGED": False, "PATTERN_REMOVED": True,
    "MAXIMUM_ADDED": False, "MAXIMUM_DECREASED": False, "MAXIMUM_INCREASED": True, "MAXIMUM_REMOVED": True,
    "MINIMUM_ADDED": False, "MINIMUM_INCREASED": False, "MINIMUM_DECREASED": True, "MINIMUM_REMOVED": True,
    "MAX_ITEMS_ADDED": False, "MAX_ITEMS_DECREASED": False, "MAX_ITEMS_INCREASED": True, "MAX_ITEMS_REMOVED": True,
    "MIN_ITEMS_ADDED": False, "MIN_ITEMS_INCREASED": False, "MIN_ITEMS_DECREASED": True, "MIN_ITEMS_REMOVED": True,
    "MAX_PROPERTIES_ADDED": False, "MAX_PROPERTIES_DECREASED": False, "MAX_PROPERTIES_INCREASED": True,
    "MAX_PROPERTIES_REMOVED": True,
    "MIN_PROPERTIES_ADDED": False, "MIN_PROPERTIES_INCREASED": False, "MIN_PROPERTIES_DECREASED": True,
    "MIN_PROPERTIES_REMOVED": True,
    "UNIQUE_ITEMS_ADDED": False, "UNIQUE_ITEMS_REMOVED": True,
    "SUM_TYPE_EXTENDED": True, "SUM_TYPE_NARROWED": False,
    "PRODUCT_TYPE_EXTENDED": False, "PRODUCT_TYPE_NARROWED": True,
    "COMBINED_TYPE_CHANGED": False,
    "EXCLUSIVE_MAXIMUM_ADDED": False, "EXCLUSIVE_MAXIMUM_DECREASED": False, "EXCLUSIVE_MAXIMUM_INCREASED": True,
    "EXCLUSIVE_MAXIMUM_REMOVED": True,
    "EXCLUSIVE_MINIMUM_ADDED": False, "EXCLUSIVE_MINIMUM_INCREASED": False, "EXCLUSIVE_MINIMUM_DECREASED": True,
    "EXCLUSIVE_MINIMUM_REMOVED": True,
    "MULTIPLE_OF_ADDED": False, "MULTIPLE_OF_EXPANDED": False, "MULTIPLE_OF_REDUCED": True,
    "MULTIPLE_OF_CHANGED": False, "MULTIPLE_OF_REMOVED": True,
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": False, "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL": True,
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL": True, "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": False,
    "DEPENDENCY_ARRAY_ADDED": False, "DEPENDENCY_ARRAY_REMOVED": True, "DEPENDENCY_ARRAY_EXTENDED": False,
    "DEPENDENCY_ARRAY_NARROWED": True, "DEPENDENCY_ARRAY_CHANGED": False,
    "DEPENDENCY_SCHEMA_ADDED": False, "DEPENDENCY_SCHEMA_REMOVED": True,
}

# Bounds: keyword -> (difference prefix, True when a larger value is more permissive)
BOUNDS = {
    "maxLength": ("MAX_LENGTH", True), "minLength": ("MIN_LENGTH", False),
    "maximum": ("MAXIMUM", True), "minimum": ("MINIMUM", False),
    "exclusiveMaximum": ("EXCLUSIVE_MAXIMUM", True), "exclusiveMinimum": ("EXCLUSIVE_MINIMUM", False),
    "maxItems": ("MAX_ITEMS", True), "minItems": ("MIN_ITEMS", False),
    "maxProperties": ("MAX_PROPERTIES", True), "minProperties": ("MIN_PROPERTIES", False),
}

_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})


def check(reader, writer) -> list[Incompatibility]:
    """``reader`` is the update, ``writer`` the original: incompatible differences, described."""
    diffs: list[tuple[str, str]] = []
    _Diff(writer, reader).compare(writer.model["json"], reader.model["json"], "#/", diffs)
    return [Incompatibility(kind, f"A {kind} difference at path '{path}' of the new schema", path)
            for kind, path in diffs if not RULES[kind]]


def differences(original, update) -> list[tuple[str, str]]:
    """Every (difference type, path) between two parsed JSON schemas (for tests and the console)."""
    diffs: list[tuple[str, str]] = []
    _Diff(original, update).compare(original.model["json"], update.model["json"], "#/", diffs)
    return diffs


class _Diff:
    def __init__(self, original, update) -> None:
        self.roots = (original, update)
        self.seen: set = set()

    def _resolve(self, node, side: int):
        parsed = self.roots[side]
        for _ in range(32):
            if not isinstance(node, dict) or "$ref" not in node:
                return node
            ref = node["$ref"]
            if ref.startswith("#"):
                target = parsed.model["json"]
                for part in [p for p in ref[1:].split("/") if p]:
                    target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) \
                        if isinstance(target, dict) else {}
                node = target
            else:
                name = ref.split("#", 1)[0]
                other = parsed.references.get(name)
                if other is None:
                    return {}
                node = other.model["json"]
        return node

    def compare(self, original, update, path: str, out: list) -> None:
        key = (id(original), id(update))
        if key in self.seen:
            return
        self.seen.add(key)
        original = self._resolve(original, 0)
        update = self._resolve(update, 1)
        if original is True or original == {}:
            original = {}
        if update is True or update == {}:
            update = {}
        if original is False or update is False:
            if original != update:
                out.append(("TYPE_EXTENDED" if original is False else "TYPE_NARROWED", path))
            return
        self._types(original, update, path, out)
        self._enum(original, update, path, out)
        for keyword, (prefix, bigger_is_wider) in BOUNDS.items():
            self._bound(original.get(keyword), update.get(keyword), prefix, bigger_is_wider, path, out)
        self._pattern(original, update, path, out)
        if original.get("uniqueItems") != update.get("uniqueItems"):
            if update.get("uniqueItems"):
                out.append(("UNIQUE_ITEMS_ADDED", path))
            elif original.get("uniqueItems"):
                out.append(("UNIQUE_ITEMS_REMOVED", path))
        self._multiple_of(original.get("multipleOf"), update.get("multipleOf"), path, out)
        self._combined(original, update, path, out)
        self._object(original, update, path, out)
        self._dependencies(original.get("dependencies") or {}, update.get("dependencies") or {}, path, out)
        if "items" in original or "items" in update:
            o_items, u_items = original.get("items", {}), update.get("items", {})
            if isinstance(o_items, list) or isinstance(u_items, list):
                self._tuple(original, update, path, out)
            elif isinstance(o_items, (dict, bool)) and isinstance(u_items, (dict, bool)):
                self.compare(o_items, u_items, path + "items/", out)

    @staticmethod
    def _type_set(node) -> frozenset:
        t = node.get("type")
        if t is None:
            return _ALL_TYPES
        types = frozenset([t] if isinstance(t, str) else t)
        return types | {"integer"} if "number" in types else types

    def _types(self, original, update, path, out) -> None:
        o, u = self._type_set(original), self._type_set(update)
        if o == u:
            return
        if o < u:
            out.append(("TYPE_EXTENDED", path))
        elif u < o:
            out.append(("TYPE_NARROWED", path))
        else:
            out.append(("TYPE_CHANGED", path))

    @staticmethod
    def _enum(original, update, path, out) -> None:
        o, u = original.get("enum"), update.get("enum")
        if o == u:
            return
        if u is None:
            out.append(("ENUM_ARRAY_EXTENDED", path))
        elif o is None:
            out.append(("ENUM_ARRAY_NARROWED", path))
        elif all(v in u for v in o):
            out.append(("ENUM_ARRAY_EXTENDED", path))
        elif all(v in o for v in u):
            out.append(("ENUM_ARRAY_NARROWED", path))
        else:
            out.append(("ENUM_ARRAY_CHANGED", path))

    @staticmethod
    def _bound(o, u, prefix, bigger_is_wider, path, out) -> None:
        if o == u or isinstance(o, bool) or isinstance(u, bool):
            return
        if o is None:
            out.append((f"{prefix}_ADDED", path))
        elif u is None:
            out.append((f"{prefix}_REMOVED", path))
        elif (u > o) == bigger_is_wider:
            out.append((f"{prefix}_INCREASED" if u > o else f"{prefix}_DECREASED", path))
        else:
            out.append((f"{prefix}_DECREASED" if u < o else f"{prefix}_INCREASED", path))

    @staticmethod
    def _multiple_of(o, u, path, out) -> None:
        if o == u or isinstance(o, bool) or isinstance(u, bool):
            return
        if o is None:
            out.append(("MULTIPLE_OF_ADDED", path))
        elif u is None:
            out.append(("MULTIPLE_OF_REMOVED", path))
        elif u % o == 0:
            out.append(("MULTIPLE_OF_EXPANDED", path))  # every accepted value was accepted before: fewer
        elif o % u == 0:
            out.append(("MULTIPLE_OF_REDUCED", path))
        else:
            out.append(("MULTIPLE_OF_CHANGED", path))

    def _tuple(self, original, update, path, out) -> None:
        o_items = original.get("items") if isinstance(original.get("items"), list) else []
        u_items = update.get("items") if isinstance(update.get("items"), list) else []
        o_open = original.get("additionalItems", True) is not False
        u_open = update.get("additionalItems", True) is not False
        for i, (ob, ub) in enumerate(zip(o_items, u_items)):
            self.compare(ob, ub, f"{path}items/{i}/", out)
        for i in range(len(o_items), len(u_items)):
            out.append(("ITEM_ADDED_TO_OPEN_CONTENT_MODEL" if o_open else "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
                        f"{path}items/{i}/"))
        for i in range(len(u_items), len(o_items)):
            out.append(("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL" if u_open else "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                        f"{path}items/{i}/"))

    def _dependencies(self, o: dict, u: dict, path, out) -> None:
        for name in sorted(o.keys() | u.keys()):
            ov, uv = o.get(name), u.get(name)
            where = f"{path}dependencies/{name}/"
            if ov == uv:
                continue
            if isinstance(ov, list) or isinstance(uv, list):
                if ov is None:
                    out.append(("DEPENDENCY_ARRAY_ADDED", where))
                elif uv is None:
                    out.append(("DEPENDENCY_ARRAY_REMOVED", where))
                elif set(ov) < set(uv):
                    out.append(("DEPENDENCY_ARRAY_EXTENDED", where))
                elif set(uv) < set(ov):
                    out.append(("DEPENDENCY_ARRAY_NARROWED", where))
                else:
                    out.append(("DEPENDENCY_ARRAY_CHANGED", where))
            elif ov is None:
                out.append(("DEPENDENCY_SCHEMA_ADDED", where))
            elif uv is None:
                out.append(("DEPENDENCY_SCHEMA_REMOVED", where))
            else:
                self.compare(ov, uv, where, out)

    @staticmethod
    def _pattern(original, update, path, out) -> None:
        o, u = original.get("pattern"), update.get("pattern")
        if o == u:
            return
        out.append(("PATTERN_ADDED" if o is None else "PATTERN_REMOVED" if u is None else "PATTERN_CHANGED", path))

    def _combined(self, original, update, path, out) -> None:
        for keyword in ("oneOf", "anyOf", "allOf"):
            o, u = original.get(keyword), update.get(keyword)
            if o is None and u is None:
                continue
            if o is None or u is None:
                out.append(("COMBINED_TYPE_CHANGED", path))
                continue
            if len(u) > len(o):
                out.append(("PRODUCT_TYPE_EXTENDED" if keyword == "allOf" else "SUM_TYPE_EXTENDED", path))
            elif len(u) < len(o):
                out.append(("PRODUCT_TYPE_NARROWED" if keyword == "allOf" else "SUM_TYPE_NARROWED", path))
            for i, (ob, ub) in enumerate(zip(o, u)):
                self.compare(ob, ub, f"{path}{keyword}/{i}/", out)

    def _object(self, original, update, path, out) -> None:
        o_props, u_props = original.get("properties", {}), update.get("properties", {})
        if not o_props and not u_props and "additionalProperties" not in original \
                and "additionalProperties" not in update and not original.get("required") \
                and not update.get("required"):
            return
        o_open = original.get("additionalProperties", True) is not False
        u_open = update.get("additionalProperties", True) is not False
        if o_open and not u_open:
            out.append(("ADDITIONAL_PROPERTIES_ADDED", path))
        elif u_open and not o_open:
            out.append(("ADDITIONAL_PROPERTIES_REMOVED", path))
        o_extra, u_extra = original.get("additionalProperties"), update.get("additionalProperties")
        if isinstance(o_extra, dict) or isinstance(u_extra, dict):  # a partially open content model
            if o_open and u_open:
                self.compare(o_extra if isinstance(o_extra, dict) else {}, u_extra if isinstance(u_extra, dict) else {},
                             path + "additionalProperties/", out)
        o_req, u_req = set(original.get("required", [])), set(update.get("required", []))
        for name, schema in u_props.items():
            where = f"{path}properties/{name}/"
            if name not in o_props:
                if o_open:
                    out.append(("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where))
                elif name in u_req:
                    has_default = isinstance(schema, dict) and "default" in schema
                    out.append(("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if has_default
                                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where))
                else:
                    out.append(("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where))
            else:
                self.compare(o_props[name], schema, where, out)
        for name in o_props:
            if name not in u_props:
                out.append(("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL" if u_open
                            else "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", f"{path}properties/{name}/"))
        for name in sorted(u_req - o_req):
            if name in o_props:
                schema = u_props.get(name)
                if not (isinstance(schema, dict) and "default" in schema):
                    out.append(("REQUIRED_ATTRIBUTE_ADDED", f"{path}required/{name}"))
        for name in sorted(o_req - u_req):
            out.append(("REQUIRED_ATTRIBUTE_REMOVED", f"{path}required/{name}"))
