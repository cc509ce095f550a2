"""Security state kept in the metadata log, as KRaft keeps it in ``__cluster_metadata``.

Records (JSON dicts in storage/metadata_log.py, applied by the controller through
:meth:`SecurityStore.apply`, at start-up and after each commit alike):

* ``{"type": "scram_credential", "name", "mechanism", "salt", "stored_key", "server_key",
  "iterations"}`` (KRaft: UserScramCredentialRecord; base64 bytes);
* ``{"type": "remove_scram_credential", "name", "mechanism"}`` (RemoveUserScramCredentialRecord);
* ``{"type": "acl", "id", "resource_type", "resource_name", "pattern_type", "principal", "host",
  "operation", "permission_type"}`` (AccessControlEntryRecord, keyed by a uuid);
* ``{"type": "remove_acl", "id"}`` (RemoveAccessControlEntryRecord);
* delegation tokens: see broker/security/tokens.py (``SecurityStore.tokens``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # scram (hashlib, hmac) loads with the first credential, not with every broker
    from .scram import ScramCredential

RECORD_TYPES = ("scram_credential", "remove_scram_credential", "acl", "remove_acl")


class SecurityStore:
    def __init__(self, commit: Callable[[dict], None], config=None) -> None:
        self._commit = commit
        self.scram_credentials: "dict[tuple[str, str], ScramCredential]" = {}
        self.acls: dict[str, dict] = {}  # id -> acl binding (the record without "type")
        self.listeners: list[Callable[[], None]] = []  # e.g. the authorizer rebuilding its index

        from .tokens import DelegationTokens  # delegation tokens (KIP-48), issue 20

        self.tokens = (DelegationTokens.from_config(commit, config) if config is not None
                       else DelegationTokens(commit))

    def apply(self, record: dict) -> bool:
        kind = record.get("type")
        if kind not in RECORD_TYPES:
            return self.tokens.apply(record)
        if kind == "scram_credential":
            from .scram import ScramCredential

            self.scram_credentials[(record["name"], record["mechanism"])] = ScramCredential.from_record(record)
        elif kind == "remove_scram_credential":
            self.scram_credentials.pop((record["name"], record["mechanism"]), None)
        elif kind == "acl":
            self.acls[record["id"]] = {k: v for k, v in record.items() if k != "type"}
        else:
            self.acls.pop(record["id"], None)
        if kind in ("acl", "remove_acl"):
            for notify in self.listeners:
                notify()
        return True

    # -- changes (each durable before it is visible) ----------------------------------------

    def upsert_scram(self, name: str, mechanism: str, credential: "ScramCredential") -> None:
        self._commit({"type": "scram_credential", "name": name, "mechanism": mechanism,
                      **credential.to_record()})

    def remove_scram(self, name: str, mechanism: str) -> None:
        self._commit({"type": "remove_scram_credential", "name": name, "mechanism": mechanism})

    def add_acl(self, acl_id: str, binding: dict) -> None:
        self._commit({"type": "acl", "id": acl_id, **binding})

    def remove_acl(self, acl_id: str) -> None:
        self._commit({"type": "remove_acl", "id": acl_id})
