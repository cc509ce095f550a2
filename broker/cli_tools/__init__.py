"""``minikafka topic|produce|consume|group|schema ...``: a command line like rpk or kcat.

``schema`` is a client of a schema registry's REST API (urllib), not of Kafka.

These commands are Kafka clients: they speak the Kafka protocol through confluent-kafka
(librdkafka), never import broker internals, and so work against any Kafka cluster
(``--bootstrap``, ``-X name=value`` for any librdkafka setting such as security options).

Exit codes: 0 success, 1 the operation failed (a Kafka error, some records not delivered),
2 bad arguments, 3 the cluster could not be reached in time.  Errors are one line on stderr.
"""

from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line naming the problem (not the whole usage), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", OneLineParser)
        return super().add_subparsers(**kwargs)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register every client command with the ``minikafka`` parser."""
    from . import consume, group, produce, schema, topic

    saved = sub._parser_class
    sub._parser_class = OneLineParser  # only these commands; `serve` keeps argparse's usage output
    try:
        for module in (topic, produce, consume, group, schema):
            module.add_parser(sub)
    finally:
        sub._parser_class = saved
