"""When does a classic group's first generation form? (evidence for librdkafka 0102/0118, issue 20)

    .venv/bin/python bench/suites/join_probe.py PORT      (from the repository root)

Two members join with an empty member id (JoinGroup v5: MEMBER_ID_REQUIRED), the first rejoins
with its id at once, the second one second later; prints each JoinGroup answer (generation,
members seen) and how long it took.  Run against minikafka and Apache Kafka 4.2 with
group.initial.rebalance.delay.ms=0 (bench/suites/brokers.py start DIR).
"""
import sys, time, threading
sys.path.insert(0, ".")
from tests.conformance.wire import Conn
port = int(sys.argv[1]); g = f"probe-{time.time_ns()}"
def join(c, mid, timeout=8.0):
    t = time.monotonic()
    r = c.call(11, 5, {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 4000,
                       "member_id": mid, "group_instance_id": None, "protocol_type": "consumer",
                       "protocols": [{"name": "range", "metadata": b""}]}, timeout=timeout)
    return r, time.monotonic() - t
a, b = Conn("127.0.0.1", port), Conn("127.0.0.1", port)
for _ in range(100):
    fc = a.call(10, 3, {"key": g, "key_type": 0})
    if fc["error_code"] == 0:
        break
    time.sleep(0.2)
for _ in range(100):
    r0, _ = join(a, "")
    if r0["error_code"] == 79:
        break
    time.sleep(0.2)
ra, _ = join(a, ""); rb, _ = join(b, "")
print("first joins:", ra["error_code"], rb["error_code"])
res = {}
def rejoin(name, c, mid):
    res[name] = join(c, mid)
ta = threading.Thread(target=rejoin, args=("a", a, ra["member_id"])); ta.start()
time.sleep(1.0)   # b rejoins one second later
tb = threading.Thread(target=rejoin, args=("b", b, rb["member_id"])); tb.start()
ta.join(); tb.join()
for n in "ab":
    r, dt = res[n]
    print(n, "error", r.get("error_code"), "gen", r.get("generation_id"), "members", len(r.get("members") or []), f"after {dt:.2f}s")
