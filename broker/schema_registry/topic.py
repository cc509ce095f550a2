"""The ``_schemas`` topic in the broker's own storage: the registry's narrow seam to the broker.

Created as Confluent's registry creates it (one partition, ``cleanup.policy=compact``; an ordinary
topic that clients may read), with the registry's first write rather than at start, so that
starting a registry that never stores anything costs no topic.  Appends go through the partition log as a produce
does (written to the OS before they are acknowledged; fsync within ``flush.ms``), then wake the
fetches waiting on the partition.  Reads walk the partition's batches, skipping control batches
(the registry never writes in transactions; another writer's transactional records are read as
they come).
"""

from __future__ import annotations

import logging

from minikafka.protocol.records import build_batch, iter_records

log = logging.getLogger("minikafka.schema_registry")

TOPIC = "_schemas"


class BrokerSchemasLog:
    def __init__(self, broker, topic: str = TOPIC) -> None:
        self.broker = broker
        self.topic = topic

    def ensure(self) -> None:
        controller = self.broker.controller
        if controller.topic(self.topic) is None:
            controller.create_topic(self.topic, 1, configs={"cleanup.policy": "compact"})
            log.info("created topic %s for the schema registry", self.topic)

    def _log(self):
        return self.broker.controller.log(self.topic, 0)

    def exists(self) -> bool:
        return self.broker.controller.topic(self.topic) is not None

    def append(self, entries):
        self.ensure()
        now = self.broker.now_ms()
        batch = build_batch([(key, value, [], now) for key, value in entries])
        info = self._log().append(batch)
        self.broker.notify_append(self.topic, 0)
        return info.base_offset + len(entries)

    def read(self, from_offset: int):
        if not self.exists():
            return
        for header, view in self._log().iter_batches(from_offset):
            if header.is_control:
                continue
            for record in iter_records(view):
                if record.offset >= from_offset:
                    yield record.offset, record.key, record.value

    def end_offset(self) -> int:
        return self._log().high_watermark if self.exists() else 0
