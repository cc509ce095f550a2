"""``minikafka serve`` / ``python -m minikafka serve``: run the broker until SIGINT or SIGTERM.

Once the listening socket accepts connections these lines are printed on stdout::

    minikafka listener PLAINTEXT PLAINTEXT on 127.0.0.1:PORT    (one per listener)
    minikafka http on 127.0.0.1:PORT                            (with http.port set)
    minikafka ready on 127.0.0.1:PORT

(with the real port when ``--port 0`` asked for a free one), which scripts and tests wait for.
Only this command writes to stdout; the broker itself (``broker.server.Broker``, the embedded
broker) logs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

from .config import BROKER_SETTINGS, BrokerConfig, ConfigError, env_name

log = logging.getLogger("minikafka")

_EPILOG = """\
Precedence: defaults < --config-file (TOML) < environment < command line.

Every Kafka broker setting below can be given as --override NAME=VALUE (repeatable),
as an environment variable MINIKAFKA_<NAME> with dots as underscores in upper case
(e.g. MINIKAFKA_MESSAGE_MAX_BYTES=2000000), or as a key of the TOML file
(e.g. "auto.create.topics.enable" = false; dotted tables work too).
The flags --host, --port, --advertised-host, --advertised-port, --data-dir, --node-id
and --log-level have environment variables MINIKAFKA_HOST, MINIKAFKA_PORT, ... too.

Kafka settings (name, type, default: description):
"""


def _settings_help() -> str:
    lines = []
    for setting in sorted(BROKER_SETTINGS.values(), key=lambda s: s.name):
        default = setting.default
        if isinstance(default, bool):
            default = str(default).lower()
        lines.append(f"  {setting.name} ({setting.type}, default {default}): {setting.doc}")
    return "\n".join(lines)


def _terminal_columns() -> int:
    """What ``shutil.get_terminal_size`` says, without importing shutil."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter with the terminal's width found without ``shutil``: argparse imports
    it for that alone, with bz2 and lzma behind it (~0.5 MB and a few ms of every start; the
    parser makes a formatter for each argument it is given)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


class _RawFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    pass


class _ServeParser(argparse.ArgumentParser):
    """The ``serve`` parser; its epilog (every Kafka setting) is written only when help is asked
    for, not on each start."""

    def format_help(self) -> str:
        if self.epilog is None:
            self.epilog = _EPILOG + _settings_help()
        return super().format_help()


def build_parser(serve_only: bool = False) -> argparse.ArgumentParser:
    """The ``minikafka`` parser.  ``serve_only`` leaves out the other commands, whose modules
    (security tools, the Kafka client commands and their librdkafka) a broker start does not
    need; ``serve`` parses the same either way."""
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka broker in Python.",
                                     formatter_class=_Formatter)
    sub = parser.add_subparsers(dest="command")
    sub._parser_class, saved = _ServeParser, sub._parser_class
    serve = sub.add_parser(
        "serve", help="run the broker",
        description="Run a single-node Kafka broker that real Kafka clients use unchanged.",
        formatter_class=_RawFormatter)
    sub._parser_class = saved
    add_serve_arguments(serve)
    if serve_only:
        return parser
    from .security.cli import add_parsers as add_security_parsers  # certs, users (issue 12)
    add_security_parsers(sub)
    from .cli_tools import add_commands  # topic, produce, consume, group: Kafka clients (issue 13)
    add_commands(sub)
    return parser


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", default=None,
                       help="address to bind (default 127.0.0.1; 0.0.0.0 for all interfaces)")
    serve.add_argument("--port", type=int, default=None,
                       help="port to bind (default 9092; 0 binds a free port and prints it)")
    serve.add_argument("--advertised-host", default=None,
                       help="host clients are told to connect to in Metadata (default: the bind "
                            "address, or 127.0.0.1 when binding 0.0.0.0)")
    serve.add_argument("--advertised-port", type=int, default=None,
                       help="port clients are told to connect to (default: the bound port)")
    serve.add_argument("--data-dir", default=None,
                       help="directory for topic logs and metadata (Kafka: log.dirs; default ./data)")
    serve.add_argument("--node-id", type=int, default=None, help="broker node id (Kafka: node.id; default 1)")
    serve.add_argument("--config-file", default=None, help="TOML file of settings (Kafka names as keys)")
    serve.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                       help="set any Kafka setting listed below (repeatable)")
    serve.add_argument("--log-level", default=None,
                       help="DEBUG, INFO (default), WARNING or ERROR; DEBUG logs every request")
    serve.add_argument("--seed", action="append", default=[], metavar="FILE",
                       help="JSON lines of topics to create and records to preload before the ready "
                            "line (repeatable; see broker/seed.py for the format)")


def config_from_args(args: argparse.Namespace, environ=None) -> BrokerConfig:
    overrides = {}
    for item in args.override:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--override expects NAME=VALUE, got {item!r}")
        overrides[name.strip()] = value
    fields = {"host": args.host, "port": args.port, "advertised_host": args.advertised_host,
              "advertised_port": args.advertised_port, "data_dir": args.data_dir,
              "node_id": args.node_id, "log_level": args.log_level}
    return BrokerConfig.load(config_file=args.config_file, environ=environ, fields=fields,
                             overrides=overrides)


def _new_loop_factory():
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop, "asyncio"
    return uvloop.new_event_loop, "uvloop"


async def _serve(config: BrokerConfig, loop_name: str, seed_items: list | None = None) -> int:
    from .server import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):
            signal.signal(signum, lambda *_: loop.call_soon_threadsafe(stop.set))
    t0 = time.monotonic()
    await broker.start()
    if seed_items:
        from . import seed

        try:
            seed.apply(broker, seed_items)
        except seed.SeedError as exc:
            sys.stderr.write(f"minikafka: --seed: {exc}\n")
            await asyncio.wait_for(broker.stop(), timeout=5.0)
            return 2
    host, _ = config.advertised
    bind_host = config.host if config.host not in ("0.0.0.0", "::", "") else host
    log.info("started in %.0f ms on %s (%s), data in %s, advertised %s:%d", (time.monotonic() - t0) * 1000,
             loop_name, f"{config.host}:{broker.bound_port}", os.path.abspath(config.data_dir),
             *config.advertised)
    for item in broker.listeners:
        sys.stdout.write(f"minikafka listener {item.name} {item.security_protocol} on {item.host}:{item.port}\n")
    if broker.http is not None:
        sys.stdout.write(f"minikafka http on {broker.http.host}:{broker.http.port}\n")
    if broker.schema_registry is not None:
        sys.stdout.write(f"minikafka schema registry on {broker.schema_registry.url}\n")
    sys.stdout.write(f"minikafka ready on {bind_host}:{broker.bound_port}\n")
    sys.stdout.flush()
    await stop.wait()
    log.info("shutting down")
    try:
        await asyncio.wait_for(broker.stop(), timeout=5.0)
    except asyncio.TimeoutError:
        log.error("shutdown did not finish in 5 s")
        return 1
    log.info("stopped cleanly")
    return 0


def serve(config: BrokerConfig, seed_items: list | None = None) -> int:
    logging.basicConfig(level=getattr(logging, str(config.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    factory, loop_name = _new_loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_serve(config, loop_name, seed_items))


def _open_storage(config):
    """A stopped broker's storage, for ``minikafka users --data-dir`` (the controller loads only then)."""
    from .controller import open_storage

    return open_storage(config)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["serve"]  # `python -m minikafka` with no arguments serves with defaults
    serving = argv[0] == "serve"
    parser = build_parser(serve_only=serving)
    args = parser.parse_args(argv)
    if not serving:
        from .security.cli import run as run_security_command
        if (code := run_security_command(args, _open_storage)) is not None:
            return code
        if getattr(args, "run", None) is not None:
            return args.run(args)
    if args.command != "serve":
        parser.print_help()
        return 2
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        parser.exit(2, f"minikafka: {exc}\n")
    seed_items = []
    if args.seed:
        from .seed import SeedError, load_file

        try:
            for path in args.seed:
                seed_items += load_file(path)
        except (OSError, SeedError) as exc:
            parser.exit(2, f"minikafka: --seed: {exc}\n")
    try:
        return serve(config, seed_items)
    except OSError as exc:
        print(f"minikafka: cannot start: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # broker.server.HandlerModuleError: an API family is missing
        print(f"minikafka: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
