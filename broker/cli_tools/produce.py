"""``minikafka produce TOPIC``: one record per line of stdin (kcat -P, rpk topic produce)."""

from __future__ import annotations

import argparse
import sys

from .common import FAILED, CliError, add_client_args, check_reachable, client_config, emit, end_progress, \
    parse_pairs, progress, runner


def add_parser(sub) -> None:
    p = sub.add_parser("produce", help="produce lines of stdin as records",
                       description="Each line of stdin becomes one record (the newline is not part of it).")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-k", "--key-separator", default=None, metavar="SEP",
                   help="split each line at the first SEP into key and value")
    p.add_argument("-H", "--header", action="append", default=[], metavar="NAME=VALUE",
                   help="header added to every record (repeatable)")
    p.add_argument("-p", "--partition", type=int, default=None, help="partition (default: the partitioner's)")
    p.add_argument("-z", "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    p.add_argument("--linger-ms", type=int, default=5)
    add_client_args(p)
    p.set_defaults(run=runner(produce))


def produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    headers = [(n, v.encode()) for n, v in parse_pairs(args.header, "--header")]
    config = client_config(args, **{"compression.type": args.compression, "acks": args.acks,
                                    "linger.ms": args.linger_ms, "enable.idempotence": args.acks in ("all", "-1")})
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise CliError(f"bad client settings: {exc}", 2) from None
    check_reachable(producer, args)
    stats = {"produced": 0, "failed": 0, "first_error": None}

    def delivered(err, _msg) -> None:
        if err is None:
            stats["produced"] += 1
        else:
            stats["failed"] += 1
            stats["first_error"] = stats["first_error"] or f"{err.name()}: {err.str()}"

    sep = args.key_separator.encode() if args.key_separator else None
    stdin = sys.stdin.buffer
    sent = 0
    extra = {} if args.partition is None else {"partition": args.partition}
    for line in stdin:
        line = line.rstrip(b"\n")
        key = None
        if sep is not None:
            key, found, value = line.partition(sep)
            if not found:
                key, value = None, line
        else:
            value = line
        while True:
            try:
                producer.produce(args.topic, value=value, key=key, headers=headers or None,
                                 on_delivery=delivered, **extra)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
            except KafkaException as exc:
                raise CliError(f"cannot produce to {args.topic}: {exc}") from None
        sent += 1
        producer.poll(0)
        if sent % 10000 == 0:
            progress(f"{sent} records sent, {stats['produced']} acknowledged")
    remaining = producer.flush(args.timeout)
    end_progress() if sent >= 10000 else None
    if remaining:
        stats["failed"] += remaining
        stats["first_error"] = stats["first_error"] or f"{remaining} records not acknowledged within {args.timeout:g} s"
    data = {"topic": args.topic, "produced": stats["produced"], "failed": stats["failed"]}
    emit(args, data, lambda: print(f"produced {stats['produced']} records to {args.topic}", file=sys.stderr))
    if stats["failed"]:
        raise CliError(f"{stats['failed']} of {sent} records failed: {stats['first_error']}", FAILED)
    return 0
