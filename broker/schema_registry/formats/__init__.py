"""Schema formats: parse a schema text (with its references), give its stored form and normal form.

One module per schema type (``avro``, ``json_schema``, ``protobuf``), each with
``parse(text, references) -> Parsed`` where ``references`` maps a reference name to the parsed
schema it names.  ``Parsed.canonical`` is the text stored and compared (whitespace and key order
do not make two schemas differ); ``Parsed.normalized()`` is the stronger form used with
``normalize=true``.  Parse errors raise ``errors.invalid_schema``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


@dataclass
class Parsed:
    schema_type: str
    canonical: str
    model: Any  # the type's own representation, read by compat/<type>.py
    references: dict = field(default_factory=dict)  # name -> Parsed
    _normal: str | None = None
    normalizer: Any = None

    def normalized(self) -> str:
        if self._normal is None:
            self._normal = self.normalizer(self) if self.normalizer is not None else self.canonical
        return self._normal


def parse(schema_type: str, text: str, references: dict[str, Parsed] | None = None) -> Parsed:
    from .. import errors

    references = references or {}
    if not isinstance(text, str):
        raise errors.invalid_schema("schema must be a string")
    if schema_type == "AVRO":
        from . import avro as mod
    elif schema_type == "JSON":
        from . import json_schema as mod
    elif schema_type == "PROTOBUF":
        from . import protobuf as mod
    else:
        raise errors.invalid_schema(f"unknown schema type {schema_type}")
    return mod.parse(text, references)
