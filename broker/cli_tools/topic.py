"""``minikafka topic create|list|describe|delete|alter-config``."""

from __future__ import annotations

import argparse

from .common import USAGE, CliError, add_client_args, admin, emit, parse_pairs, runner, table, wait

INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}


def add_parser(sub) -> None:
    topic = sub.add_parser("topic", help="create, list, describe, delete topics; change their configs")
    verbs = topic.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("create", help="create topics")
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1, help="partitions (default: the broker's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1, help="replicas (default: the broker's)")
    p.add_argument("-c", "--config", action="append", default=[], metavar="NAME=VALUE", help="topic config (repeatable)")
    add_client_args(p)
    p.set_defaults(run=runner(create))

    p = verbs.add_parser("list", help="list topics")
    p.add_argument("-i", "--internal", action="store_true", help="include internal topics")
    add_client_args(p)
    p.set_defaults(run=runner(list_topics))

    p = verbs.add_parser("describe", help="partitions (log start, high watermark, LSO) and configs with sources")
    p.add_argument("names", nargs="+", metavar="TOPIC")
    add_client_args(p)
    p.set_defaults(run=runner(describe))

    p = verbs.add_parser("delete", help="delete topics")
    p.add_argument("names", nargs="+", metavar="TOPIC")
    add_client_args(p)
    p.set_defaults(run=runner(delete))

    p = verbs.add_parser("alter-config", help="set or delete topic config overrides (incremental)")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE", help="set an override")
    p.add_argument("-d", "--delete", action="append", default=[], metavar="NAME", help="remove an override")
    add_client_args(p)
    p.set_defaults(run=runner(alter_config))


def create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = dict(parse_pairs(args.config, "--config"))
    client = admin(args)
    new = [NewTopic(name, num_partitions=args.partitions, replication_factor=args.replication_factor,
                    config=configs) for name in args.names]
    futures = client.create_topics(new, request_timeout=args.timeout)
    for name in args.names:
        wait(futures[name], args, f"cannot create topic {name}")
    emit(args, {"created": args.names}, lambda: print("\n".join(f"created {n}" for n in args.names)))
    return 0


def list_topics(args: argparse.Namespace) -> int:
    client = admin(args)
    md = client.list_topics(timeout=args.timeout)
    rows = []
    for name in sorted(md.topics):
        if name in INTERNAL_TOPICS and not args.internal:
            continue
        rows.append({"name": name, "partitions": len(md.topics[name].partitions),
                     "internal": name in INTERNAL_TOPICS})
    emit(args, rows, lambda: table([[r["name"], r["partitions"]] for r in rows], ["NAME", "PARTITIONS"]))
    return 0


def _offsets(client, partitions, spec, args, isolation=None) -> dict:
    if not partitions:
        return {}
    kwargs = {"request_timeout": args.timeout}
    if isolation is not None:
        kwargs["isolation_level"] = isolation
    futures = client.list_offsets({tp: spec for tp in partitions}, **kwargs)
    return {(tp.topic, tp.partition): wait(f, args, f"cannot list offsets of {tp.topic}-{tp.partition}").offset
            for tp, f in futures.items()}


def partition_offsets(client, md, topics: list[str], args) -> dict:
    """{(topic, partition): (log start, high watermark, last stable offset)}."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tps = [TopicPartition(t, p) for t in topics for p in sorted(md.topics[t].partitions)]
    start = _offsets(client, tps, OffsetSpec.earliest(), args)
    hw = _offsets(client, tps, OffsetSpec.latest(), args, IsolationLevel.READ_UNCOMMITTED)
    lso = _offsets(client, tps, OffsetSpec.latest(), args, IsolationLevel.READ_COMMITTED)
    return {k: (start[k], hw[k], lso[k]) for k in start}


def describe(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType

    client = admin(args)
    md = client.list_topics(timeout=args.timeout)
    missing = [n for n in args.names if n not in md.topics or md.topics[n].error is not None]
    if missing:
        raise CliError(f"unknown topic: {', '.join(missing)}")
    offsets = partition_offsets(client, md, args.names, args)
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in args.names]
    config_futures = client.describe_configs(resources, request_timeout=args.timeout)
    result = []
    for resource, future in config_futures.items():
        entries = wait(future, args, f"cannot describe configs of {resource.name}")
        name = resource.name
        parts = []
        for p, pm in sorted(md.topics[name].partitions.items()):
            start, hw, lso = offsets[(name, p)]
            parts.append({"partition": p, "leader": pm.leader, "replicas": list(pm.replicas), "isr": list(pm.isrs),
                          "log_start_offset": start, "high_watermark": hw, "last_stable_offset": lso})
        configs = [{"name": e.name, "value": None if e.is_sensitive else e.value,
                    "source": _source_name(e.source), "read_only": e.is_read_only, "sensitive": e.is_sensitive}
                   for e in sorted(entries.values(), key=lambda e: e.name)]
        result.append({"name": name, "partitions": parts, "configs": configs})
    result.sort(key=lambda t: args.names.index(t["name"]))

    def human() -> None:
        for i, t in enumerate(result):
            if i:
                print()
            print(f"TOPIC {t['name']}  ({len(t['partitions'])} partitions)\n")
            table([[p["partition"], p["leader"], ",".join(map(str, p["replicas"])), p["log_start_offset"],
                    p["high_watermark"], p["last_stable_offset"]] for p in t["partitions"]],
                  ["PARTITION", "LEADER", "REPLICAS", "LOG-START", "HIGH-WATERMARK", "LSO"])
            print()
            table([[c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"]] for c in t["configs"]],
                  ["CONFIG", "VALUE", "SOURCE"])

    emit(args, result if len(result) > 1 else result[0], human)
    return 0


def _source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def delete(args: argparse.Namespace) -> int:
    client = admin(args)
    futures = client.delete_topics(args.names, request_timeout=args.timeout)
    for name in args.names:
        wait(futures[name], args, f"cannot delete topic {name}")
    emit(args, {"deleted": args.names}, lambda: print("\n".join(f"deleted {n}" for n in args.names)))
    return 0


def alter_config(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    changes = parse_pairs(args.set, "--set")
    if not changes and not args.delete:
        raise CliError("nothing to change: give --set NAME=VALUE or --delete NAME", USAGE)
    entries = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in changes]
    entries += [ConfigEntry(n, None, incremental_operation=AlterConfigOpType.DELETE) for n in args.delete]
    client = admin(args)
    resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
    futures = client.incremental_alter_configs([resource], request_timeout=args.timeout)
    for future in futures.values():
        wait(future, args, f"cannot alter configs of {args.name}")
    data = {"topic": args.name, "set": dict(changes), "deleted": args.delete}
    emit(args, data, lambda: print(f"altered {args.name}: "
                                   + ", ".join([f"{n}={v}" for n, v in changes] + [f"-{n}" for n in args.delete])))
    return 0
