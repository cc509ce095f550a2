import asyncio

from minikafka.broker.config import BrokerConfig
from minikafka.broker.server import AppendWaiters, Broker


class CountingController:
    def __init__(self):
        self.full = 0
        self.light = 0
        self.closed = False

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


async def test_append_waiters_wake_only_matching_keys():
    loop = asyncio.get_running_loop()
    waiters = AppendWaiters()
    a = waiters.wait([("t", 0), ("t", 1)], loop)
    b = waiters.wait([("u", 0)], loop)
    waiters.notify(("t", 1))
    assert a.done() and not b.done()
    waiters.discard([("t", 0), ("t", 1)], a)
    waiters.discard([("u", 0)], b)
    assert len(waiters) == 0
    waiters.notify(("u", 0))  # nobody waiting: no error
