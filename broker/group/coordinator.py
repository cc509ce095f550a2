"""The group coordinator: one shard per ``__consumer_offsets`` partition, and the routing between them.

A single broker leads every partition, so every shard is local; the routing still follows Kafka
(``partition_for``) so that the data in ``__consumer_offsets`` is laid out as Kafka would lay it out.
"""

from __future__ import annotations

from typing import Callable, Iterator

from minikafka.protocol.errors import ErrorCode

from . import OFFSETS_TOPIC  # noqa: F401  (the name users of the coordinator import from here)
from .partitioner import partition_for
from .consumer import ConsumerConfig
from .shard import CoordinatorShard, GroupConfig, OffsetsLog
from ..clock import Clock, Timer


class GroupCoordinator:
    def __init__(self, num_partitions: int, log_factory: Callable[[int], OffsetsLog], timer: Timer,
                 clock: Clock, config: GroupConfig | None = None,
                 consumer_config: ConsumerConfig | None = None,
                 topic_metadata: Callable[[], dict] | None = None,
                 share_config=None, share_hooks=None, streams_config=None) -> None:
        self.num_partitions = num_partitions
        self.config = config or GroupConfig()
        self.consumer_config = consumer_config or ConsumerConfig()
        self.timer = timer
        self.clock = clock
        self.shards = [CoordinatorShard(p, log_factory(p), timer, clock, self.config, self.consumer_config,
                                        share_config, share_hooks, streams_config)
                       for p in range(num_partitions)]
        if topic_metadata is not None:
            for shard in self.shards:
                shard.topic_metadata = topic_metadata
        self.active = False

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def shard_for(self, group_id: str) -> CoordinatorShard:
        return self.shards[self.partition_for(group_id)]

    def check(self, group_id: str) -> tuple[CoordinatorShard | None, ErrorCode]:
        """The shard of a group, or the error a request for it gets (not active, still loading)."""
        if not self.active:
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        shard = self.shard_for(group_id)
        if not shard.loaded:
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return shard, ErrorCode.NONE

    def load(self) -> None:
        self.active = True
        for shard in self.shards:
            shard.load()

    def unload(self) -> None:
        self.active = False
        for shard in self.shards:
            shard.unload()

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int = 0) -> list[int]:
        """End a producer's transaction in every shard holding its offsets: write the marker, apply it.

        Returns the ``__consumer_offsets`` partitions that got a marker.  This is the group side of
        WriteTxnMarkers; the transaction coordinator calls it when it commits or aborts.
        """
        touched = []
        for shard in self.shards:
            if shard.loaded and shard.has_pending_transaction(producer_id):
                shard.complete_transaction(producer_id, producer_epoch, commit, coordinator_epoch)
                touched.append(shard.partition)
        return touched

    def expire_consumer_member(self, group_id: str, member_id: str) -> bool:
        """Remove a KIP-848 member now, as its session timeout would; False if there is no such member.

        For test kits (fault injection: "expire a member"); the rest of the group reconciles as after a
        real timeout.  Advancing an injected clock/timer fires the real session and revocation timeouts.
        """
        shard, error = self.check(group_id)
        return shard is not None and shard.expire_consumer_member(group_id, member_id)

    def expire_share_member(self, group_id: str, member_id: str) -> bool:
        """Remove a share-group member now, as its session timeout would (control API, test kits)."""
        shard, error = self.check(group_id)
        return shard is not None and shard.share.expire_member(group_id, member_id)

    def loaded_shards(self) -> Iterator[CoordinatorShard]:
        return (s for s in self.shards if s.loaded)
