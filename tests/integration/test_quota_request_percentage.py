"""A request_percentage quota on a raw connection: responses carry throttle_time_ms, and the
broker holds the connection (KIP-219 versions) or the response (older versions) that long."""

from __future__ import annotations

import time

import pytest

from conftest import RawClient, start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "broker-wide quota.window.num=2 on a broker of its own"))]

METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("quota-request"), quota_window_num=2)
    yield handle
    handle.stop()


def set_quota(c: RawClient, client_id: str, value: float | None) -> None:
    body = {"validate_only": False, "entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": client_id}],
        "ops": [{"key": "request_percentage", "value": value or 0.0, "remove": value is None}]}]}
    assert c.request(49, 1, body)["entries"][0]["error_code"] == 0


def test_request_percentage_throttles_and_mutes(broker):
    with RawClient(broker.port, client_id="admin") as admin:
        set_quota(admin, "busy-client", 0.001)  # 10 us of loop time per second
        described = admin.request(48, 1, {"components": [
            {"entity_type": "client-id", "match_type": 0, "match": "busy-client"}], "strict": True})
        assert described["entries"][0]["values"] == [{"key": "request_percentage", "value": 0.001}]
    try:
        with RawClient(broker.port, client_id="busy-client") as c:
            throttles = [c.request(3, 12, METADATA_ALL)["throttle_time_ms"] for _ in range(3)]
            assert max(throttles) > 0
            # the request quota's throttle is capped at one window (1 s): the next request on this
            # connection is not read until the mute ends
            t0 = time.monotonic()
            c.request(3, 12, METADATA_ALL)
            assert time.monotonic() - t0 >= 0.3
            # a version before KIP-219 (Metadata v5): the broker delays the response itself
            t0 = time.monotonic()
            r = c.request(3, 5, METADATA_ALL)
            assert r["throttle_time_ms"] > 0 and time.monotonic() - t0 >= r["throttle_time_ms"] / 1000 - 0.05
        with RawClient(broker.port, client_id="someone-else") as other:
            assert other.request(3, 12, METADATA_ALL)["throttle_time_ms"] == 0
    finally:
        with RawClient(broker.port, client_id="admin") as admin:
            set_quota(admin, "busy-client", None)
