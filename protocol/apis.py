"""Which APIs and versions we serve, and the registry ApiVersions is computed from.

``SERVE`` is the "Serve" column of shared/PROTOCOL.md: the versions the codec must decode and
encode.  It includes APIs whose handlers are written later (admin, transactions, "(later)"
rows) so that the codec and its tests cover them now.  APIs marked "don't advertise" or
"internal" there are absent on purpose; WriteTxnMarkers 27 is served (issue 20) for tools and tests
that call it, as Kafka 4.2 advertises it.  Issue 14 raised the table to what a single-node KRaft Kafka 4.0 advertises
(Fetch 17 with topic ids, ListOffsets 10, Metadata 13, DescribeCluster 2, DescribeGroups 6 and
the single-node admin APIs), plus the KIP-714 telemetry pair, whose specs come from
``protocol.specs_kafka4`` because kafka-python does not ship them.  The KIP-848
APIs 68/69 are served (issue 11) and advertised only while the consumer protocol is enabled.

Produce is listed as 0-13: Kafka 4.x advertises v0-2 (librdkafka < 2.11.1 turns compression off
without them, KAFKA-18659) but closes the connection on them (checked against Kafka 4.2); the
codec decodes them (the spec's fields still cover v0-2) so the broker answers earlier requests
first and then closes, as Kafka does.

What ApiVersions advertises is *not* this table: it is whatever handlers registered in an
``ApiRegistry``, so a version is never advertised without a handler behind it.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

__all__ = ["SERVE", "ApiRegistry", "api_versions_error_response", "API_VERSIONS"]

API_VERSIONS = 18

SERVE: dict[int, tuple[int, int]] = {
    0: (0, 13),  # Produce (advertise 0-13; 0-2 close the connection, as Kafka 4.2)
    1: (4, 18),  # Fetch (13+ by topic id)
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 10),  # OffsetCommit (10 by topic id)
    9: (1, 10),  # OffsetFetch (10 by topic id)
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn
    27: (1, 2),  # WriteTxnMarkers (issue 20: for tools and tests, as Kafka 4.2 serves it)
    28: (0, 5),  # TxnOffsetCommit
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (1, 2),  # AlterReplicaLogDirs
    35: (1, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    38: (1, 3),  # CreateDelegationToken (issue 20: delegation tokens, KIP-48)
    39: (1, 2),  # RenewDelegationToken
    40: (1, 2),  # ExpireDelegationToken
    41: (1, 3),  # DescribeDelegationToken
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 1),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    55: (0, 2),  # DescribeQuorum
    57: (0, 2),  # UpdateFeatures
    60: (0, 2),  # DescribeCluster
    61: (0, 0),  # DescribeProducers (later)
    64: (0, 0),  # UnregisterBroker (issue 20)
    65: (0, 0),  # DescribeTransactions (later)
    66: (0, 2),  # ListTransactions
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; advertised unless group.coordinator.rebalance.protocols lacks consumer)
    69: (0, 1),  # ConsumerGroupDescribe (KIP-848)
    71: (0, 0),  # GetTelemetrySubscriptions (advertised only with client telemetry on)
    72: (0, 0),  # PushTelemetry (advertised only with client telemetry on)
    74: (0, 1),  # ListConfigResources (issue 20)
    75: (0, 0),  # DescribeTopicPartitions
    76: (1, 1),  # ShareGroupHeartbeat (KIP-932, issue 21; v0 was Kafka 4.0's early access)
    77: (1, 1),  # ShareGroupDescribe (KIP-932, issue 21)
    78: (1, 2),  # ShareFetch (issue 21, KIP-932; v0 was Kafka 4.0's early access)
    79: (1, 2),  # ShareAcknowledge (issue 21, KIP-932)
    80: (0, 1),  # AddRaftVoter (issue 20, KIP-853)
    81: (0, 0),  # RemoveRaftVoter (issue 20, KIP-853)
    83: (0, 0),  # InitializeShareGroupState (issue 21, KIP-932: the share coordinator)
    84: (0, 0),  # ReadShareGroupState
    85: (0, 1),  # WriteShareGroupState
    86: (0, 0),  # DeleteShareGroupState
    87: (0, 1),  # ReadShareGroupStateSummary
    90: (0, 1),  # DescribeShareGroupOffsets (issue 21)
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}

Handler = Callable[..., Any]


class ApiRegistry:
    """Handlers by API key; the ApiVersions response is computed from the registrations.

    Modelled on franz-go kfake's ``regKey`` and Tansu's ``FrameRouteService``: a version range is
    advertised exactly when a handler registered it, and only inside ``SERVE`` (the codec cannot
    decode anything else)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[int, int, Handler]] = {}

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        served = SERVE.get(api_key)
        if served is None:
            raise ValueError(f"api {api_key} is not in SERVE; the codec cannot decode it")
        if not served[0] <= min_version <= max_version <= served[1]:
            raise ValueError(
                f"api {api_key} range {min_version}-{max_version} is outside the served {served[0]}-{served[1]}"
            )
        if api_key in self._entries:
            raise ValueError(f"api {api_key} is already registered")
        self._entries[api_key] = (min_version, max_version, handler)

    def lookup(self, api_key: int, version: int) -> Handler | None:
        """The handler for (api_key, version), or None when that version is not registered."""
        entry = self._entries.get(api_key)
        if entry is None or not entry[0] <= version <= entry[1]:
            return None
        return entry[2]

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        entry = self._entries.get(api_key)
        return None if entry is None else (entry[0], entry[1])

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._entries

    def api_versions_body(self, error_code: int = 0) -> dict:
        """The ApiVersions response body, ascending by key (the feature fields of v3+ are added
        by the ApiVersions handler from broker.features)."""
        return {
            "error_code": error_code,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, (lo, hi, _) in sorted(self._entries.items())
            ],
            "throttle_time_ms": 0,
        }

    def api_versions_error_response(self, correlation_id: int) -> list:
        """The answer to an ApiVersions request at a version we do not serve (see below)."""
        lo, hi = self.version_range(API_VERSIONS) or SERVE[API_VERSIONS]
        return api_versions_error_response(correlation_id, lo, hi)


_V0_ERROR = struct.Struct(">iihihhh")


def api_versions_error_response(correlation_id: int, min_version: int, max_version: int) -> list:
    """UNSUPPORTED_VERSION (35) on response header v0 with a v0 body listing only ApiVersions'
    own range, as Kafka does: a client that sent a too-new version can read a v0 body whatever
    it speaks, and retries with the highest version in that range."""
    from .errors import ErrorCode

    body = _V0_ERROR.pack(
        _V0_ERROR.size - 4,
        correlation_id,
        int(ErrorCode.UNSUPPORTED_VERSION),
        1,
        API_VERSIONS,
        min_version,
        max_version,
    )
    return [body]
