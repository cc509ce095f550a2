"""Compatibility levels as Confluent defines them, and the check a registration runs.

``BACKWARD``: the new schema reads data written with the latest registered one; ``FORWARD``: the
latest reads data written with the new one; ``FULL``: both.  The ``_TRANSITIVE`` levels check
against every live (not soft-deleted) version instead of the latest only.  ``NONE`` checks
nothing.  The rules per schema type are tables in ``avro``, ``json_schema`` and ``protobuf`` of
this package, each with ``check(reader, writer) -> list[Incompatibility]``.
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


@dataclass(frozen=True)
class Incompatibility:
    error_type: str
    description: str
    additional_info: str = ""

    def message(self) -> str:
        return (f"{{errorType:'{self.error_type}', description:'{self.description}', "
                f"additionalInfo:'{self.additional_info}'}}")


def _module(schema_type: str):
    if schema_type == "AVRO":
        from . import avro as mod
    elif schema_type == "JSON":
        from . import json_schema as mod
    else:
        from . import protobuf as mod
    return mod


def check_pair(reader, writer) -> list[Incompatibility]:
    """Can ``reader`` read what ``writer`` wrote?  Both ``formats.Parsed`` of one type."""
    if reader.schema_type != writer.schema_type:
        return [Incompatibility("TYPE_MISMATCH",
                                f"Incompatible because of different schema type: {writer.schema_type} and "
                                f"{reader.schema_type}")]
    return _module(reader.schema_type).check(reader, writer)


def check(level: str, new, previous: list[tuple[int, object]]) -> list[str]:
    """Messages (Confluent's verbose strings) for ``new`` against ``previous`` [(version, Parsed)],
    oldest first; empty when compatible."""
    level = level.upper()
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.replace("_TRANSITIVE", "")
    messages: list[str] = []
    for version, old in reversed(against):
        found: list[Incompatibility] = []
        if base in ("BACKWARD", "FULL"):
            found += check_pair(new, old)
        if base in ("FORWARD", "FULL"):
            found += check_pair(old, new)
        if found:
            messages += [f.message() for f in found]
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{old.canonical}'}}")
            messages.append(f"{{compatibility: '{level}'}}")
            break
    return messages
