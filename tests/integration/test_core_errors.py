"""Error paths and idempotence over real sockets: raw requests built with protocol.codec and
protocol.records, a TCP proxy that loses a Produce response, and garbage frames."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from conftest import RawClient, start_broker
from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason=(
        "broker-wide message.max.bytes=4096, reads minikafka's log and restarts it; the same error "
        "paths are compared request by request in tests/conformance"))

TS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("core-errors"), message_max_bytes=4096)
    yield handle
    handle.stop()


def create(client: RawClient, topic: str, partitions: int = 1) -> None:
    body = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}
    resp = client.request(3, 12, body)
    assert resp["topics"][0]["error_code"] == 0


def produce(client: RawClient, topic: str, records, acks=-1, version=9, partition=0) -> dict:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    resp = client.request(0, version, body)
    return resp["responses"][0]["partition_responses"][0]


def latest(client: RawClient, topic: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    part = client.request(2, 7, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    return part["offset"]


def records(n=1, value=b"v", **kw):
    return bytes(build_batch([(b"k", value, [], TS + i) for i in range(n)], **kw))


def test_unknown_topic_is_not_auto_created_by_produce(shared):
    with RawClient(shared.port) as c:
        assert produce(c, "never-created", records())["error_code"] == 3
        md = c.request(3, 12, {"topics": [{"name": "never-created", "topic_id": None}],
                               "allow_auto_topic_creation": False})
        assert md["topics"][0]["error_code"] == 3
        assert produce(c, "bad name!", records())["error_code"] == 3


def test_oversized_batch_is_message_too_large(shared):
    with RawClient(shared.port) as c:
        create(c, "big")
        assert produce(c, "big", records(value=b"x" * 5000))["error_code"] == 10
        assert produce(c, "big", records(value=b"x" * 100))["error_code"] == 0
        assert latest(c, "big") == 1


def test_corrupt_batch_is_corrupt_message(shared):
    with RawClient(shared.port) as c:
        create(c, "crc")
        bad = bytearray(records(3))
        bad[-2] ^= 0x55  # inside the records: the CRC no longer matches
        assert produce(c, "crc", bytes(bad))["error_code"] == 2
        assert latest(c, "crc") == 0


def test_not_a_single_v2_batch_is_invalid_record(shared):
    with RawClient(shared.port) as c:
        create(c, "inv")
        assert produce(c, "inv", records() + records())["error_code"] == 87
        v1 = bytearray(records())
        v1[16] = 1  # magic 1
        assert produce(c, "inv", bytes(v1))["error_code"] == 87


def test_bad_acks_and_old_produce_versions(shared):
    with RawClient(shared.port) as c:
        create(c, "acks")
        assert produce(c, "acks", records(), acks=2)["error_code"] == 21
        assert latest(c, "acks") == 0
    for version in (0, 1, 2):
        # Advertised (KAFKA-18659) but never read: Kafka 4.2 answers what came before, then closes.
        with RawClient(shared.port) as c:
            first, metadata = c.encode(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
            _, old = c.encode(0, version, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "acks", "partition_data": [{"index": 0, "records": records()}]}]})
            c.send_bytes(metadata + old)  # pipelined: the Metadata answer must still arrive
            got, answer = c.read_response(3, 9)
            assert got == first and answer["brokers"]
            assert c.is_closed_by_peer()
    with RawClient(shared.port) as c:
        assert latest(c, "acks") == 0  # nothing of the old requests was stored


def test_acks0_gets_no_response_but_is_appended(shared):
    with RawClient(shared.port) as c:
        create(c, "fire")
        body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
                "topic_data": [{"name": "fire", "partition_data": [{"index": 0, "records": records(2)}]}]}
        _, data = c.encode(0, 9, body)
        c.send_bytes(data)
        # The next response on the connection belongs to the next request.
        assert latest(c, "fire") == 2


def test_failed_acks0_produce_closes_the_connection(shared):
    # Kafka's way to tell an acks=0 producer that something is wrong: it has no response to
    # carry an error code, so the broker closes the connection and the client refreshes metadata.
    with RawClient(shared.port) as c:
        body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
                "topic_data": [{"name": "no-such-topic", "partition_data": [{"index": 0, "records": records()}]}]}
        _, data = c.encode(0, 9, body)
        c.send_bytes(data)
        assert c.is_closed_by_peer()


def init_pid(c: RawClient) -> tuple[int, int]:
    resp = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                             "producer_id": -1, "producer_epoch": -1})
    assert resp["error_code"] == 0
    return resp["producer_id"], resp["producer_epoch"]


def test_resending_the_same_produce_bytes_does_not_duplicate(shared):
    with RawClient(shared.port) as c:
        create(c, "idem")
        pid, epoch = init_pid(c)
        first = records(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(c, "idem", first)["base_offset"] == 0
        second_body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "idem", "partition_data": [{"index": 0, "records": records(
                2, producer_id=pid, producer_epoch=epoch, base_sequence=3)}]}]}
        _, raw = c.encode(0, 9, second_body)
        c.send_bytes(raw)
        c.send_bytes(raw)  # the same request bytes again, as a retry after a lost response
        answers = [c.read_response(0, 9)[1]["responses"][0]["partition_responses"][0] for _ in range(2)]
        assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, 3), (0, 3)]
        assert latest(c, "idem") == 5
        gap = records(1, producer_id=pid, producer_epoch=epoch, base_sequence=9)
        assert produce(c, "idem", gap)["error_code"] == 45
        bumped = records(1, producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
        assert produce(c, "idem", bumped)["error_code"] == 0
        stale = records(1, producer_id=pid, producer_epoch=epoch, base_sequence=5)
        assert produce(c, "idem", stale)["error_code"] == 47
        assert latest(c, "idem") == 6


def test_producer_ids_and_sequences_survive_restart(tmp_path):
    handle = start_broker(tmp_path)
    try:
        with RawClient(handle.port) as c:
            create(c, "persist")
            pid, epoch = init_pid(c)
            batch = records(2, producer_id=pid, producer_epoch=epoch, base_sequence=0)
            assert produce(c, "persist", batch)["base_offset"] == 0
        handle.restart(kill=True)
        with RawClient(handle.port) as c:
            dup = produce(c, "persist", batch)
            assert (dup["error_code"], dup["base_offset"]) == (0, 0)
            assert latest(c, "persist") == 2
            assert init_pid(c)[0] > pid
    finally:
        handle.stop()


def test_garbage_frame_closes_only_its_connection(shared):
    with RawClient(shared.port) as good, RawClient(shared.port) as bad:
        create(good, "survivor")
        bad.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        bad.send_bytes(struct.pack(">i", 12) + b"\xff" * 12)  # api key -1: not a request
        assert bad.is_closed_by_peer()
        assert latest(good, "survivor") == 0
    deadline = time.monotonic() + 5
    while "closing connection" not in shared.read_log() and time.monotonic() < deadline:
        time.sleep(0.05)
    closing = [line for line in shared.read_log().splitlines() if "closing connection" in line]
    assert closing and "client_id=raw-test" in closing[0]
    with RawClient(shared.port) as huge, RawClient(shared.port) as good:
        huge.send_bytes(struct.pack(">i", 2 ** 31 - 1))  # above socket.request.max.bytes
        assert huge.is_closed_by_peer()
        assert latest(good, "survivor") == 0
    with RawClient(shared.port) as c:
        # Fetch v99 is not served: Kafka closes the connection (only ApiVersions gets an answer).
        header = struct.pack(">hhi", 1, 99, 7) + struct.pack(">h", 1) + b"x"
        c.send_bytes(struct.pack(">i", len(header)) + header)
        assert c.is_closed_by_peer()


def test_api_versions_above_our_range_gets_error_35_and_v0_body(shared):
    with RawClient(shared.port) as c:
        header = struct.pack(">hhi", 18, 77, 5) + struct.pack(">h", 4) + b"test" + b"\x00"
        c.send_bytes(struct.pack(">i", len(header)) + header)
        correlation_id, body = c.read_response(18, 0)
        assert correlation_id == 5 and body["error_code"] == 35
        assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
        # The connection stays usable.
        assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0


class LosingProxy:
    """Forwards TCP between clients and the broker, but cuts the connection instead of
    delivering the first ``drops`` Produce responses: the producer must retry, and the broker
    must recognise the retries as duplicates."""

    def __init__(self, drops: int = 1):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.target_port = None
        self.drops_left = drops
        self.dropped = 0
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                # The broker is already gone (test teardown) while the client reconnects.
                client.close()
                continue
            pending = {}
            threading.Thread(target=self._client_to_broker, args=(client, upstream, pending), daemon=True).start()
            threading.Thread(target=self._broker_to_client, args=(upstream, client, pending), daemon=True).start()

    @staticmethod
    def _frames(sock):
        buf = b""
        while True:
            while len(buf) >= 4:
                size = struct.unpack(">i", buf[:4])[0]
                if len(buf) < 4 + size:
                    break
                yield buf[:4 + size]
                buf = buf[4 + size:]
            chunk = sock.recv(65536)
            if not chunk:
                return
            buf += chunk

    def _client_to_broker(self, client, upstream, pending):
        try:
            for frame in self._frames(client):
                api_key, _, correlation_id = struct.unpack(">hhi", frame[4:12])
                pending[correlation_id] = api_key
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _broker_to_client(self, upstream, client, pending):
        try:
            for frame in self._frames(upstream):
                correlation_id = struct.unpack(">i", frame[4:8])[0]
                if pending.pop(correlation_id, None) == 0:
                    with self.lock:
                        drop = self.drops_left > 0
                        if drop:
                            self.drops_left -= 1
                            self.dropped += 1
                    if drop:
                        self._close(client, upstream)
                        return
                client.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    @staticmethod
    def _close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closed = True
        self.listener.close()


def _stored(port, topic):
    from test_core_clients import raw_batches

    return raw_batches(port, topic)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
def test_idempotent_producer_retry_after_lost_response_does_not_duplicate(tmp_path, client):
    proxy = LosingProxy(drops=1)
    handle = start_broker(tmp_path, advertised_port=proxy.port)
    proxy.target_port = handle.port
    try:
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = f"lost-{client}"
        values = [b"m%02d" % i for i in range(20)]
        if client == "kafka-python":
            from kafka import KafkaProducer

            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, retries=5,
                                     retry_backoff_ms=50, request_timeout_ms=5000)  # idempotent by default
            futures = [producer.send(topic, value=v, partition=0) for v in values]
            producer.flush(timeout=30)
            offsets = [f.get(timeout=30).offset for f in futures]
            producer.close(timeout=5)
        elif client == "aiokafka":
            import asyncio

            from aiokafka import AIOKafkaProducer

            async def run():
                producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=20,
                                            retry_backoff_ms=50, request_timeout_ms=5000)
                await producer.start()
                try:
                    futures = [await producer.send(topic, value=v, partition=0) for v in values]
                    return [(await f).offset for f in futures]
                finally:
                    await producer.stop()

            offsets = asyncio.run(asyncio.wait_for(run(), 30))
        else:
            import confluent_kafka

            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                                 "linger.ms": 20, "retry.backoff.ms": 50})
            offsets = []
            errors = []
            for v in values:
                producer.produce(topic, value=v, partition=0,
                                 on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset()))
            assert producer.flush(30) == 0
            assert not errors
        assert proxy.dropped == 1  # a Produce response really was lost
        stored = _stored(handle.port, topic)
        assert all(h.producer_id >= 0 for h, _ in stored)
        from minikafka.protocol.records import iter_records

        got = [r.value for _, data in stored for r in iter_records(data)]
        assert got == values  # every record exactly once, in order
        assert sorted(offsets) == list(range(20))
    finally:
        proxy.close()
        handle.stop()


def test_every_served_produce_fetch_and_list_offsets_version(shared):
    with RawClient(shared.port) as c:
        create(c, "versions")
        for version in range(3, 12):
            resp = produce(c, "versions", records(2, value=b"v%d" % version), version=version)
            assert (resp["error_code"], resp["base_offset"]) == (0, 2 * (version - 3)), version
        for version in range(4, 13):
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "isolation_level": 1, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": "versions", "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 4, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
            part = c.request(1, version, body)["responses"][0]["partitions"][0]
            assert part["error_code"] == 0 and part["high_watermark"] == 18, version
            assert part["aborted_transactions"] == [], version
            from minikafka.protocol.records import iter_batches

            assert [h.base_offset for _, h in iter_batches(bytes(part["records"]))][0] == 4, version
        for version in range(1, 8):
            body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "versions", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
            assert c.request(2, version, body)["topics"][0]["partitions"][0]["offset"] == 18, version
        for version in range(2, 5):
            body = {"replica_id": -1, "topics": [{"topic": "versions", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
            got = c.request(23, version, body)["topics"][0]["partitions"][0]
            assert (got["error_code"], got["end_offset"]) == (0, 18), version
        for version in range(0, 6):
            got = c.request(22, version, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                          "producer_id": -1, "producer_epoch": -1})
            assert got["error_code"] == 0 and got["producer_id"] >= 0, version
