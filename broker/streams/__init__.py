"""Streams groups (KIP-1071): the group coordinator's side of Kafka Streams' rebalance protocol.

Layout (one concern per module):

* ``records``  - the six streams-group record types in ``__consumer_offsets`` (keys 17, 19-23).
* ``topology`` - the topology a group runs and its configuration against the existing topics: partition
                 counts of repartition and changelog topics, co-partitioning, the internal topics to create.
* ``assignor`` - Kafka 4.2's ``sticky`` task assignor (active and standby tasks).
* ``java``     - the Java collection orders Kafka's answers show (HashMap iteration, PriorityQueue ties).
* ``group``    - StreamsGroup, its members, states, and reconciliation toward a target assignment.
* ``manager``  - the streams groups of one coordinator shard: heartbeat, leave, timers, replay,
                 describe/list/delete, offset-commit validation.  The shard holds one.
* ``apis``     - the asyncio handlers of StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89).

Everything but ``apis`` is synchronous and free of I/O, driven by the shard's injected clock and timer.
"""
