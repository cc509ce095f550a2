"""In-memory stand-ins for storage's MetadataLog and LogManager (controller unit tests)."""


class MemoryMetadataLog:
    def __init__(self, records=None):
        self.saved = list(records or [])
        self.closed = False

    def records(self):
        return list(self.saved)

    def append(self, record):
        self.saved.append(dict(record))

    def close(self):
        self.closed = True


class RecordingLogManager:
    def __init__(self):
        self.opened = {}
        self.configs = {}
        self.deleted = []
        self.ticks = []
        self.topics_on_disk = set()

    def open_topic(self, name, num_partitions, configs):
        self.opened[name] = num_partitions
        self.configs[name] = configs

    def update_topic_config(self, name, configs):
        self.configs[name] = configs

    def delete_topic(self, name):
        self.deleted.append(name)
        self.opened.pop(name, None)

    def get(self, topic, partition):
        return (topic, partition)

    def topics(self):
        return set(self.topics_on_disk) | set(self.opened)

    def tick(self, now_ms):
        self.ticks.append(now_ms)

    def clean(self):
        return False

    def flush(self):
        pass

    def close(self):
        pass


class DirLogManager(RecordingLogManager):
    """Real storage PartitionLogs in a directory, without storage's LogManager."""

    def __init__(self, root):
        super().__init__()
        self.root = root
        self.logs = {}

    def open_topic(self, name, num_partitions, configs):
        from minikafka.storage import PartitionLog

        super().open_topic(name, num_partitions, configs)
        for p in range(num_partitions):
            if (name, p) not in self.logs:
                self.logs[(name, p)] = PartitionLog(f"{self.root}/{name}-{p}", dict(configs))

    def get(self, topic, partition):
        return self.logs[(topic, partition)]

    def update_topic_config(self, name, configs):
        from minikafka.storage import LogConfig

        super().update_topic_config(name, configs)
        for (topic, _), plog in self.logs.items():
            if topic == name:
                plog.update_config(LogConfig.from_kafka(dict(configs)))

    def close(self):
        for plog in self.logs.values():
            plog.close()


class FakeBroker:
    """Just enough of broker.server.Broker for handler tests."""

    def __init__(self, root, now_ms=1_000_000, **overrides):
        import asyncio

        from minikafka.broker.config import BrokerConfig
        from minikafka.broker.controller import Controller
        from minikafka.broker.server import AppendWaiters

        self.config = BrokerConfig.load(environ={}, overrides=overrides)
        self.meta = MemoryMetadataLog()
        self.logs = DirLogManager(root)
        self.controller = Controller(self.config, self.meta, self.logs)
        self.append_waiters = AppendWaiters()
        self.txn_coordinator = None
        self.group_coordinator = None
        self._now = now_ms
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self.notified = []

    def now_ms(self):
        return self._now

    def notify_append(self, topic, partition):
        self.notified.append((topic, partition))
        self.append_waiters.notify((topic, partition))


class Ctx:
    def __init__(self, broker, api_key, api_version, client_id="test"):
        self.broker, self.api_key, self.api_version = broker, api_key, api_version
        self.client_id, self.correlation_id, self.client_host, self.connection = client_id, 1, "127.0.0.1", None
