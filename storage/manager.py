"""LogManager: every partition log under one data directory.

Layout: ``<data_dir>/<topic>-<partition>/`` per partition (the partition is the part after the last
``-``; topic names may contain ``-`` themselves).  Directories are opened, and recovered when the
last shutdown was not clean, when the manager starts, with the default config; the broker then
hands each topic's effective settings through ``get_or_create``/``open_topic``/``update_config``.
Directories whose name does not parse, or that end in ``-delete``, are not partitions and are left
alone (the metadata log lives next to them as a plain file).  ``<data_dir>/.lock`` is held with
``flock`` while the manager is open, so a second broker process on the same directory fails at
start (DataDirInUseError) instead of corrupting the logs.

``tick()`` is the broker's maintenance timer: cheap checks for every log (roll by age, flush by
flush.ms, retention) and at most one compaction per call, so a tick's work stays bounded.  A log
found on disk gets no retention, roll or compaction until the broker has passed its topic's
settings (``get_or_create``/``open_topic``): the defaults could be wrong for it (a compacted
topic must not lose old records to the default 7-day delete policy).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
from typing import Callable, Iterator

from . import fs
from .config import LogConfig, topic_names
from .log import PartitionLog, wall_clock_ms

_log = logging.getLogger(__name__)
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
LOCK_FILE = ".lock"

# data_dir -> (descriptor holding the flock, managers of this process using it).  The lock keeps
# a second broker *process* off a directory; managers within one process (tests reopening a
# directory) share it.
_LOCKS: dict[str, list] = {}


class DataDirInUseError(RuntimeError):
    pass


def _lock(data_dir: str) -> None:
    key = os.path.realpath(data_dir)
    held = _LOCKS.get(key)
    if held is not None:
        held[1] += 1
        return
    fd = os.open(os.path.join(data_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise DataDirInUseError(f"data directory {data_dir} is in use by another process") from None
    _LOCKS[key] = [fd, 1]


def _unlock(data_dir: str) -> None:
    key = os.path.realpath(data_dir)
    held = _LOCKS.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _LOCKS[key]
        os.close(held[0])  # closing the descriptor drops the flock


class LogManager:
    def __init__(self, data_dir: str, default_config: dict | LogConfig | None = None,
                 now_ms: Callable[[], int] | None = None):
        self.data_dir = data_dir
        self._now = now_ms or wall_clock_ms
        if isinstance(default_config, LogConfig):
            self.default_config = default_config
        else:
            self.default_config = LogConfig.from_kafka(topic_names(default_config))
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        # Logs found on disk get the default config until the broker says what the topic wants;
        # until then tick() must not apply retention or compaction with settings that may be wrong.
        self._configured: set[tuple[str, int]] = set()
        self._compaction_cursor = 0
        self._compaction_failed: set[str] = set()
        self._closed = False
        os.makedirs(data_dir, exist_ok=True)
        _lock(data_dir)
        try:
            self._open_existing()
        except BaseException:
            _unlock(data_dir)
            raise

    def _open_existing(self) -> None:
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            m = _PARTITION_DIR.match(name)
            if not m or not os.path.isdir(path) or name.endswith("-delete"):
                continue
            log = PartitionLog(path, self.default_config, now_ms=self._now)
            if log.recovered_bytes_cut:
                _log.warning("recovered %s: cut %d bytes of torn or corrupt data", name, log.recovered_bytes_cut)
            self._logs[(m.group(1), int(m.group(2)))] = log

    def _config_for(self, topic: str, topic_configs: dict | None) -> LogConfig:
        if topic_configs is None:
            return self._topic_configs.get(topic, self.default_config)
        config = LogConfig.from_kafka(topic_names(topic_configs), base=self.default_config)
        self._topic_configs[topic] = config
        return config

    def get_or_create(self, topic: str, partition: int, topic_configs: dict | None = None) -> PartitionLog:
        """The log of (topic, partition), created when missing; ``topic_configs`` (Kafka names)
        replaces the topic's settings when given."""
        config = self._config_for(topic, topic_configs)
        key = (topic, partition)
        self._configured.add(key)
        log = self._logs.get(key)
        if log is None:
            log = PartitionLog(os.path.join(self.data_dir, f"{topic}-{partition}"), config, now_ms=self._now)
            self._logs[key] = log
        elif log.config != config:
            log.update_config(config)
        return log

    def open_topic(self, topic: str, num_partitions: int, topic_configs: dict | None = None) -> list[PartitionLog]:
        """get_or_create for partitions 0..num_partitions-1."""
        return [self.get_or_create(topic, p, topic_configs) for p in range(num_partitions)]

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def topics(self) -> set[str]:
        return {t for t, _ in self._logs}

    def update_config(self, topic: str, topic_configs: dict) -> None:
        config = self._config_for(topic, topic_configs)
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(config)

    update_topic_config = update_config

    def delete_topic(self, topic: str) -> None:
        """Remove every partition of ``topic`` with its files (directly, no ``-delete`` rename)."""
        for key in [k for k in self._logs if k[0] == topic]:
            self._logs.pop(key).delete()
            self._configured.discard(key)
        self._topic_configs.pop(topic, None)
        # Directories not opened (e.g. partitions beyond the topic's count) go too.
        for name in os.listdir(self.data_dir):
            m = _PARTITION_DIR.match(name)
            if m and m.group(1) == topic:
                fs.remove_tree(os.path.join(self.data_dir, name))

    def drop_partitions(self, topic: str, first: int) -> None:
        """Remove partitions ``first`` and up of ``topic`` with their files: the undo of a
        topic creation or partition increase that could not be completed."""
        for key in [k for k in self._logs if k[0] == topic and k[1] >= first]:
            try:
                self._logs.pop(key).delete()
            except OSError:
                _log.warning("could not remove %s-%d", *key, exc_info=True)
            self._configured.discard(key)
        for name in os.listdir(self.data_dir):
            m = _PARTITION_DIR.match(name)
            if m and m.group(1) == topic and int(m.group(2)) >= first:
                fs.remove_tree(os.path.join(self.data_dir, name))

    def tick(self, now_ms: int | None = None) -> None:
        """Maintenance: roll, flush and retention for every log, then one cleaner pass.

        ``now_ms`` is accepted for the caller's convenience; the logs read the injected clock.
        """
        for key, log in list(self._logs.items()):
            try:
                log.maybe_flush()
                if key not in self._configured:
                    continue
                log.maybe_roll()
                log.apply_retention()
            except Exception:  # one broken log must not stop maintenance of the others
                _log.exception("maintenance of %s failed", log.directory)
        self.clean()

    def clean(self) -> bool:
        """One pass of the cleaner: compact at most one log that needs it (dirty ratio, tombstone
        horizon or max.compaction.lag.ms), taking the compacted logs in turn.  Returns whether a
        log was compacted; the broker runs this every ``log.cleaner.backoff.ms`` when there was
        nothing to do and again at once when there was, as Kafka's cleaner threads do."""
        compactable = [log for key, log in list(self._logs.items())
                       if key in self._configured and log.config.compact]
        if not compactable:
            return False
        start = self._compaction_cursor % len(compactable)
        for log in compactable[start:] + compactable[:start]:
            self._compaction_cursor += 1
            try:
                if not log.needs_compaction():
                    continue
                log.compact()
                self._compaction_failed.discard(log.directory)
                return True
            except Exception:
                # Logged once per log: a corrupt batch would otherwise repeat the traceback at
                # every cleaner pass until someone repairs it.
                if log.directory not in self._compaction_failed:
                    self._compaction_failed.add(log.directory)
                    _log.exception("compaction of %s failed", log.directory)
                else:
                    _log.debug("compaction of %s failed again", log.directory, exc_info=True)
                return False
        return False

    def flush(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for log in self._logs.values():
                log.close()
        finally:
            _unlock(self.data_dir)

    def __iter__(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))
