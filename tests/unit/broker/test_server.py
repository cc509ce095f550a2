import asyncio

import pytest

from minikafka.broker.config import BrokerConfig
from minikafka.broker.server import AppendWaiters, Broker


class CountingController:
    def __init__(self, busy_cleans=0):
        self.full = 0
        self.light = 0
        self.cleans = 0
        self.busy_cleans = busy_cleans  # how many cleaner passes find a log to compact
        self.closed = False

    def clean(self):
        self.cleans += 1
        return self.cleans <= self.busy_cleans

    def tick(self, now_ms):
        self.full += 1

    def light_tick(self, now_ms):
        self.light += 1

    def close(self):
        self.closed = True


async def test_maintenance_runs_light_ticks_often_and_retention_rarely():
    config = BrokerConfig.load(environ={}, fields={"port": 0},
                               overrides={"maintenance.interval.ms": "10",
                                          "log.retention.check.interval.ms": "100"})
    controller = CountingController()
    broker = Broker(config, controller=controller, handler_modules=[])
    await broker.start()
    try:
        assert broker.bound_port and config.port == broker.bound_port
        await asyncio.sleep(0.35)
    finally:
        await broker.stop()
    assert 2 <= controller.full <= 4
    assert controller.light > 3 * controller.full
    assert controller.closed


async def test_the_cleaner_runs_every_backoff_and_again_at_once_after_work():
    """log.cleaner.backoff.ms paces the cleaner, not the retention check: with nothing to compact
    it looks every backoff; after a pass that compacted something it looks again on the next tick."""
    config = BrokerConfig.load(environ={}, fields={"port": 0},
                               overrides={"maintenance.interval.ms": "10", "log.cleaner.backoff.ms": "100",
                                          "log.retention.check.interval.ms": "100000"})
    idle, busy = CountingController(), CountingController(busy_cleans=10)
    for controller in (idle, busy):
        broker = Broker(config, controller=controller, handler_modules=[])
        await broker.start()
        try:
            deadline = asyncio.get_running_loop().time() + 5
            while controller.light < 30 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
        finally:
            await broker.stop()
        assert controller.full == 0  # the retention check is not what runs the cleaner
    # Idle: the first pass at start, then one per 100 ms over ~30 ticks of 10 ms (a loaded machine
    # stretches the ticks, which only lowers the count).
    assert 1 <= idle.cleans <= 5 < idle.light
    # Busy: one pass per tick while passes find work (ten of them), then the backoff again.
    assert busy.cleans >= 11


async def test_log_cleaner_enable_false_stops_the_cleaner():
    config = BrokerConfig.load(environ={}, fields={"port": 0},
                               overrides={"maintenance.interval.ms": "10", "log.cleaner.enable": "false"})
    controller = CountingController()
    broker = Broker(config, controller=controller, handler_modules=[])
    await broker.start()
    try:
        deadline = asyncio.get_running_loop().time() + 5
        while controller.light < 10 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await broker.stop()
    assert controller.light >= 10 and controller.cleans == 0


async def test_append_waiters_wake_only_matching_keys():
    loop = asyncio.get_running_loop()
    waiters = AppendWaiters()
    a = loop.create_task(waiters.until([("t", 0), ("t", 1)], loop, 30))
    b = loop.create_task(waiters.until([("u", 0)], loop, 30))
    await asyncio.sleep(0)  # both parked
    assert len(waiters) == 3
    waiters.notify(("t", 1))
    await asyncio.wait_for(a, 5)
    assert not b.done()
    assert len(waiters) == 1  # a's other key is discarded when it ends
    b.cancel()
    with pytest.raises(asyncio.CancelledError):
        await b
    assert len(waiters) == 0
    waiters.notify(("u", 0))  # nobody waiting: no error


async def test_a_handler_module_that_fails_to_import_stops_the_start(tmp_path, monkeypatch):
    import sys

    import pytest

    from minikafka.broker.server import HandlerModuleError

    broken = tmp_path / "mk_broken_handlers.py"
    broken.write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = BrokerConfig.load(environ={}, fields={"port": 0})
    for names in (["minikafka.broker.handlers.api_versions", "mk_broken_handlers"],
                  ["minikafka.broker.handlers.api_versions", "minikafka.broker.handlers.not_there"]):
        controller = CountingController()
        broker = Broker(config, controller=controller, handler_modules=names)
        with pytest.raises(HandlerModuleError, match=names[-1]):
            await broker.start()
        assert broker.bound_port is None, "the listener must not open"
        assert controller.closed
    sys.modules.pop("mk_broken_handlers", None)


def test_connection_summary_is_one_info_line_only_when_something_changed(caplog):
    import logging

    config = BrokerConfig.load(environ={}, fields={"port": 0})
    broker = Broker(config, controller=CountingController(), handler_modules=[])
    caplog.set_level(logging.INFO, logger="minikafka.broker")
    last = broker._log_connection_summary((0, 0, 0), 60)
    assert caplog.records == []
    broker.connection_stats.opened += 5000
    broker.connection_stats.closed += 4999
    last = broker._log_connection_summary(last, 60)
    assert len(caplog.records) == 1 and "5000 opened, 4999 closed" in caplog.records[0].getMessage()
    broker._log_connection_summary(last, 60)
    assert len(caplog.records) == 1


async def test_the_read_buffer_is_allocated_with_the_first_connection():
    # Idle memory (issue 24): a broker nobody has connected to holds no read buffer; the
    # connections then share one.
    config = BrokerConfig.load(environ={}, fields={"port": 0})
    broker = Broker(config, controller=CountingController(), handler_modules=[])
    await broker.start()
    try:
        assert broker._read_buffer is None
        readers = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound_port)
            readers.append(writer)
        for _ in range(100):
            if len(broker.connections) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(broker.connections) == 2
        assert broker._read_buffer is not None
        assert {id(c.get_buffer(1)) for c in broker.connections} == {id(broker.read_buffer)}
        for writer in readers:
            writer.close()
    finally:
        await broker.stop()
