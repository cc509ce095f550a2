"""FindCoordinator for a transactional id creates ``__transaction_state`` on first use.

Kafka creates the internal topic when the first FindCoordinator with key type 1 arrives, as it
creates ``__consumer_offsets`` for key type 0; before that, a fresh broker has no such topic.  One
fresh broker for the module: the raw requests come first, then a real transactional producer.
"""

from __future__ import annotations

import time
import uuid

import pytest

from clienttools import read_committed_to_end
from conftest import RawClient, start_broker

pytestmark = pytest.mark.minikafka_only(reason=(
        "budget, and one test restarts the broker; FindCoordinator for transactions runs on Kafka "
        "in test_txn_clients.py"))

TXN_PARTITIONS = 3
TID = "fc-producer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("txn-find"), offsets_topic_num_partitions=2,
                          transaction_state_log_num_partitions=TXN_PARTITIONS)
    yield handle
    handle.stop()


def internal_topics(raw: RawClient) -> dict[str, int]:
    resp = raw.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
    return {t["name"]: len(t["partitions"]) for t in resp["topics"] if t["is_internal"]}


def test_find_coordinator_for_a_transactional_id_creates_the_state_topic(broker):
    with RawClient(broker.port) as raw:
        assert "__transaction_state" not in internal_topics(raw)
        r = raw.request(10, 3, {"key": "tid-a", "key_type": 1})
        assert (r["error_code"], r["host"], r["port"]) == (0, "127.0.0.1", broker.port), r
        assert internal_topics(raw).get("__transaction_state") == TXN_PARTITIONS
        # v4 batches keys; the topic exists now and every key answers this broker.
        r = raw.request(10, 4, {"key_type": 1, "coordinator_keys": ["tid-a", "tid-b", "tid-c"]})
        assert [(c["key"], c["error_code"], c["port"]) for c in r["coordinators"]] == [
            ("tid-a", 0, broker.port), ("tid-b", 0, broker.port), ("tid-c", 0, broker.port)]
        # The group key still creates its own topic, independently.
        assert "__consumer_offsets" not in internal_topics(raw)
        r = raw.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert r["coordinators"][0]["error_code"] == 0
        assert internal_topics(raw) == {"__transaction_state": TXN_PARTITIONS, "__consumer_offsets": 2}
    assert (broker.data_dir / "__transaction_state-0").is_dir()


def test_transactional_producer_after_the_topic_was_created_by_find_coordinator(broker):
    from confluent_kafka import Producer

    topic = "fc-" + uuid.uuid4().hex[:8]
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": TID, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)  # written, so the abort is the coordinator's (not only librdkafka's)
    p.abort_transaction(30)
    assert [value for _key, value in read_committed_to_end(broker.bootstrap, topic)] == [b"committed"]


def test_a_restarted_broker_loads_the_state_topic_and_answers_find_coordinator(broker):
    broker.restart()
    with RawClient(broker.port) as raw:
        r = raw.request(10, 4, {"key_type": 1, "coordinator_keys": ["tid-a"]})
        assert r["coordinators"][0]["error_code"] == 0
        assert internal_topics(raw).get("__transaction_state") == TXN_PARTITIONS
        # The producer's id is found once its shard has loaded in the background.
        body = {"transactional_ids": [TID]}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = raw.request(65, 0, body)["transaction_states"][0]
            if state["error_code"] != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
            time.sleep(0.05)
        assert (state["error_code"], state["transaction_state"]) == (0, "CompleteAbort"), state
