"""Write broker/kafka_configs.py: Apache Kafka 4.2's broker and group config facts.

Compiles ``java/KafkaConfigFacts.java`` against the jars of ``tests/kafka/target/libs`` (the
oracle's Kafka, ``python tests/kafka/kafka_runner.py install``), runs it, and writes the names,
types, defaults, validators and dynamic update modes it prints as a Python data module.  Only
facts are carried over (no documentation text).  Run it again when the oracle's Kafka version
changes::

    python tests/tools/kafka_config_facts.py [--out broker/kafka_configs.py]
    python tests/tools/kafka_config_facts.py --docs-only   # broker/CONFIGS.md from the table

It then writes ``broker/CONFIGS.md``: the Kafka configs minikafka describes and accepts without
acting on them (not in broker/config.py's BROKER_SETTINGS), by update mode.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "tests" / "kafka" / "target" / "libs"
SOURCE = Path(__file__).resolve().parent / "java" / "KafkaConfigFacts.java"
OUT = ROOT / "broker" / "kafka_configs.py"
DOCS = ROOT / "broker" / "CONFIGS.md"
DOCS_HEAD = """\
# Broker configs: what minikafka describes, accepts and acts on

DescribeConfigs on a BROKER resource lists every broker config Apache Kafka {version} describes
(`broker/kafka_configs.py`, generated from Kafka's own config definitions by
`tests/tools/kafka_config_facts.py`: names, types, defaults, validators and update modes), with
minikafka's own documentation. Each is accepted where Kafka accepts it: at start-up
(`--override`, TOML file) with Kafka's type and validator, and through AlterConfigs /
IncrementalAlterConfigs in Kafka's update modes (read-only, per-broker, cluster-wide) with Kafka's
refusals; dynamic values are kept in the metadata log (`config` records).

minikafka acts on {acted} of them (those in `broker/config.py` `BROKER_SETTINGS`).
The {ignored} below are described with Kafka's default (or the value given) and accepted, but
minikafka does not act on them: replication, KRaft quorum, tiered storage, JVM-side SSL/SASL
(Kerberos, SSL engine, key managers), thread pools and buffers of Kafka's own implementation, quotas
callbacks, metrics reporters. Listener and security settings changed dynamically (per-broker, or
`listener.name.<l>.*`) are kept and described; minikafka builds its listeners and TLS contexts at
start, so they take effect after a restart only if also given as static settings.

Deliberate defaults that differ from Kafka's (described as minikafka runs): `group.initial.rebalance.delay.ms`
0, `offsets.topic.replication.factor` 1, `queued.max.request.bytes` 268435456, `ssl.keystore.type` and
`ssl.truststore.type` PEM, `group.coordinator.rebalance.protocols` classic,consumer (no streams groups yet).

Not acted on (update mode in the heading):
"""

_RANGE = re.compile(r"\[(-?[0-9.E]+)?,\.\.\.(?:,(-?[0-9.E]+))?\]")


def _number(text: str | None):
    if text is None:
        return None
    return float(text) if any(c in text for c in ".E") else int(text)


def validator(fact: dict):
    """The validator as data: ("range", lo, hi), ("in", values), ("in_ci", values),
    ("list_in", values), ("non_empty",), ("gzip_level",) or None."""
    kind, text = fact.get("validator_class"), fact.get("validator")
    if kind == "Range":
        m = _RANGE.fullmatch(text or "")
        if not m:
            raise SystemExit(f"cannot read range {text!r} of {fact['name']}")
        return ("range", _number(m.group(1)), _number(m.group(2)))
    if kind in ("ValidString", "CaseInsensitiveValidString", "ValidList"):
        text = (text or "").replace("(case insensitive) ", "")
        values = tuple(v for v in text.strip("[]").split(", ") if v)
        if not values:
            return None
        return ({"ValidString": "in", "CaseInsensitiveValidString": "in_ci", "ValidList": "list_in"}[kind], values)
    if kind == "NonEmptyString":
        return ("non_empty",)
    if kind == "LambdaValidator" and fact["name"] == "compression.gzip.level":
        return ("gzip_level",)
    return None


def facts() -> list[dict]:
    jars = sorted(LIBS.glob("*.jar"))
    if not jars:
        raise SystemExit(f"no Kafka jars in {LIBS}: run python tests/kafka/kafka_runner.py install")
    cp = ":".join(str(j) for j in jars)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-d", tmp, "-cp", cp, str(SOURCE)], check=True)
        out = subprocess.run(["java", "-cp", f"{cp}:{tmp}", "KafkaConfigFacts"], check=True,
                             capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def render(rows: list[dict], version: str) -> str:
    lines = [
        f'"""Apache Kafka {version}\'s broker and group configs, as facts (generated: do not edit).',
        "",
        "Written by ``tests/tools/kafka_config_facts.py`` from Kafka's own config definitions",
        "(``KafkaConfig.configDef``, ``DynamicBrokerConfig.dynamicConfigUpdateModes``,",
        "``GroupConfig.configDef``).  Each row: name, ConfigDef type, default as Kafka prints it",
        '(None: no default / null), validator as data (see broker/configs.py), update mode',
        '("read-only", "per-broker", "cluster-wide"; group configs: None).  Internal keys, which',
        "Kafka does not describe, are left out.  Loaded by broker/configs.py on first use.",
        '"""',
        "",
        f"KAFKA_VERSION = {version!r}",
        "",
        "BROKER = (",
    ]
    for kind, name in (("broker", "BROKER"), ("group", "GROUP")):
        if kind == "group":
            lines += [")", "", "GROUP = ("]
        for f in sorted((r for r in rows if r["kind"] == kind and not r["internal"]), key=lambda r: r["name"]):
            lines.append(f"    ({f['name']!r}, {f['type']!r}, {f['default']!r}, {validator(f)!r}, {f['mode']!r}),")
    lines += [")", ""]
    return "\n".join(lines)


def write_docs(path: Path = DOCS) -> None:
    """broker/CONFIGS.md from the table as it is now (run in a fresh interpreter after a new
    kafka_configs.py)."""
    sys.path.insert(0, str(ROOT))
    from minikafka.broker import configs as cfg, kafka_configs

    table = cfg.broker_configs()
    ignored = [row for row in kafka_configs.BROKER if not table[row[0]].acted]
    lines = [DOCS_HEAD.format(version=kafka_configs.KAFKA_VERSION, acted=len(kafka_configs.BROKER) - len(ignored),
                              ignored=len(ignored))]
    for mode in ("read-only", "per-broker", "cluster-wide"):
        lines += [f"## {mode}", ""] + [f"`{row[0]}`" for row in sorted(ignored) if row[4] == mode] + [""]
    path.write_text("\n".join(lines))
    print(f"wrote {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--docs-only", action="store_true", help="only rewrite broker/CONFIGS.md")
    args = parser.parse_args(argv)
    if not args.docs_only:
        version = next(iter(sorted(LIBS.glob("kafka_2.13-*.jar")))).name[len("kafka_2.13-"):-len(".jar")]
        Path(args.out).write_text(render(facts(), version))
        print(f"wrote {args.out}")
        subprocess.run([sys.executable, __file__, "--docs-only"], check=True)
        return 0
    write_docs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
