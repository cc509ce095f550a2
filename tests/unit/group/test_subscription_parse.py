"""Consumer-protocol subscriptions are parsed as strictly as Kafka 4.2 does (tests/conformance
group_admin): a truncated one is unknown, and its group counts as subscribed to every topic."""

import struct

import pytest

from minikafka.broker.group.classic import parse_subscription_topics


def sub(version: int, topics, *, user_data=None, owned=(), generation=-1, rack=None, cut=0) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    if version >= 1:
        out += struct.pack(">i", len(owned))
        for t, parts in owned:
            out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(parts))
            out += b"".join(struct.pack(">i", p) for p in parts)
    if version >= 2:
        out += struct.pack(">i", generation)
    if version >= 3:
        out += struct.pack(">h", -1) if rack is None else struct.pack(">h", len(rack)) + rack.encode()
    return out[:len(out) - cut] if cut else out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_complete_subscriptions_parse(version):
    data = sub(version, ["a", "bb"], user_data=b"u", owned=[("a", [0, 1])], generation=4, rack="r1")
    assert parse_subscription_topics(data) == ["a", "bb"]
    assert parse_subscription_topics(data + b"\x00\x00") == ["a", "bb"]  # trailing bytes are ignored


@pytest.mark.parametrize("version,cut", [(0, 4), (1, 4), (2, 2), (3, 1)])
def test_truncated_subscriptions_are_refused(version, cut):
    with pytest.raises((ValueError, struct.error)):
        parse_subscription_topics(sub(version, ["a"], owned=[("a", [0])], rack="r", cut=cut))


def test_topics_without_user_data_are_refused():
    # What the conformance corpus's classic members send: version 1, no topics, nothing after.
    with pytest.raises((ValueError, struct.error)):
        parse_subscription_topics(b"\x00\x01\x00\x00\x00\x00")
