"""KIP-714 telemetry handlers: subscriptions, Kafka's push rules, payload checks."""

import types
import uuid

import pytest

from minikafka.protocol import otlp
from minikafka.protocol.records import compress

from minikafka.broker.config import BrokerConfig
from minikafka.broker.handlers import client_telemetry


class Reg:
    def __init__(self):
        self.handlers = {}

    def register(self, key, lo, hi, handler):
        self.handlers[key] = handler


def make(enabled=True, interval=1000):
    config = BrokerConfig.load(environ={}, overrides={"client.telemetry.enable": str(enabled).lower(),
                                                      "client.telemetry.push.interval.ms": str(interval),
                                                      "telemetry.max.bytes": "2000"})
    broker = types.SimpleNamespace(config=config, now=1_000_000)
    broker.now_ms = lambda: broker.now
    reg = Reg()
    client_telemetry.register(reg, broker)
    return broker, reg


def ctx(broker):
    return types.SimpleNamespace(broker=broker, client_id="app-1", client_host="127.0.0.1", api_version=0)


def test_off_by_default_nothing_is_advertised():
    broker, reg = make(enabled=False)
    assert reg.handlers == {} and broker.telemetry is None
    assert BrokerConfig.load(environ={}).get("client.telemetry.enable") is False


async def test_subscribe_push_and_keep_metrics_per_client(caplog):
    broker, reg = make()
    sub = await reg.handlers[71](ctx(broker), {"client_instance_id": uuid.UUID(int=0)})
    iid = sub["client_instance_id"]
    assert sub["error_code"] == 0 and iid != uuid.UUID(int=0)
    assert sub["requested_metrics"] == [""] and sub["push_interval_ms"] == 1000
    assert sub["accepted_compression_types"] == [4, 3, 1, 2]

    def push(payload, compression=0, terminating=False, subscription=sub["subscription_id"], instance=iid):
        return reg.handlers[72](ctx(broker), {"client_instance_id": instance, "subscription_id": subscription,
                                              "terminating": terminating, "compression_type": compression,
                                              "metrics": payload})

    data = otlp.encode_gauges({"org.apache.kafka.producer.record.send.rate": 3.0},
                              {"client_software_name": "apache-kafka-java"})
    caplog.set_level("INFO", logger="minikafka.telemetry")
    assert (await push(compress(4, data), compression=4))["error_code"] == 0  # right after the Get
    assert "client metrics from client_id=app-1" in caplog.text
    [client] = broker.telemetry.snapshot()
    assert client["metrics"] == {"org.apache.kafka.producer.record.send.rate": 3.0}
    assert client["resource"]["client_software_name"] == "apache-kafka-java"
    assert (await push(data))["error_code"] == 89  # too early
    broker.now += 1000
    assert (await push(data))["error_code"] == 0
    assert (await push(data, subscription=12345))["error_code"] == 117
    assert (await push(data, instance=uuid.uuid4()))["error_code"] == 117
    assert (await push(data, instance=uuid.UUID(int=0)))["error_code"] == 42
    broker.now += 1000
    assert (await push(b"x" * 3000))["error_code"] == 118
    assert (await push(b"\x0a\xff\xff"))["error_code"] == 87
    assert (await push(data, compression=9))["error_code"] == 76
    assert (await push(data, terminating=True))["error_code"] == 0  # terminating: always taken
    assert (await push(data, terminating=True))["error_code"] == 42
    assert broker.telemetry.snapshot()[0]["terminated"] is True


async def test_get_again_within_the_interval_is_throttled():
    broker, reg = make()
    sub = await reg.handlers[71](ctx(broker), {"client_instance_id": uuid.UUID(int=0)})
    again = await reg.handlers[71](ctx(broker), {"client_instance_id": sub["client_instance_id"]})
    assert again["error_code"] == 89
    broker.now += 1000
    assert (await reg.handlers[71](ctx(broker), {"client_instance_id": sub["client_instance_id"]}))["error_code"] == 0
