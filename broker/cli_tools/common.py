"""What every client command shares: connection flags, client settings, output and errors."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Iterable

OK, FAILED, USAGE, UNREACHABLE = 0, 1, 2, 3
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class CliError(Exception):
    """One line for the user and the exit code that goes with it."""

    def __init__(self, message: str, code: int = FAILED):
        super().__init__(message)
        self.code = code


def add_client_args(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    parser.add_argument("-b", "--bootstrap", default=os.environ.get("MINIKAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help=f"host:port of the cluster (env MINIKAFKA_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("-X", dest="client_settings", action="append", default=[], metavar="NAME=VALUE",
                        help="any librdkafka client setting, e.g. -X security.protocol=SASL_SSL (repeatable)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the cluster (default 10)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        # librdkafka logs connection failures itself, several lines each; the command reports
        # one line instead.  -X log_level=7 brings the client's own logs back.
        "log_level": 0,
        "client.id": "minikafka-cli",
    }
    # librdkafka tells why a connection failed (bad credentials, TLS) only through error_cb; the
    # one line the command prints should say that rather than a generic transport failure.
    errors = getattr(args, "client_errors", None)
    if errors is None:
        errors = args.client_errors = []
    config["error_cb"] = errors.append
    config.update(extra)
    for item in args.client_settings:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"-X expects NAME=VALUE, got {item!r}", USAGE)
        config[name.strip()] = value
    return config


def parse_pairs(items: Iterable[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"{flag} expects NAME=VALUE, got {item!r}", USAGE)
        out.append((name, value))
    return out


def admin(args: argparse.Namespace):
    from confluent_kafka.admin import AdminClient

    try:
        client = AdminClient(client_config(args))
    except Exception as exc:  # a bad -X setting
        raise CliError(f"bad client settings: {_kafka_message(exc)}", USAGE) from None
    check_reachable(client, args)
    return client


def check_reachable(client, args: argparse.Namespace):
    """Metadata of the cluster; CliError(FAILED) as soon as the cluster refuses the credentials,
    CliError(UNREACHABLE) after ``--timeout`` seconds otherwise."""
    import time

    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + args.timeout
    while True:
        step = max(min(0.5, deadline - time.monotonic()), 0.01)
        try:
            return client.list_topics(timeout=step)
        except KafkaException as exc:
            # error_cb runs only when the client serves its callbacks; nothing is assigned or
            # queued yet, so this poll delivers nothing else.
            client.poll(0)
            seen = getattr(args, "client_errors", [])
            auth = [e for e in seen if e.code() == KafkaError._AUTHENTICATION]
            if auth:  # the cluster answered and refused these credentials: the operation failed
                raise CliError(f"authentication failed at {args.bootstrap}: {auth[-1].str()}", FAILED) from None
            if time.monotonic() >= deadline:
                cause = f" ({seen[-1].str()})" if seen and seen[-1].str() not in str(exc) else ""
                raise CliError(f"cannot reach the cluster at {args.bootstrap}: {_kafka_message(exc)}{cause}",
                               UNREACHABLE) from None


def _kafka_message(exc: BaseException) -> str:
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "str") and hasattr(err, "name"):
        return f"{err.name()}: {err.str()}"
    return str(exc)


def wait(future, args: argparse.Namespace, what: str):
    """The result of an admin future, a Kafka error turned into one line."""
    from concurrent.futures import TimeoutError as FutureTimeout

    try:
        return future.result(timeout=args.timeout)
    except FutureTimeout:
        raise CliError(f"{what}: no answer within {args.timeout:g} s", UNREACHABLE) from None
    except Exception as exc:
        raise CliError(f"{what}: {_kafka_message(exc)}") from None


def table(rows: list[list[Any]], headers: list[str], out=None) -> None:
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def emit(args: argparse.Namespace, data: Any, human: Callable[[], None]) -> None:
    if getattr(args, "json", False):
        json.dump(data, sys.stdout, indent=None, sort_keys=False)
        sys.stdout.write("\n")
    else:
        human()


def progress(message: str) -> None:
    """Progress for long operations: stderr, only when a person is watching."""
    if sys.stderr.isatty():
        sys.stderr.write("\r" + message)
        sys.stderr.flush()


def end_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")


def runner(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: CliError -> one line on stderr and its exit code; Ctrl-C -> 130."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args) or OK
        except CliError as exc:
            sys.stderr.write(f"minikafka {args.command}: {exc}\n")
            return exc.code
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return OK

    return run
