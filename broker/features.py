"""Feature flags (KIP-584) as a single-node KRaft Kafka 4.0 reports them, and what we support.

ApiVersions v3+ carries ``supported_features`` (what this broker can run) and
``finalized_features`` (what the cluster runs, with an epoch); Java's ``Admin.describeFeatures``
reads them, and Java 4.x producers read ``transaction.version`` from them: at 2 (the default, as
Kafka 4.2 finalizes it) they use "transactions V2" (KIP-890 part 2: Produce 12 adds partitions,
TxnOffsetCommit 5, EndTxn 5 bumps the epoch), served by broker/txn; UpdateFeatures may lower it to
1 (Produce 12 is then v11) or 0.  ``group.version`` 1 means the KIP-848 consumer protocol; it is supported
only when ConsumerGroupHeartbeat (68) is registered.  ``share.version`` 1 (the default, as Kafka 4.2
finalizes it) enables share groups (KIP-932); at 0 ShareGroupHeartbeat/Describe answer UNSUPPORTED_VERSION.
``streams.version`` 1 (KIP-1071 streams groups, on by default as in Kafka 4.2) only when
StreamsGroupHeartbeat (88) is registered.  ``metadata.version`` is 29, the level a new Kafka 4.2.2
cluster finalizes (the APIs served are Kafka 4.2's); it cannot be downgraded (Kafka refuses unsafe
metadata downgrades).
``kraft.version`` stays 0: the quorum is this node, a static voter.

Levels changed by UpdateFeatures are records in the metadata log (``feature_level``) and so
survive restarts; a feature never changed runs at its default level.
"""

from __future__ import annotations

from minikafka.protocol.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
ELR_VERSION = "eligible.leader.replicas.version"

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
INVALID_UPDATE_VERSION = ErrorCode.INVALID_UPDATE_VERSION
INVALID_REQUEST = ErrorCode.INVALID_REQUEST

# feature -> (min supported, max supported, default finalized level)
_FEATURES = {
    METADATA_VERSION: (7, 29, 29),
    KRAFT_VERSION: (0, 0, 0),
    TRANSACTION_VERSION: (0, 2, 2),  # 2: transactions V2 (KIP-890 part 2), Kafka 4.2's default
    # 1: eligible leader replicas (KIP-966), on in a new Kafka 4.1+ cluster; with it the cluster
    # default holds min.insync.replicas (broker/configs.py ensure_cluster_min_insync_replicas).
    ELR_VERSION: (0, 1, 1),
}


def supported(broker) -> dict[str, tuple[int, int, int]]:
    features = dict(_FEATURES)
    registry = getattr(broker, "registry", None)
    consumer_groups = registry is not None and 68 in registry
    features[GROUP_VERSION] = (0, 1, 1) if consumer_groups else (0, 0, 0)
    # share.version 1: share groups (KIP-932), finalized by default as in Kafka 4.2.
    features[SHARE_VERSION] = (0, 1, 1) if registry is not None and 76 in registry else (0, 0, 0)
    # KIP-1071 streams groups (broker/streams): 1 is finalized on a new cluster, as Kafka 4.2 does;
    # UpdateFeatures can set it to 0 (StreamsGroupHeartbeat/Describe then answer UNSUPPORTED_VERSION).
    streams_groups = registry is not None and 88 in registry
    features[STREAMS_VERSION] = (0, 1, 1) if streams_groups else (0, 0, 0)
    return features


def finalized(broker) -> dict[str, int]:
    """Levels in force: the defaults, overridden by UpdateFeatures records; 0 means off."""
    stored = getattr(broker.controller, "finalized_features", {}) or {}
    out = {}
    for name, (_, _, default) in supported(broker).items():
        level = stored.get(name, default)
        if level > 0:
            out[name] = level
    return out


def level(broker, name: str) -> int:
    """The finalized level of one feature (0: off), without building the whole table: the produce
    path asks for ``transaction.version`` on every transactional batch."""
    if name in (GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION):
        return finalized(broker).get(name, 0)  # depends on the registry: the full rule
    stored = getattr(broker.controller, "finalized_features", {}) or {}
    default = _FEATURES[name][2] if name in _FEATURES else 0
    return max(stored.get(name, default), 0)


def epoch(broker) -> int:
    return int(getattr(broker.controller, "metadata_records", 0))


def api_versions_fields(broker, api_version: int = 4) -> dict:
    """The tagged feature fields of ApiVersionsResponse v3+.  Before v4 a supported feature whose
    minimum is 0 is left out (KIP-1022: older clients read a 0 minimum as "not supported"), as
    Kafka 4.2 answers v3."""
    return {
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi, _) in sorted(supported(broker).items())
                               if lo > 0 or api_version >= 4],
        "finalized_features_epoch": epoch(broker),
        "finalized_features": [{"name": n, "max_version_level": level, "min_version_level": level}
                               for n, level in sorted(finalized(broker).items())],
    }


def check_update(broker, name: str, level: int, upgrade_type: int) -> str | None:
    """Why this update is refused (INVALID_UPDATE_VERSION), or None when it is allowed."""
    features = supported(broker)
    if name not in features:
        return f"Invalid update version {level} for feature {name}. The controller does not support the given feature."
    lo, hi, default = features[name]
    current = finalized(broker).get(name, 0)
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"Invalid upgrade type {upgrade_type} for feature {name}."
    if level != 0 and not lo <= level <= hi:
        return (f"Invalid update version {level} for feature {name}. The controller only supports "
                f"versions {lo}-{hi}.")
    if level < current and upgrade_type == UPGRADE:
        return f"Invalid update version {level} for feature {name}. Can't downgrade to a lower version."
    if level > current and upgrade_type != UPGRADE:
        return f"Invalid update version {level} for feature {name}. Can't downgrade to a newer version."
    if name == METADATA_VERSION and level != current:
        return (f"Invalid metadata.version {level}. Refusing to perform the requested downgrade "
                "because it might delete metadata information." if level < current else
                f"Invalid metadata.version {level}. This broker does not run a newer metadata version.")
    return None
