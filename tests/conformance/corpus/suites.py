"""Behaviours the client libraries' own suites depend on (issue 20, deliverable 6; bench/suites).

librdkafka's 0102_static_group_rebalance and 0118_commit_rebalance depend on which members are in
a classic group's first generation: two consumers join with an empty member id (both answered
MEMBER_ID_REQUIRED), one rejoins with its id before the other. Neither broker waits for the
pending member: the first generation holds the member that rejoined, the second member's rejoin
starts the next rebalance (the suites' runs differ only in how soon each broker completes the
first join, not in what it answers).
"""

from __future__ import annotations

import threading

from ..engine import scenario
from .common import find_coordinator, ok
from .groups import PROTOCOLS, join


def _join_body(group: str, member: str, rebalance_timeout: int) -> dict:
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": rebalance_timeout,
            "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": PROTOCOLS, "reason": None}


@scenario
def first_generation_with_a_pending_member(ctx):
    group = ctx.name("pending")
    find_coordinator(ctx, group)
    a = join(ctx, group, 9, conn="a", label="a joins without a member id")["member_id"]
    b = join(ctx, group, 9, conn="b", label="b joins without a member id")["member_id"]
    # a rejoins with its id while b is still pending: the join completes with a alone
    ctx.call(11, 9, _join_body(group, a, 2000), label="a rejoins, b pending", conn="a")
    ctx.setup(15, 5, {"groups": [group]}, retries=80,
              expect=lambda o: ok(o) and o["groups"][0]["group_state"] == "CompletingRebalance")
    ctx.call(15, 5, {"groups": [group]}, label="describe: generation 1 holds a only")
    # b rejoins with its id: a new rebalance that waits for a (bounded by the rebalance timeout)
    holder: dict = {}
    t = threading.Thread(target=lambda: holder.setdefault(
        "out", ctx.conn("b").call(11, 9, _join_body(group, b, 2000), timeout=20)))
    t.start()
    ctx.setup(15, 5, {"groups": [group]}, retries=80,
              expect=lambda o: ok(o) and o["groups"][0]["group_state"] == "PreparingRebalance")
    ctx.call(11, 9, _join_body(group, a, 2000), label="a rejoins for generation 2", conn="a")
    t.join(30)
    from ..wire import Outcome
    ctx.record(11, 9, holder.get("out") or Outcome("timeout"), label="b's join completes generation 2")
    ctx.call(15, 5, {"groups": [group]}, label="describe: generation 2 holds both")
