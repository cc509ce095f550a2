"""Cluster membership as a one-node KRaft cluster with a static quorum answers it:
UnregisterBroker (64) v0, AddRaftVoter (80) v0-1, RemoveRaftVoter (81) v0.

This node is the only broker and the only voter of ``__cluster_metadata``; ``kraft.version`` is
0 (broker/features.py), a static quorum, which cannot change its voters (KIP-853 needs
kraft.version 1).  The answers are Apache Kafka 4.2's for such a cluster (a combined
broker/controller formatted without ``--standalone``), checked in its order:

- UnregisterBroker: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (Kafka's message
  prints its internal request object, "Request Request(processor=...) needs ALTER permission.";
  ours is "Cluster authorization failed.", as its AddRaftVoter/RemoveRaftVoter say); an id other than
  this node's is BROKER_ID_NOT_REGISTERED ("Broker ID 7 is not currently registered"); this node's
  id is NONE with an empty message.  Left out: after that answer Kafka's broker has no
  registration until it restarts (Metadata lists no brokers, every partition is
  LEADER_NOT_AVAILABLE, coordinators are unavailable, its heartbeats get STALE_BROKER_EPOCH);
  minikafka answers NONE and keeps serving, as the restarted Kafka does.
- AddRaftVoter: ALTER on the cluster; a non-null cluster id other than ours is
  INCONSISTENT_CLUSTER_ID; a voter without an id >= 0 and a non-zero directory id, or without an
  endpoint for the controller listener (``CONTROLLER``, the name Kafka's single-node
  configuration gives it), is INVALID_REQUEST; then UNSUPPORTED_VERSION, "Cluster doesn't support
  adding voter because the kraft.version feature is 0".
- RemoveRaftVoter: the same cluster-id and voter checks, then UNSUPPORTED_VERSION ("... removing
  voter ...").

Should ``kraft.version`` be finalized at 1 (a standalone, dynamic quorum, as
``kafka-storage format --standalone`` makes it), the answers are that quorum's, as Kafka 4.2 gives
them: adding this node's id again is DUPLICATE_VOTER; adding another node first reaches its
controller endpoint, and is REQUEST_TIMED_OUT either because it cannot ("... API_VERSIONS
returned an error BROKER_NOT_AVAILABLE") or because that node has not replicated the metadata log
("... since it is lagging behind"; no node ever does here); removing any voter, this node
included, is VOTER_NOT_FOUND ("Cannot remove voter ... from the set of voters ...").
"""

from __future__ import annotations

import asyncio
import uuid

from minikafka.broker import features
from minikafka.broker.security import authorizer as az
from minikafka.broker.security.tokens import kafka_uuid_string
from minikafka.protocol.errors import ErrorCode

UNREGISTER_BROKER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 64, 80, 81
CONTROLLER_LISTENER = "CONTROLLER"
_CLUSTER_DENIED = "Cluster authorization failed."


def _answer(code: int, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message}


async def unregister_broker(ctx, body: dict) -> dict:
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED)
    broker_id = body.get("broker_id")
    if broker_id != ctx.broker.config.node_id or getattr(ctx.broker, "unregistered", False):
        return _answer(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
    # Until the next start this node is no longer registered (Kafka 4.2 answers a second
    # UnregisterBroker with BROKER_ID_NOT_REGISTERED until its broker restarts).
    ctx.broker.unregistered = True
    return _answer(0, "")


def _java_string_hash(text: str) -> int:
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):  # over UTF-16 code units, with int32 wrap-around
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_hashmap_order(names: list[str], initial_capacity: int | None = None) -> list[str]:
    """The iteration order of ``new java.util.HashMap<>(initial_capacity)`` holding these String
    keys, inserted in order: by bucket ``(h ^ h >>> 16) & (capacity - 1)``, then insertion order
    (a resize keeps it).  Kafka sizes its map of a request's endpoints by their count and prints
    it in its messages."""
    wanted = len(names) if initial_capacity is None else initial_capacity
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    for size in range(1, len(names) + 1):
        if size > int(capacity * 0.75):  # Java's threshold, checked after each insert
            capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]


def _endpoints_text(listeners: list[dict]) -> str:
    by_name: dict[str, dict] = {}
    for item in listeners:
        by_name[item.get("name")] = item  # a later endpoint of the same name replaces the value
    parts = [f"ListenerName({name})={by_name[name].get('host')}/<unresolved>:{by_name[name].get('port')}"
             for name in _java_hashmap_order(list(by_name), len(listeners))]
    return "Endpoints(endpoints={" + ", ".join(parts) + "})"


def _common_checks(ctx, body: dict, what: str) -> dict | None:
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED)
    cluster_id = body.get("cluster_id")
    ours = ctx.broker.controller.cluster_id
    if cluster_id is not None and cluster_id != ours:
        return _answer(ErrorCode.INCONSISTENT_CLUSTER_ID, f'The given id "{cluster_id}" doesn\'t match the cluster id "{ours}"')
    directory = body.get("voter_directory_id")
    if body.get("voter_id", -1) < 0 or directory is None or uuid.UUID(str(directory)).int == 0:
        return _answer(ErrorCode.INVALID_REQUEST, f"{what} voter request didn't include a valid voter")
    return None


def _kraft_version(broker) -> int:
    return features.finalized(broker).get(features.KRAFT_VERSION, 0)


def _replica_key(voter_id: int, directory) -> str:
    """Kafka's ``ReplicaKey.toString``, the directory id as a Kafka ``Uuid`` string."""
    return f"ReplicaKey(id={voter_id}, directoryId={kafka_uuid_string(uuid.UUID(str(directory)).bytes)})"


def _voters(broker) -> str:
    from .admin_quorum import _directory_id  # the directory id DescribeQuorum reports

    return f"[{_replica_key(broker.config.node_id, _directory_id(broker))}]"


async def _reachable(host: str, port: int, timeout_ms: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), max(min(timeout_ms, 5000), 1) / 1000)
    except (OSError, asyncio.TimeoutError, ValueError):
        return False
    writer.close()
    return True


async def add_raft_voter(ctx, body: dict) -> dict:
    refused = _common_checks(ctx, body, "Add")
    if refused is not None:
        return refused
    listeners = body.get("listeners") or []
    endpoint = next((item for item in listeners if item.get("name") == CONTROLLER_LISTENER), None)
    if endpoint is None:
        return _answer(ErrorCode.INVALID_REQUEST, f"Add voter request didn't include the endpoint ({_endpoints_text(listeners)}) "
                                        f"for the default listener ListenerName({CONTROLLER_LISTENER})")
    broker = ctx.broker
    level = _kraft_version(broker)
    if level == 0:
        return _answer(ErrorCode.UNSUPPORTED_VERSION,
                       f"Cluster doesn't support adding voter because the {features.KRAFT_VERSION} feature is {level}")
    key = _replica_key(body["voter_id"], body["voter_directory_id"])
    if body["voter_id"] == broker.config.node_id:
        return _answer(ErrorCode.DUPLICATE_VOTER, f"The voter id for {key} is already part of the set of voters {_voters(broker)}.")
    if not await _reachable(endpoint.get("host"), endpoint.get("port"), body.get("timeout_ms", 0)):
        return _answer(ErrorCode.REQUEST_TIMED_OUT,
                       "Aborted add voter operation for since API_VERSIONS returned an error BROKER_NOT_AVAILABLE")
    return _answer(ErrorCode.REQUEST_TIMED_OUT, f"Aborted add voter operation for {key} since it is lagging behind")


async def remove_raft_voter(ctx, body: dict) -> dict:
    refused = _common_checks(ctx, body, "Remove")
    if refused is not None:
        return refused
    broker = ctx.broker
    level = _kraft_version(broker)
    if level == 0:
        return _answer(ErrorCode.UNSUPPORTED_VERSION,
                       f"Cluster doesn't support removing voter because the {features.KRAFT_VERSION} feature is {level}")
    key = _replica_key(body["voter_id"], body["voter_directory_id"])
    return _answer(ErrorCode.VOTER_NOT_FOUND, f"Cannot remove voter {key} from the set of voters {_voters(broker)}")


def register(registry, broker) -> None:
    registry.register(UNREGISTER_BROKER, 0, 0, unregister_broker)
    registry.register(ADD_RAFT_VOTER, 0, 1, add_raft_voter)
    registry.register(REMOVE_RAFT_VOTER, 0, 0, remove_raft_voter)
