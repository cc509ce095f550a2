"""``minikafka group list|describe|reset-offsets|delete`` (kafka-consumer-groups.sh, rpk group).

Share groups (KIP-932) are listed and described too (``share.py``: over PLAINTEXT; with ``--http URL``
of a minikafka broker, describe adds each share partition's start offset, records in flight, acquired,
archived and lag)."""

from __future__ import annotations

import argparse

from .common import USAGE, CliError, add_client_args, admin, emit, runner, table, wait
from .consume import parse_time
from . import share


def add_parser(sub) -> None:
    group = sub.add_parser("group", help="list, describe, reset offsets of and delete consumer groups")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="list groups with their type and state")
    add_client_args(p)
    p.set_defaults(run=runner(list_groups))

    p = verbs.add_parser("describe", help="state, members, assignments, committed offsets and lag")
    p.add_argument("names", nargs="+", metavar="GROUP")
    p.add_argument("--http", default=None, metavar="URL",
                   help="a minikafka broker's HTTP server: share groups' in-flight and archived records")
    add_client_args(p)
    p.set_defaults(run=runner(describe))

    p = verbs.add_parser("reset-offsets", help="move a group's committed offsets (the group must be empty)")
    p.add_argument("name", metavar="GROUP")
    p.add_argument("-t", "--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="topic (and partitions) to reset (default: every topic the group has offsets for)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="TIME", help="epoch ms or ISO 8601 datetime")
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N (may be negative)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    add_client_args(p)
    p.set_defaults(run=runner(reset_offsets))

    p = verbs.add_parser("delete", help="delete groups (they must be empty)")
    p.add_argument("names", nargs="+", metavar="GROUP")
    add_client_args(p)
    p.set_defaults(run=runner(delete))


def _state(state) -> str:
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance",
            "STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "UNKNOWN": "Unknown"}.get(name, name)


def _type(group_type) -> str:
    name = getattr(group_type, "name", str(group_type))
    return {"CONSUMER": "consumer", "CLASSIC": "classic"}.get(name, "unknown")


def list_groups(args: argparse.Namespace) -> int:
    client = admin(args)
    result = wait(client.list_consumer_groups(request_timeout=args.timeout), args, "cannot list groups")
    rows = [{"group": g.group_id, "type": _type(getattr(g, "type", None)), "state": _state(g.state),
             "simple": bool(g.is_simple_consumer_group)} for g in result.valid]
    if share.plaintext(args):
        rows.extend({**r, "simple": False} for r in share.list_share_groups(args))
    rows.sort(key=lambda r: r["group"])
    emit(args, rows, lambda: table([[r["group"], r["type"], r["state"]] for r in rows], ["GROUP", "TYPE", "STATE"]))
    return 0


def _committed(client, name: str, args) -> dict:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)], request_timeout=args.timeout)
    result = wait(futures[name], args, f"cannot fetch offsets of group {name}")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _ends(client, keys, args, spec=None) -> dict:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not keys:
        return {}
    spec = spec or OffsetSpec.latest()
    futures = client.list_offsets({TopicPartition(t, p): spec for t, p in keys}, request_timeout=args.timeout)
    return {(tp.topic, tp.partition): wait(f, args, f"cannot list offsets of {tp.topic}-{tp.partition}").offset
            for tp, f in futures.items()}


def describe(args: argparse.Namespace) -> int:
    client = admin(args)
    shared = {}
    if share.plaintext(args):
        for name in args.names:
            described = share.describe_share_group(args, name)
            if described is not None:
                shared[name] = described
    others = [n for n in args.names if n not in shared]
    futures = client.describe_consumer_groups(others, request_timeout=args.timeout) if others else {}
    result = []
    for name in args.names:
        if name in shared:
            result.append(shared[name])
            continue
        desc = wait(futures[name], args, f"cannot describe group {name}")
        owner = {}
        members = []
        for m in desc.members:
            tps = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
            for key in tps:
                owner[key] = m
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "host": m.host,
                            "assignment": [{"topic": t, "partition": p} for t, p in tps]})
        committed = _committed(client, name, args)
        keys = sorted(set(committed) | set(owner))
        ends = _ends(client, keys, args)
        offsets = []
        for t, p in keys:
            c = committed.get((t, p))
            end = ends.get((t, p))
            m = owner.get((t, p))
            offsets.append({"topic": t, "partition": p, "committed_offset": c, "log_end_offset": end,
                            "lag": None if c is None or end is None else max(end - c, 0),
                            "member_id": m.member_id if m else None, "client_id": m.client_id if m else None,
                            "host": m.host if m else None})
        result.append({"group": name, "state": _state(desc.state), "protocol": desc.partition_assignor,
                       "coordinator": getattr(desc.coordinator, "id", None), "members": members,
                       "offsets": offsets})

    def human() -> None:
        for i, g in enumerate(result):
            if i:
                print()
            if g.get("type") == "share":
                _share_human(g)
                continue
            print(f"GROUP {g['group']}  state={g['state']}  protocol={g['protocol'] or '-'}  "
                  f"members={len(g['members'])}  total-lag={sum(o['lag'] or 0 for o in g['offsets'])}\n")
            table([[o["topic"], o["partition"], _dash(o["committed_offset"]), _dash(o["log_end_offset"]),
                    _dash(o["lag"]), o["member_id"] or "-", o["client_id"] or "-", o["host"] or "-"]
                   for o in g["offsets"]],
                  ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID", "HOST"])

    emit(args, result if len(result) > 1 else result[0], human)
    return 0


def _share_human(g: dict) -> None:
    print(f"SHARE GROUP {g['group']}  state={g['state']}  epoch={g['group_epoch']}  assignor={g['assignor']}  "
          f"members={len(g['members'])}\n")
    table([[m["member_id"], m["member_epoch"], m["client_id"], m["host"],
            ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or "-"] for m in g["members"]],
          ["MEMBER-ID", "EPOCH", "CLIENT-ID", "HOST", "ASSIGNMENT"])
    if g["partitions"]:
        print()
        table([[p["topic"], p["partition"], _dash(p.get("start_offset")), _dash(p.get("in_flight")),
                _dash(p.get("acquired")), _dash(p.get("archived")), _dash(p.get("lag"))] for p in g["partitions"]],
              ["TOPIC", "PARTITION", "START-OFFSET", "IN-FLIGHT", "ACQUIRED", "ARCHIVED", "LAG"])


def _dash(v) -> str:
    return "-" if v is None else str(v)


def _targets(client, args, committed: dict) -> list[tuple[str, int]]:
    if not args.topic:
        if not committed:
            raise CliError(f"group {args.name} has no committed offsets; name the topics with --topic")
        return sorted(committed)
    md = client.list_topics(timeout=args.timeout)
    keys = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise CliError(f"unknown topic: {topic}")
        if parts:
            try:
                wanted = [int(p) for p in parts.split(",")]
            except ValueError:
                raise CliError(f"bad --topic {item!r}: expected TOPIC or TOPIC:P,P", USAGE) from None
            missing = [p for p in wanted if p not in tmd.partitions]
            if missing:
                raise CliError(f"topic {topic} has no partition {missing[0]}")
        else:
            wanted = sorted(tmd.partitions)
        keys += [(topic, p) for p in wanted]
    return keys


def reset_offsets(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    client = admin(args)
    committed = _committed(client, args.name, args)
    keys = _targets(client, args, committed)
    starts = _ends(client, keys, args, OffsetSpec.earliest())
    ends = _ends(client, keys, args)
    if args.to_earliest:
        new = dict(starts)
    elif args.to_latest:
        new = dict(ends)
    elif args.to_offset is not None:
        new = {k: args.to_offset for k in keys}
    elif args.shift_by is not None:
        missing = [k for k in keys if k not in committed]
        if missing:
            raise CliError(f"--shift-by needs a committed offset; {missing[0][0]}-{missing[0][1]} has none")
        new = {k: committed[k] + args.shift_by for k in keys}
    else:
        ts = parse_time(args.to_datetime)
        found = _ends(client, keys, args, OffsetSpec.for_timestamp(ts))
        new = {k: (found[k] if found[k] >= 0 else ends[k]) for k in keys}
    # Kafka's tool clamps targets into [log start, log end] rather than failing.
    new = {k: min(max(v, starts[k]), ends[k]) for k, v in new.items()}
    plan = [{"topic": t, "partition": p, "current_offset": committed.get((t, p)), "new_offset": new[(t, p)]}
            for t, p in keys]
    if not args.dry_run:
        request = ConsumerGroupTopicPartitions(args.name, [TopicPartition(t, p, new[(t, p)]) for t, p in keys])
        futures = client.alter_consumer_group_offsets([request], request_timeout=args.timeout)
        result = wait(futures[args.name], args, f"cannot reset offsets of group {args.name} "
                                                f"(it must have no active members)")
        errors = [tp for tp in result.topic_partitions if tp.error is not None]
        if errors:
            raise CliError(f"cannot reset {errors[0].topic}-{errors[0].partition}: {errors[0].error.str()}")
    data = {"group": args.name, "dry_run": args.dry_run, "offsets": plan}

    def human() -> None:
        print(("plan (dry run, nothing changed)" if args.dry_run else "offsets reset") + f" for group {args.name}\n")
        table([[r["topic"], r["partition"], _dash(r["current_offset"]), r["new_offset"]] for r in plan],
              ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"])

    emit(args, data, human)
    return 0


def delete(args: argparse.Namespace) -> int:
    client = admin(args)
    futures = client.delete_consumer_groups(args.names, request_timeout=args.timeout)
    for name in args.names:
        wait(futures[name], args, f"cannot delete group {name}")
    emit(args, {"deleted": args.names}, lambda: print("\n".join(f"deleted {n}" for n in args.names)))
    return 0
