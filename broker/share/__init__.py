"""Share groups (KIP-932, "Queues for Kafka").

``persister`` is the contract between the share-group side (share partitions, which acquire,
acknowledge and redeliver records) and the share coordinator that keeps each share partition's
state durable in ``__share_group_state``.  It mirrors Kafka's ``Persister``: a share partition
reads its state once when it is first used and writes every change before it answers.

``view`` holds the broker-level seams between the three parts (the group side, the share partitions,
the share coordinator), so that none imports another's internals.

The group side (membership and assignment, in the group coordinator's shards over ``__consumer_offsets``):

* ``group``         - ShareGroup/ShareMember, Kafka's state names, the ``simple`` share assignor.
* ``group_manager`` - ShareGroupManager, one per coordinator shard: ShareGroupHeartbeat, session expiry,
                      share-state initialization, describe/list/delete, ``replay`` of the records.
* ``records``       - the six share-group record types in ``__consumer_offsets`` (key versions 10-15).
* ``apis``          - the ShareGroupHeartbeat (76) and ShareGroupDescribe (77) handlers, ``share.version``.
* ``operator``      - what the CLI, /metrics, the console and the control API show of share groups.

The share partitions: ``partition`` (record states, locks), ``fetch_sessions``, ``fetch`` (the
ShareFetch/ShareAcknowledge handlers), registered at start by ``fetch_apis``, which loads ``fetch``
with the first of those requests.
"""
