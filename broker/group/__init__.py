"""Group coordinator: classic groups, KIP-848 consumer groups and committed offsets over ``__consumer_offsets``.

Layout (one concern per module):

* ``state``       - GroupState with Kafka's names and the table of allowed transitions.
* ``member``      - one member of a classic group.
* ``classic``     - ClassicGroup: membership bookkeeping, protocol vote, leader election.
* ``records``     - the key/value formats of ``__consumer_offsets`` records, declared as small spec tables.
* ``partitioner`` - which ``__consumer_offsets`` partition (hence shard) owns a group.
* ``shard``       - a coordinator shard: the sans-IO state machine over one ``__consumer_offsets`` partition
                    (runtime and replay, offsets, transactional offsets, admin, retention).
* ``result``      - CoordinatorResult (records + response) and the error-shaped join/sync responses.
* ``classic_rebalance`` - classic groups' JoinGroup/SyncGroup/Heartbeat/LeaveGroup in the shard (mixed in).
* ``consumer``    - KIP-848 consumer groups in the same shard (mixed in): heartbeat, epochs, target
                    assignment, reconciliation, describe; replayed through the shard's one ``replay``.
* ``migration``   - KIP-848 online migration (mixed in): classic <-> consumer group conversions and the
                    classic members of a consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup).
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
