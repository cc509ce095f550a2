"""Message specs and API names for issue 14's APIs, kept apart from ``protocol.specs`` so the
spec loader stays one small file that several people extend.

``API_NAMES`` names the API keys of the Kafka 4.x admin APIs whose JSON ships in the
kafka-python wheel, so their first request is found without scanning every spec file.

``SPECS`` holds the two KIP-714 client-telemetry messages that kafka-python 3.0.12 does not
ship (GetTelemetrySubscriptions 71, PushTelemetry 72), as the parsed form of Kafka's JSON
(the same keys ``protocol.specs.load`` reads from a file).  Their fields are the ones KIP-714
defines; v0 is the only version and it is flexible.
"""

from __future__ import annotations

API_NAMES = {
    34: "AlterReplicaLogDirs", 43: "ElectLeaders", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 48: "DescribeClientQuotas", 49: "AlterClientQuotas",
    55: "DescribeQuorum", 57: "UpdateFeatures", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
    75: "DescribeTopicPartitions",
}


def _f(name: str, type_: str, versions: str = "0+", **extra) -> dict:
    return {"name": name, "type": type_, "versions": versions, **extra}


SPECS: dict[str, dict] = {
    "GetTelemetrySubscriptionsRequest": {
        "apiKey": 71, "type": "request", "name": "GetTelemetrySubscriptionsRequest",
        "validVersions": "0", "flexibleVersions": "0+",
        "fields": [
            # Zero on a client's first request: the broker then assigns one.
            _f("ClientInstanceId", "uuid"),
        ],
    },
    "GetTelemetrySubscriptionsResponse": {
        "apiKey": 71, "type": "response", "name": "GetTelemetrySubscriptionsResponse",
        "validVersions": "0", "flexibleVersions": "0+",
        "fields": [
            _f("ThrottleTimeMs", "int32"),
            _f("ErrorCode", "int16"),
            _f("ClientInstanceId", "uuid"),
            _f("SubscriptionId", "int32"),
            _f("AcceptedCompressionTypes", "[]int8"),
            _f("PushIntervalMs", "int32"),
            _f("TelemetryMaxBytes", "int32"),
            _f("DeltaTemporality", "bool"),
            _f("RequestedMetrics", "[]string"),
        ],
    },
    "PushTelemetryRequest": {
        "apiKey": 72, "type": "request", "name": "PushTelemetryRequest",
        "validVersions": "0", "flexibleVersions": "0+",
        "fields": [
            _f("ClientInstanceId", "uuid"),
            _f("SubscriptionId", "int32"),
            _f("Terminating", "bool"),
            _f("CompressionType", "int8"),
            _f("Metrics", "bytes"),
        ],
    },
    "PushTelemetryResponse": {
        "apiKey": 72, "type": "response", "name": "PushTelemetryResponse",
        "validVersions": "0", "flexibleVersions": "0+",
        "fields": [
            _f("ThrottleTimeMs", "int32"),
            _f("ErrorCode", "int16"),
        ],
    },
}

SPEC_BY_KEY = {(spec["apiKey"], spec["type"]): name for name, spec in SPECS.items()}
