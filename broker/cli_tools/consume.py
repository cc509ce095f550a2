"""``minikafka consume TOPIC``: records as text, JSON lines or a kcat-like format string.

Without ``--group`` the partitions are assigned directly (nothing is committed); with it the
consumer joins the group and commits.  Without ``--follow`` it stops once every partition it reads
has reached its end (kcat -e), or after ``--count`` records.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time

from .common import USAGE, CliError, add_client_args, check_reachable, client_config, runner

FORMAT_HELP = ("kcat-like format: %%t topic, %%p partition, %%o offset, %%k key, %%s value, %%T timestamp (ms), "
               "%%h headers, %%K key length, %%S value length, \\n \\t")


def add_parser(sub) -> None:
    p = sub.add_parser("consume", help="print records of a topic")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-o", "--offset", default=None,
                   help="where to start: beginning, end, an offset N, or -N (N before the end); "
                        "default beginning (with --group: the committed offset, else beginning)")
    p.add_argument("-t", "--timestamp", default=None,
                   help="start at the first record at or after this time (epoch ms or ISO 8601 datetime)")
    p.add_argument("-p", "--partition", type=int, action="append", default=None, help="only these partitions")
    p.add_argument("-g", "--group", default=None, help="consume as a member of this group (commits offsets)")
    p.add_argument("-n", "--count", type=int, default=None, help="stop after this many records")
    p.add_argument("-f", "--follow", action="store_true", help="keep waiting for new records")
    p.add_argument("--format", default="text",
                   help="text (default: the value), json (one object per line), or a format string: " + FORMAT_HELP)
    add_client_args(p, json_output=False)
    p.set_defaults(run=runner(consume))


def parse_time(text: str) -> int:
    """Epoch milliseconds from digits or an ISO 8601 datetime (local time when no zone is given)."""
    from datetime import datetime

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"bad time {text!r}: give epoch milliseconds or an ISO 8601 datetime", USAGE) from None
    return int(dt.timestamp() * 1000)


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


def _json_bytes(data: bytes | None):
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def formatter(fmt: str):
    if fmt == "text":
        return lambda m: _text(m.value()) + "\n"
    if fmt == "json":
        def as_json(m) -> str:
            ts_type, ts = m.timestamp()
            return json.dumps({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                               "timestamp": ts if ts_type else None, "key": _json_bytes(m.key()),
                               "value": _json_bytes(m.value()),
                               "headers": [[k, _json_bytes(v)] for k, v in (m.headers() or [])]}) + "\n"
        return as_json
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    fields = {
        "t": lambda m: m.topic(), "p": lambda m: str(m.partition()), "o": lambda m: str(m.offset()),
        "k": lambda m: _text(m.key()), "s": lambda m: _text(m.value()), "T": lambda m: str(m.timestamp()[1]),
        "h": lambda m: ",".join(f"{k}={_text(v)}" for k, v in (m.headers() or [])),
        "K": lambda m: str(len(m.key() or b"")), "S": lambda m: str(len(m.value() or b"")),
        "%": lambda m: "%",
    }
    parts: list = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            f = fields.get(fmt[i + 1])
            if f is None:
                raise CliError(f"unknown format field %{fmt[i + 1]}", USAGE)
            parts.append(f)
            i += 2
        else:
            parts.append(c)
            i += 1
    return lambda m: "".join(p if isinstance(p, str) else p(m) for p in parts)


def _start_offset(spec: str | None, lo: int, hi: int) -> int:
    if spec is None or spec == "beginning":
        return lo
    if spec == "end":
        return hi
    try:
        n = int(spec)
    except ValueError:
        raise CliError(f"bad --offset {spec!r}: give beginning, end, N or -N", USAGE) from None
    return max(lo, hi + n) if n < 0 else n


def consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    fmt = formatter(args.format)
    if args.offset is not None and args.timestamp is not None:
        raise CliError("give --offset or --timestamp, not both", USAGE)
    if args.count is not None and args.count < 0:
        raise CliError("--count must be >= 0", USAGE)
    start_ts = parse_time(args.timestamp) if args.timestamp is not None else None
    extra = {"enable.partition.eof": True, "auto.offset.reset": "earliest"}
    if args.group:
        extra.update({"group.id": args.group, "enable.auto.commit": True})
    else:
        extra.update({"group.id": "minikafka-cli-unused", "enable.auto.commit": False})
    try:
        consumer = Consumer(client_config(args, **extra))
    except KafkaException as exc:
        raise CliError(f"bad client settings: {exc}", USAGE) from None
    try:
        md = check_reachable(consumer, args)
        tmd = md.topics.get(args.topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            raise CliError(f"unknown topic: {args.topic}")
        partitions = sorted(tmd.partitions) if args.partition is None else args.partition
        bad = [p for p in partitions if p not in tmd.partitions]
        if bad:
            raise CliError(f"topic {args.topic} has no partition {bad[0]}")

        def positioned(tps: list) -> list:
            """Set start positions per --offset/--timestamp (only when one was asked for with a group)."""
            if start_ts is not None:
                found = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, start_ts) for tp in tps],
                                                   timeout=args.timeout)
                out = []
                for tp in found:
                    if tp.offset < 0:  # no record that late: start at the end
                        tp.offset = consumer.get_watermark_offsets(tp, timeout=args.timeout)[1]
                    out.append(tp)
                return out
            out = []
            for tp in tps:
                lo, hi = consumer.get_watermark_offsets(tp, timeout=args.timeout)
                out.append(TopicPartition(tp.topic, tp.partition, _start_offset(args.offset, lo, hi)))
            return out

        active: set[int] = set()
        if args.group:
            explicit = args.offset is not None or start_ts is not None

            def on_assign(c, tps):
                active.update(tp.partition for tp in tps)
                if explicit:
                    c.assign(positioned(tps))

            def on_revoke(c, tps):
                active.difference_update(tp.partition for tp in tps)

            consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
        else:
            consumer.assign(positioned([TopicPartition(args.topic, p) for p in partitions]))
            active.update(partitions)
        at_end: set[int] = set()
        seen = 0
        out = sys.stdout
        deadline = time.monotonic() + args.timeout  # a group must get an assignment in time
        while args.count is None or seen < args.count:
            msg = consumer.poll(0.5)
            if msg is None:
                if args.group and not active and not args.follow and time.monotonic() > deadline:
                    raise CliError(f"no partitions assigned in group {args.group} within {args.timeout:g} s")
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    if not args.follow and active and active <= at_end:
                        break
                    continue
                raise CliError(f"consume failed: {err.name()}: {err.str()}")
            at_end.discard(msg.partition())
            out.write(fmt(msg))
            seen += 1
        out.flush()
        if args.group:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise CliError(f"commit failed: {exc}") from None
    finally:
        consumer.close()
    return 0
