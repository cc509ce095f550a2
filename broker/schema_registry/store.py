"""The registry's state, a fold over the records of ``_schemas``, and the operations that change it.

``RegistryState.apply(key, value)`` is the one path for records: start-up replays the topic
through it, and every change the registry makes is appended to the topic first and then read back
through it (``Registry.catch_up``), so what a caller was answered is what a restart rebuilds.
Records written by another writer (a Confluent registry pointed at the same topic) are read the
same way before each request.

``Registry`` holds the operations of the REST API (``register``, ``lookup``, deletes, config,
mode, compatibility checks) as plain synchronous methods on the broker's loop: there is no await
between a check and its append, so the registry is its own single writer.  Errors are
``errors.RegistryError`` with Confluent's codes.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol

from . import errors, records

if TYPE_CHECKING:  # parsing and compatibility are imported when the first schema arrives
    from . import formats

log = logging.getLogger("minikafka.schema_registry")

DEFAULT_COMPATIBILITY = "BACKWARD"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
INT_MAX = 2 ** 31 - 1
CONFIG_FIELDS = ("alias", "normalize", "validateFields", "validateRules", "compatibilityGroup", "defaultMetadata",
                 "overrideMetadata", "defaultRuleSet", "overrideRuleSet")


class Version:
    """One version of a subject (a plain class: a dataclass costs milliseconds at import)."""

    __slots__ = ("subject", "version", "schema_id", "schema_type", "schema", "references", "metadata", "rule_set",
                 "deleted")

    def __init__(self, subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list | None = None, metadata: dict | None = None, rule_set: dict | None = None,
                 deleted: bool = False) -> None:
        self.subject, self.version, self.schema_id = subject, version, schema_id
        self.schema_type, self.schema = schema_type, schema
        self.references = references if references is not None else []
        self.metadata, self.rule_set, self.deleted = metadata, rule_set, deleted

    def __repr__(self) -> str:
        return f"Version({self.subject!r}, {self.version}, id={self.schema_id}, deleted={self.deleted})"

    @property
    def content_key(self) -> tuple:
        return content_key(self.schema_type, self.schema, self.references)


def content_key(schema_type: str, schema: str, references: list) -> tuple:
    refs = tuple((r.get("name"), r.get("subject"), r.get("version")) for r in references or ())
    return schema_type, schema, refs


def guid_of(key: tuple) -> str:
    """A stable GUID for a schema's content (the same on every restart), shaped as a UUID."""
    import hashlib  # not at import: the registry's start should not pay for it

    h = hashlib.sha1(json.dumps(key).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"


class RegistryState:
    """Subjects, versions, ids, config and mode, as the records of ``_schemas`` leave them."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.ids: dict[int, dict[tuple[str, int], Version]] = {}  # id -> the versions carrying it
        self.id_of_content: dict[tuple, int] = {}
        self.max_id = 0
        self.configs: dict[str | None, dict] = {}
        self.modes: dict[str | None, str] = {}

    def apply(self, key: dict, value: dict | None) -> None:
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == records.SCHEMA:
            self._apply_schema(subject, key.get("version"), value)
        elif kind == records.CONFIG:
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = {k: v for k, v in value.items() if v is not None and k != "subject"}
        elif kind == records.MODE:
            if value is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = value.get("mode", "READWRITE")
        elif kind == records.DELETE_SUBJECT and value is not None:
            upto = value.get("version", INT_MAX)
            for v in self.subjects.get(subject, {}).values():
                if v.version <= upto:
                    v.deleted = True
        elif kind == records.CLEAR_SUBJECT and value is not None:
            for v in list(self.subjects.get(subject, {}).values()):
                if v.deleted:
                    self._apply_schema(subject, v.version, None)

    def _apply_schema(self, subject: str, version: int, value: dict | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        old = versions.pop(version, None)
        if old is not None:
            carriers = self.ids.get(old.schema_id, {})
            carriers.pop((subject, version), None)
            if not carriers:
                self.ids.pop(old.schema_id, None)
                self.id_of_content.pop(old.content_key, None)
        if value is None:
            if not versions:
                del self.subjects[subject]
            return
        v = Version(subject, version, int(value["id"]), value.get("schemaType") or "AVRO", value.get("schema", ""),
                    list(value.get("references") or []), value.get("metadata"), value.get("ruleSet"),
                    bool(value.get("deleted", False)))
        versions[version] = v
        self.ids.setdefault(v.schema_id, {})[(subject, version)] = v
        self.id_of_content.setdefault(v.content_key, v.schema_id)
        self.max_id = max(self.max_id, v.schema_id)

    # -- reading ------------------------------------------------------------------------------

    def live_versions(self, subject: str) -> list[Version]:
        return [v for _, v in sorted(self.subjects.get(subject, {}).items()) if not v.deleted]

    def all_versions(self, subject: str) -> list[Version]:
        return [v for _, v in sorted(self.subjects.get(subject, {}).items())]

    def any_version_of(self, schema_id: int) -> Version | None:
        carriers = self.ids.get(schema_id)
        if not carriers:
            return None
        return min(carriers.values(), key=lambda v: (v.deleted, v.subject, v.version))


class SchemasLog(Protocol):
    """What the registry needs from the ``_schemas`` topic (broker/schema_registry/topic.py)."""

    def append(self, entries: list[tuple[bytes, bytes | None]]) -> int:
        """Append records durably (as a produce is); returns the offset after them."""

    def read(self, from_offset: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record at ``from_offset`` or later."""

    def end_offset(self) -> int:
        ...


class MemorySchemasLog:
    """An in-memory topic, for unit tests (keep it and build a new Registry to simulate a restart)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes | None, bytes | None]] = []
        self.fail_with: Exception | None = None

    def append(self, entries):
        if self.fail_with is not None:
            raise self.fail_with
        for key, value in entries:
            self.entries.append((len(self.entries), key, value))
        return len(self.entries)

    def read(self, from_offset: int):
        return iter(self.entries[from_offset:])

    def end_offset(self) -> int:
        return len(self.entries)


def _parse_version(text: Any, allow_latest: bool = True) -> int:
    """A version path segment: 1..2^31-1, or ``latest``/-1 (returned as -1)."""
    if isinstance(text, str) and text.lower() == "latest" and allow_latest:
        return -1
    try:
        number = int(text)
    except (TypeError, ValueError):
        raise errors.invalid_version(text) from None
    if number == -1 and allow_latest:
        return -1
    if not 1 <= number <= INT_MAX:
        raise errors.invalid_version(text)
    return number


class Registry:
    """The operations of the REST API over a ``RegistryState`` and the ``_schemas`` log."""

    def __init__(self, log_: SchemasLog, *, metrics: Any = None) -> None:
        self.log = log_
        self.state = RegistryState()
        self.offset = 0
        self._parsed: dict = {}  # content key -> formats.Parsed
        self.metrics = metrics
        self.catch_up()

    # -- the log ------------------------------------------------------------------------------

    def catch_up(self) -> None:
        """Apply every record not applied yet (ours and any other writer's)."""
        end = self.log.end_offset()
        if end < self.offset:
            # The topic was deleted (and maybe created again): what it holds now is the truth.
            log.warning("_schemas ends at %d, before the %d records applied: replaying it from the start",
                        end, self.offset)
            self.state = RegistryState()
            self.offset = 0
            self._parsed.clear()
        if end <= self.offset:
            return
        for offset, key, value in self.log.read(self.offset):
            decoded = records.decode(key, value)
            if decoded is not None:
                try:
                    self.state.apply(*decoded)
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("_schemas offset %d: record skipped (%s)", offset, exc)
            self.offset = offset + 1
        self.offset = max(self.offset, end)

    def _write(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        try:
            self.log.append(entries)
        except errors.RegistryError:
            raise
        except Exception as exc:
            log.error("appending to _schemas failed: %r", exc)
            raise errors.store_error(str(exc)) from exc
        self.catch_up()

    # -- parsing ------------------------------------------------------------------------------

    def _resolve_references(self, references: list, depth: int = 0) -> "dict[str, formats.Parsed]":
        if depth > 32:
            raise errors.invalid_schema("references nest too deeply")
        out = {}
        for ref in references or ():
            if not isinstance(ref, dict) or not {"name", "subject", "version"} <= ref.keys():
                raise errors.invalid_schema(f"bad reference {ref!r}")
            versions = self.state.subjects.get(ref["subject"], {})
            version = ref["version"]
            if version == -1:
                live = [v for v in versions.values() if not v.deleted]
                target = max(live, key=lambda v: v.version) if live else None
            else:
                target = versions.get(version)
            if target is None:
                raise errors.invalid_schema(f"reference {ref['name']} to subject {ref['subject']} version "
                                            f"{version} not found")
            out[ref["name"]] = self._parse_version(target, depth + 1)
        return out

    def _parse_version(self, v: Version, depth: int = 0) -> "formats.Parsed":
        from . import formats

        key = v.content_key
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = formats.parse(v.schema_type, v.schema, self._resolve_references(v.references, depth))
            self._parsed[key] = parsed
        return parsed

    def parse_request(self, body: Any) -> "tuple[str, formats.Parsed, list, dict | None, dict | None]":
        from . import formats

        if not isinstance(body, dict):
            raise errors.invalid_request("the body must be a JSON object")
        schema_type = body.get("schemaType") or "AVRO"
        schema_type = str(schema_type).upper()
        if schema_type not in formats.SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schema type {schema_type}")
        text = body.get("schema")
        if text is None:
            raise errors.invalid_schema("Empty schema")
        references = body.get("references") or []
        parsed = formats.parse(schema_type, text, self._resolve_references(references))
        return schema_type, parsed, references, body.get("metadata"), body.get("ruleSet")

    # -- config and mode ----------------------------------------------------------------------

    def compatibility_of(self, subject: str | None) -> str:
        for key in (subject, None):
            level = self.state.configs.get(key, {}).get("compatibilityLevel")
            if level:
                return level
        return DEFAULT_COMPATIBILITY

    def normalize_of(self, subject: str | None) -> bool:
        for key in (subject, None):
            value = self.state.configs.get(key, {}).get("normalize")
            if value is not None:
                return bool(value)
        return False

    def mode_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        self.catch_up()
        if subject is None:
            config = dict(self.state.configs.get(None, {}))
            config.setdefault("compatibilityLevel", DEFAULT_COMPATIBILITY)
            return config
        if subject in self.state.configs:
            return dict(self.state.configs[subject])
        if default_to_global:
            return self.get_config(None)
        raise errors.subject_config_not_found(subject)

    def set_config(self, subject: str | None, body: Any) -> dict:
        self.catch_up()
        if not isinstance(body, dict):
            raise errors.invalid_request("the body must be a JSON object")
        config = dict(self.state.configs.get(subject, {}))
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None:
            from .compat import LEVELS

            if str(level).upper() not in LEVELS:
                raise errors.invalid_compatibility_level(level)
            config["compatibilityLevel"] = str(level).upper()
        for name in CONFIG_FIELDS:
            if name in body and body[name] is not None:
                config[name] = body[name]
        self._check_writable(subject, config_change=True)
        self._write([(records.config_key(subject), records.config_value(config))])
        answer = {k: v for k, v in config.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in config:
            answer = {"compatibility": config["compatibilityLevel"], **answer}
        return answer

    def delete_config(self, subject: str | None) -> dict:
        self.catch_up()
        if subject is not None and subject not in self.state.configs:
            raise errors.subject_config_not_found(subject)
        previous = self.get_config(subject)
        self._write([(records.config_key(subject), None)])
        return previous

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict:
        self.catch_up()
        if subject is None:
            return {"mode": self.state.modes.get(None, "READWRITE")}
        if subject in self.state.modes:
            return {"mode": self.state.modes[subject]}
        if default_to_global:
            return {"mode": self.state.modes.get(None, "READWRITE")}
        raise errors.subject_mode_not_found(subject)

    def set_mode(self, subject: str | None, body: Any, force: bool = False) -> dict:
        self.catch_up()
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            if subject is None and any(self.state.live_versions(s) for s in self.state.subjects):
                raise errors.operation_not_permitted("Cannot import since found existing subjects")
            if subject is not None and self.state.live_versions(subject):
                raise errors.operation_not_permitted(f"Cannot import since found existing subjects for {subject}")
        self._write([(records.mode_key(subject), records.mode_value(mode))])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict:
        self.catch_up()
        if subject not in self.state.modes:
            raise errors.subject_mode_not_found(subject)
        previous = {"mode": self.state.modes[subject]}
        self._write([(records.mode_key(subject), None)])
        return previous

    def _check_writable(self, subject: str | None, config_change: bool = False) -> None:
        mode = self.mode_of(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE") and not config_change:
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    # -- subjects and versions ----------------------------------------------------------------

    def subjects(self, deleted: bool = False, deleted_only: bool = False, prefix: str = "") -> list[str]:
        self.catch_up()
        out = []
        for subject in sorted(self.state.subjects):
            if prefix and not subject.startswith(prefix):
                continue
            versions = self.state.subjects[subject].values()
            live = any(not v.deleted for v in versions)
            if deleted_only:
                if any(v.deleted for v in versions) and not live:
                    out.append(subject)
            elif live or deleted:
                out.append(subject)
        return out

    def aliased(self, subject: str) -> str:
        """The subject reads go to: a subject's ``alias`` config names another subject (one hop, as
        Confluent), e.g. ``orders-value`` -> ``shared-order``, so that clients using TopicNameStrategy
        read a schema kept under another name."""
        alias = self.state.configs.get(subject, {}).get("alias")
        return alias if isinstance(alias, str) and alias else subject

    def versions(self, subject: str, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        self.catch_up()
        subject = self.aliased(subject)
        versions = self.state.all_versions(subject)
        if not versions or (not deleted and not deleted_only and not any(not v.deleted for v in versions)):
            raise errors.subject_not_found(subject)
        if deleted_only:
            return [v.version for v in versions if v.deleted]
        return [v.version for v in versions if deleted or not v.deleted]

    def find_version(self, subject: str, version_text: Any, deleted: bool = False) -> Version:
        self.catch_up()
        subject = self.aliased(subject)
        number = _parse_version(version_text)
        versions = self.state.subjects.get(subject)
        if not versions:
            raise errors.subject_not_found(subject)
        if number == -1:
            candidates = [v for v in versions.values() if deleted or not v.deleted]
            if not candidates:
                raise errors.subject_not_found(subject)
            return max(candidates, key=lambda v: v.version)
        v = versions.get(number)
        if v is None or (v.deleted and not deleted):
            raise errors.version_not_found(number)
        return v

    def version_json(self, v: Version, fmt: str | None = None) -> dict:
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id,
                               "guid": guid_of(v.content_key)}
        if v.schema_type != "AVRO":
            out["schemaType"] = v.schema_type
        if v.references:
            out["references"] = v.references
        if v.metadata is not None:
            out["metadata"] = v.metadata
        if v.rule_set is not None:
            out["ruleSet"] = v.rule_set
        out["schema"] = self.formatted(v, fmt)
        return out

    def formatted(self, v: Version, fmt: str | None) -> str:
        if v.schema_type == "PROTOBUF":
            from .formats import protobuf

            parsed = self._parse_version(v)
            if fmt == "serialized":
                return protobuf.serialized(parsed)
            return protobuf.text(parsed)
        return v.schema

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> dict:
        self.catch_up()
        v = self.state.any_version_of(schema_id)
        if v is None:
            raise errors.schema_not_found(schema_id)
        out: dict[str, Any] = {}
        if v.schema_type != "AVRO":
            out["schemaType"] = v.schema_type
        out["schema"] = self.formatted(v, fmt)
        if v.references:
            out["references"] = v.references
        if v.metadata is not None:
            out["metadata"] = v.metadata
        if v.rule_set is not None:
            out["ruleSet"] = v.rule_set
        out["guid"] = guid_of(v.content_key)
        return out

    def schema_by_guid(self, guid: str, fmt: str | None = None) -> dict:
        self.catch_up()
        for schema_id, carriers in self.state.ids.items():
            v = next(iter(carriers.values()))
            if guid_of(v.content_key) == guid:
                out = self.schema_by_id(schema_id, fmt)
                out["id"] = schema_id
                return out
        raise errors.schema_not_found()

    def id_versions(self, schema_id: int, deleted: bool = False, subject: str | None = None) -> list[dict]:
        self.catch_up()
        carriers = self.state.ids.get(schema_id)
        if not carriers:
            raise errors.schema_not_found(schema_id)
        return [{"subject": v.subject, "version": v.version}
                for (_s, _n), v in sorted(carriers.items())
                if (deleted or not v.deleted) and (subject is None or v.subject == subject)]

    def id_subjects(self, schema_id: int, deleted: bool = False, subject: str | None = None) -> list[str]:
        return sorted({e["subject"] for e in self.id_versions(schema_id, deleted, subject)})

    def referenced_by(self, subject: str, version_text: Any) -> list[int]:
        v = self.find_version(subject, version_text, deleted=True)
        return self._referrers(subject, v.version)

    def _referrers(self, subject: str, version: int, live_only: bool = True) -> list[int]:
        out = set()
        for versions in self.state.subjects.values():
            for other in versions.values():
                if live_only and other.deleted:
                    continue
                for ref in other.references:
                    if ref.get("subject") == subject and ref.get("version") == version:
                        out.add(other.schema_id)
        return sorted(out)

    def latest_with_metadata(self, subject: str, wanted: dict[str, str], deleted: bool = False) -> Version:
        self.catch_up()
        subject = self.aliased(subject)
        candidates = [v for v in self.state.all_versions(subject) if deleted or not v.deleted]
        if not candidates:
            raise errors.subject_not_found(subject)
        for v in reversed(candidates):
            props = (v.metadata or {}).get("properties") or {}
            if all(props.get(k) == val for k, val in wanted.items()):
                return v
        raise errors.version_not_found("with the given metadata")

    # -- register and look up -----------------------------------------------------------------

    def _stored_form(self, parsed: "formats.Parsed", normalize: bool) -> str:
        return parsed.normalized() if normalize else parsed.canonical

    def _match_in_subject(self, subject: str, schema_type: str, parsed: "formats.Parsed", references: list,
                          normalize: bool, deleted: bool) -> Version | None:
        wanted = content_key(schema_type, self._stored_form(parsed, normalize), references)
        candidates = [v for v in self.state.all_versions(subject) if deleted or not v.deleted]
        for v in reversed(candidates):
            if v.content_key == wanted:
                return v
        for v in reversed(candidates):  # the same schema written another way
            if v.schema_type != schema_type or content_key(v.schema_type, "", v.references)[2] != wanted[2]:
                continue
            try:
                other = self._parse_version(v)
            except errors.RegistryError:
                continue
            if other.normalized() == parsed.normalized():
                return v
        return None

    def lookup(self, subject: str, body: Any, normalize: bool = False, deleted: bool = False) -> dict:
        self.catch_up()
        subject = self.aliased(subject)
        if not self.state.subjects.get(subject) or (
                not deleted and not self.state.live_versions(subject)):
            raise errors.subject_not_found(subject)
        schema_type, parsed, references, _m, _r = self.parse_request(body)
        normalize = normalize or self.normalize_of(subject)
        v = self._match_in_subject(subject, schema_type, parsed, references, normalize, deleted)
        if v is None:
            raise errors.schema_not_found()
        return self.version_json(v)

    def register(self, subject: str, body: Any, normalize: bool = False) -> dict:
        self.catch_up()
        mode = self.mode_of(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        schema_type, parsed, references, metadata, rule_set = self.parse_request(body)
        normalize = normalize or self.normalize_of(subject)
        stored = self._stored_form(parsed, normalize)
        key = content_key(schema_type, stored, references)
        requested_id = body.get("id") if isinstance(body, dict) else None
        requested_version = body.get("version") if isinstance(body, dict) else None
        if requested_id is not None and (not isinstance(requested_id, int) or requested_id < 1):
            raise errors.invalid_request(f"id {requested_id!r} is not a positive integer")
        existing = self._match_in_subject(subject, schema_type, parsed, references, normalize, deleted=False)
        if existing is not None and (metadata is None or metadata == existing.metadata) and (
                rule_set is None or rule_set == existing.rule_set) and (
                requested_id is None or requested_id == existing.schema_id):
            if self.metrics is not None:
                self.metrics.count("register_existing")
            return self.version_json(existing)
        if mode == "IMPORT":
            if requested_id is None:
                raise errors.operation_not_permitted(f"Subject {subject} is in import mode: the request needs an id")
            owner = self.state.any_version_of(requested_id)
            if owner is not None and owner.content_key != key:
                raise errors.id_conflict(requested_id)
            schema_id = requested_id
        else:
            if requested_id is not None and requested_id != self.state.id_of_content.get(key):
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            from . import compat

            level = self.compatibility_of(subject)
            previous = [(v.version, self._parse_version(v)) for v in self._compared(subject, metadata)]
            messages = compat.check(level, parsed, previous)
            if messages:
                if self.metrics is not None:
                    self.metrics.count("register_incompatible")
                raise errors.incompatible(subject, messages)
            schema_id = self.state.id_of_content.get(key) or self.state.max_id + 1
        all_versions = self.state.subjects.get(subject, {})
        if requested_version is not None and mode == "IMPORT":
            version = _parse_version(requested_version, allow_latest=False)
            if version in all_versions:
                raise errors.operation_not_permitted(f"Subject {subject} version {version} already exists")
        else:
            version = max(all_versions, default=0) + 1
        self._write([(records.schema_key(subject, version),
                      records.schema_value(subject, version, schema_id, schema_type, stored, references, metadata,
                                           rule_set, False))])
        self._parsed.setdefault(key, parsed)
        if self.metrics is not None:
            self.metrics.count("register_new")
        return self.version_json(self.state.subjects[subject][version])

    # -- compatibility ------------------------------------------------------------------------

    def _compared(self, subject: str, metadata: dict | None) -> list[Version]:
        """The live versions a new schema is checked against: with a ``compatibilityGroup`` config
        (a metadata property name), only those whose property has the new schema's value."""
        group = None
        for key in (subject, None):
            group = self.state.configs.get(key, {}).get("compatibilityGroup")
            if group:
                break
        live = self.state.live_versions(subject)
        if not group:
            return live
        wanted = ((metadata or {}).get("properties") or {}).get(group)
        return [v for v in live if ((v.metadata or {}).get("properties") or {}).get(group) == wanted]

    def check_compatibility(self, subject: str, version_text: Any | None, body: Any, normalize: bool = False,
                            verbose: bool = False) -> dict:
        self.catch_up()
        schema_type, parsed, references, metadata, _r = self.parse_request(body)
        level = self.compatibility_of(subject)
        if version_text is None:
            previous = [(v.version, self._parse_version(v)) for v in self._compared(subject, metadata)]
        else:
            if not self.state.live_versions(subject):
                if str(version_text).lower() == "latest":
                    return {"is_compatible": True, **({"messages": []} if verbose else {})}
                raise errors.subject_not_found(subject)
            v = self.find_version(subject, version_text)
            previous = [(v.version, self._parse_version(v))]
            level = level.replace("_TRANSITIVE", "")
        from . import compat

        messages = compat.check(level, parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    # -- deletes ------------------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        self.catch_up()
        versions = self.state.all_versions(subject)
        if not versions:
            raise errors.subject_not_found(subject)
        self._check_writable(subject)
        live = [v for v in versions if not v.deleted]
        for v in live if not permanent else versions:
            if self._referrers(subject, v.version):
                raise errors.reference_exists(f"{subject} version {v.version}")
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            entries: list[tuple[bytes, bytes | None]] = [(records.schema_key(subject, v.version), None)
                                                         for v in versions]
            if subject in self.state.configs:
                entries.append((records.config_key(subject), None))
            if subject in self.state.modes:
                entries.append((records.mode_key(subject), None))
            self._write(entries)
            return [v.version for v in versions]
        if not live:
            raise errors.subject_soft_deleted(subject)
        self._write([(records.delete_subject_key(subject),
                      records.delete_subject_value(subject, live[-1].version))])
        return [v.version for v in live]

    def delete_version(self, subject: str, version_text: Any, permanent: bool = False) -> int:
        self.catch_up()
        number = _parse_version(version_text)
        if not self.state.subjects.get(subject):
            raise errors.subject_not_found(subject)
        self._check_writable(subject)
        if number == -1:
            live = self.state.live_versions(subject)
            if not live:
                raise errors.subject_not_found(subject)
            v = live[-1]
        else:
            v = self.state.subjects[subject].get(number)
            if v is None:
                raise errors.version_not_found(number)
        if self._referrers(subject, v.version):
            raise errors.reference_exists(f"{subject} version {v.version}")
        if permanent:
            if not v.deleted:
                raise errors.version_not_soft_deleted(subject, v.version)
            self._write([(records.schema_key(subject, v.version), None)])
            return v.version
        if v.deleted:
            raise errors.version_soft_deleted(subject, v.version)
        self._write([(records.schema_key(subject, v.version),
                      records.schema_value(subject, v.version, v.schema_id, v.schema_type, v.schema, v.references,
                                           v.metadata, v.rule_set, True))])
        return v.version

    # -- listing ------------------------------------------------------------------------------

    def schemas(self, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[dict]:
        self.catch_up()
        out = []
        for subject in sorted(self.state.subjects):
            if prefix and not subject.startswith(prefix):
                continue
            versions = [v for v in self.state.all_versions(subject) if deleted or not v.deleted]
            if latest_only:
                versions = versions[-1:]
            out += [self.version_json(v) for v in versions]
        return out


def page(items: list, offset: Any, limit: Any) -> list:
    """Confluent's offset/limit paging (limit -1 or absent: everything)."""
    try:
        start = max(int(offset or 0), 0)
        count = int(limit) if limit not in (None, "") else -1
    except (TypeError, ValueError):
        return items
    return items[start:] if count < 0 else items[start:start + count]


def replay_entries(entries: Iterable[tuple[bytes | None, bytes | None]]) -> RegistryState:
    """A state from raw (key, value) records (tests, tools)."""
    state = RegistryState()
    for key, value in entries:
        decoded = records.decode(key, value)
        if decoded is not None:
            state.apply(*decoded)
    return state
