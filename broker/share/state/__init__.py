"""The share coordinator: durable share-partition state in ``__share_group_state`` (KIP-932).

Layout (one concern per module):

* ``records``     - the ShareSnapshot/ShareUpdate records (Kafka's coordinator record formats: an int16
                    record type before the key, an int16 version before the value), read and written
                    through the generic codec from the specs in ``protocol/schemas``.
* ``batches``     - how state batches of several writes combine into one non-overlapping list.
* ``shard``       - one ``__share_group_state`` partition as a state machine over its log: every change
                    is a record appended and then applied by ``replay``, the same path a load takes.
* ``coordinator`` - routes "group:topicId:partition" keys to shards, serves the five share-group-state
                    operations (Initialize/Read/Write/Delete/ReadSummary) with Kafka's checks, prunes the
                    log below the oldest record still needed, snapshots cold partitions.
* ``persister``   - the ``SharePersister`` over the coordinator that share partitions use.
* ``apis``        - the asyncio side: topic creation, load on start, timers, the handlers of APIs 83-87 and
                    90-92, FindCoordinator key type 2.

Everything but ``apis`` is synchronous and free of I/O (time from an injected clock), so unit tests drive
it with an in-memory log; a "restart" is a new coordinator over the same log.
"""

SHARE_STATE_TOPIC = "__share_group_state"
