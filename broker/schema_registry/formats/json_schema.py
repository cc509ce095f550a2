"""JSON Schema: parsed with ``json``, checked against its draft's meta-schema by ``jsonschema``.

Stored form: the schema's JSON, compact, key order kept.  Normal form: keys sorted.  References
name other subjects' schemas by the ``$ref`` text they are reached with (``"$ref": "address.json"``).
"""

from __future__ import annotations

import json

from .. import errors
from . import Parsed


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from None
    if not isinstance(data, (dict, bool)):
        raise errors.invalid_schema(f"{text[:200]}, details: a JSON schema is an object or a boolean")
    if isinstance(data, dict):
        import jsonschema
        import jsonschema.exceptions

        try:
            jsonschema.validators.validator_for(data, default=jsonschema.Draft7Validator).check_schema(data)
        except jsonschema.exceptions.SchemaError as exc:
            raise errors.invalid_schema(f"{text[:200]}, details: {exc.message}") from None
    canonical = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Parsed("JSON", canonical, {"json": data}, references, normalizer=_normalize)


def _normalize(parsed: Parsed) -> str:
    return json.dumps(parsed.model["json"], separators=(",", ":"), ensure_ascii=False, sort_keys=True)
