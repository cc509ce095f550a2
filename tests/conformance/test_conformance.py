"""Differential conformance against Apache Kafka 4.2 (see tests/conformance/__init__.py).

One session-scoped Apache Kafka (tests/conftest.py ``apache_kafka``) and one minikafka; the whole
corpus runs once; conformance-report.md is written at the repository root.  Fails when any
difference is neither equal nor explained by allowed.toml, or when a scenario errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import engine
from conformance.brokers import ACL_CONFIG, as_targets, kafka_runner, start_minikafka
from conformance.normalize import Placeholders, normalize

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def minikafka_broker():
    broker = start_minikafka()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def acl_pair(apache_kafka, tmp_path_factory):
    """Apache Kafka and minikafka with an authorizer (the "acl" scenarios)."""
    kafka = kafka_runner.KafkaBroker(tmp_path_factory.mktemp("apache-kafka-acl"), ACL_CONFIG).start()
    try:
        mk = start_minikafka(ACL_CONFIG)
    except BaseException:
        kafka.stop()
        raise
    yield as_targets(kafka, mk)
    mk.stop()
    kafka.stop()


def test_corpus_has_no_unexplained_difference(apache_kafka, minikafka_broker, acl_pair):
    result = engine.run(*as_targets(apache_kafka, minikafka_broker), acl=acl_pair)
    engine.write_report(result, REPO / "conformance-report.md", kafka_version=kafka_runner.kafka_version())
    print(result.summary())
    unexplained = [f"{engine.api_name(v.api_key)} v{v.version} {v.scenario} / {v.label}: {p}: kafka={kv!r} "
                   f"minikafka={mv!r}" for v in result.verdicts if v.verdict == "unexplained"
                   for p, kv, mv, rule in v.diffs if rule is None]
    assert not result.errors, "\n".join(result.errors)
    assert not unexplained, result.summary() + "\n" + "\n".join(unexplained[:60])
    n, e, a, u = result.counts()
    assert n > 1000 and e > n // 2  # the corpus really ran and mostly agrees


def test_every_allowed_difference_has_a_reason_and_a_known_section():
    rules = engine.load_rules()
    assert rules
    for rule in rules:
        assert rule.reason.strip(), rule.id
        assert rule.section in {"deliberate", "wording", "issue_20", "known_defect"}, rule.id


def test_normalisation_numbers_identities_in_order_of_appearance():
    import uuid

    ph = Placeholders()
    a, b = uuid.uuid4(), uuid.uuid4()
    body = {"topics": [{"name": "x", "topic_id": a}, {"name": "y", "topic_id": b}],
            "producer_id": 4711, "throttle_time_ms": 12, "member_id": "c-1", "leader": "c-1",
            "timestamp": 1700000000000, "log_append_time_ms": -1}
    out = normalize(body, ph)
    assert out["topics"] == {"name=x": {"name": "x", "topic_id": "<topic-id-1>"},
                             "name=y": {"name": "y", "topic_id": "<topic-id-2>"}}
    assert out["producer_id"] == "<pid-1>" and out["throttle_time_ms"] == "<throttle>"
    assert out["member_id"] == out["leader"] == "<member-1>"
    assert out["timestamp"] == "<time>" and out["log_append_time_ms"] == -1
    # A different identity is a different placeholder: "same as before" still compares.
    assert normalize({"topic_id": b}, ph)["topic_id"] == "<topic-id-2>"


def test_classification_uses_the_allowed_rules():
    rule = engine.Rule(id="r", reason="because", section="wording", path="body/error_message",
                       kafka="a*", has_kafka=True)
    ex = engine.Exchange("s", "l", 3, 1, None, {"outcome": "response", "body": {"error_message": "abc"}})
    other = engine.Exchange("s", "l", 3, 1, None, {"outcome": "response", "body": {"error_message": "xyz"}})
    assert engine.classify(ex, ex, [rule]).verdict == "equal"
    assert engine.classify(ex, other, [rule]).verdict == "allowed"
    assert engine.classify(other, ex, [rule]).verdict == "unexplained"
    assert engine.classify(ex, None, [rule]).verdict == "unexplained"
