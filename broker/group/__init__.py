"""Group coordinator: classic groups, KIP-848 consumer groups and committed offsets over ``__consumer_offsets``.

Layout (one concern per module):

* ``state``       - GroupState with Kafka's names and the table of allowed transitions.
* ``member``      - one member of a classic group.
* ``classic``     - ClassicGroup: membership bookkeeping, protocol vote, leader election.
* ``records``     - the key/value formats of ``__consumer_offsets`` records, declared as small spec tables.
* ``partitioner`` - which ``__consumer_offsets`` partition (hence shard) owns a group.
* ``result``      - CoordinatorResult (records + response), the ``Runtime`` protocol managers see the shard
                    through, and the error-shaped join/sync responses.
* ``shard``       - a coordinator shard over one ``__consumer_offsets`` partition: the runtime (append,
                    replay, load, timers, retention), the group-id namespace, the routing to the managers
                    below, and how a group type plugs in (its docstring).
* ``offsets``     - OffsetManager: committed and transactional offsets (OffsetCommit/Fetch/Delete, TxnOffsetCommit).
* ``classic_manager`` - ClassicGroupManager: classic groups' JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
                    DescribeGroups, records and timers.
* ``consumer``    - KIP-848 consumer groups (ConsumerGroup, reconciliation) and ConsumerGroupManager:
                    heartbeat, epochs, target assignment, describe.
* ``migration``   - GroupMigration, KIP-848 online migration: classic <-> consumer group conversions and the
                    classic members of a consumer group; the one part that calls both group managers.
* ``embedded``    - the consumer protocol's Subscription/Assignment inside classic group payloads.
* ``assignors``   - the server-side assignors of consumer groups (``uniform``, ``range``).
* ``coordinator`` - routes group ids to shards and owns them.
* ``apis``        - the asyncio request handlers (FindCoordinator, JoinGroup, ConsumerGroupHeartbeat, ...),
                    ``register/start/stop``.

Everything but ``apis`` is synchronous and free of I/O: time comes from an injected clock, timeouts from an
injected timer (the ``Clock`` and ``Timer`` of broker/clock.py: the broker's timer service when running,
``MockTimer`` in tests), and parked JoinGroup/SyncGroup requests are completed through callbacks.

``apis`` imports the coordinator's modules only when a coordinator is created (the first
FindCoordinator, or a broker start with ``__consumer_offsets`` on disk), so a broker answers its first
requests without them.
"""

OFFSETS_TOPIC = "__consumer_offsets"
