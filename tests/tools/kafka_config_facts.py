"""Write broker/kafka_configs.py: Apache Kafka 4.2's broker and group config facts.

Compiles ``java/KafkaConfigFacts.java`` against the jars of ``tests/kafka/target/libs`` (the
oracle's Kafka, ``python tests/kafka/kafka_runner.py install``), runs it, and writes the names,
types, defaults, validators and dynamic update modes it prints as a Python data module.  Only
facts are carried over (no documentation text).  Run it again when the oracle's Kafka version
changes::

    python tests/tools/kafka_config_facts.py [--out broker/kafka_configs.py]
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    version = next(iter(sorted(LIBS.glob("kafka_2.13-*.jar")))).name[len("kafka_2.13-"):-len(".jar")]
    Path(args.out).write_text(render(facts(), version))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
