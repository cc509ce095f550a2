"""The records of the ``_schemas`` topic: key and value JSON as Confluent's registry writes them.

Keys (compact JSON, fields in this order, so that compaction sees equal bytes for equal keys):

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``: value ``{"subject","version","id",
  "schemaType" (absent for AVRO),"references","metadata","ruleSet","schema","deleted"}``; a null
  value (tombstone) is a permanently deleted version.
* ``{"keytype":"CONFIG","subject":S or null,"magic":0}``: value ``{"compatibilityLevel", "normalize",
  "alias", "validateFields", "compatibilityGroup", "defaultMetadata", "overrideMetadata",
  "defaultRuleSet", "overrideRuleSet"}`` (only the keys set); null: the config was deleted.
* ``{"keytype":"MODE","subject":S or null,"magic":0}``: value ``{"mode": ...}``; null: deleted.
* ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``: value ``{"subject","version"}``: every
  version up to ``version`` is soft deleted.
* ``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}``: value ``{"subject"}``: the subject was
  permanently deleted (its versions are tombstoned too).
* ``{"keytype":"NOOP","magic":0}``: written by Confluent to find the end of the log; ignored.

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)

_COMPACT = (",", ":")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=_COMPACT, ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def clear_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": CLEAR_SUBJECT, "subject": subject, "magic": 0})


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list, metadata: dict | None, rule_set: dict | None, deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    if metadata is not None:
        value["metadata"] = metadata
    if rule_set is not None:
        value["ruleSet"] = rule_set
    value["schema"] = schema
    value["deleted"] = deleted
    return _dumps(value)


def config_value(config: dict) -> bytes:
    return _dumps(config)


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


def clear_subject_value(subject: str) -> bytes:
    return _dumps({"subject": subject})


def decode(key: bytes | None, value: bytes | None) -> tuple[dict, dict | None] | None:
    """(key, value or None) of one record; None for records this registry does not know (skipped)."""
    if key is None:
        return None
    try:
        k = json.loads(bytes(key))
        v = None if value is None else json.loads(bytes(value))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(k, dict) or k.get("keytype") not in KEY_TYPES:
        return None
    if v is not None and not isinstance(v, dict):
        return None
    return k, v
