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
        self.topics = {}
        self.configs = {}
        self.deleted = []
        self.ticks = []

    def open_topic(self, name, num_partitions, configs):
        self.topics[name] = num_partitions
        self.configs[name] = configs

    def update_topic_config(self, name, configs):
        self.configs[name] = configs

    def delete_topic(self, name):
        self.deleted.append(name)
        self.topics.pop(name, None)

    def get(self, topic, partition):
        return (topic, partition)

    def tick(self, now_ms):
        self.ticks.append(now_ms)

    def flush(self):
        pass

    def close(self):
        pass
