"""``python -m tests.conformance [--only GLOB] [--report PATH]``: start Apache Kafka and minikafka,
run the corpus, write the report; the last line printed is the summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import engine
from .brokers import ACL_CONFIG, as_targets, kafka_runner, start_both, start_pair

REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance")
    parser.add_argument("--only", help="run only scenarios matching this glob")
    parser.add_argument("--report", default=str(REPO / "conformance-report.md"))
    parser.add_argument("--verbose", action="store_true", help="print every unexplained difference")
    parser.add_argument("--dump", metavar="GLOB", help="print both normalised answers of the exchanges whose "
                        "'API vVERSION scenario / label' matches")
    args = parser.parse_args(argv)
    kafka_runner.ensure_installed()
    kafka, mk = start_both()
    try:
        acl_kafka, acl_mk = start_pair(extra=ACL_CONFIG)
    except BaseException:
        mk.stop()
        kafka.cleanup()
        raise
    try:
        result = engine.run(*as_targets(kafka, mk), only=args.only, acl=as_targets(acl_kafka, acl_mk))
    finally:
        for b in (mk, acl_mk):
            b.stop()
        for k in (kafka, acl_kafka):
            k.cleanup()
    engine.write_report(result, Path(args.report), kafka_version=kafka_runner.kafka_version())
    if args.verbose:
        for err in result.errors:
            print(err)
        for v in result.verdicts:
            if v.verdict == "unexplained":
                for path, kv, mv, rule in v.diffs:
                    if rule is None:
                        print(f"{engine.api_name(v.api_key)} v{v.version} {v.scenario} / {v.label}: {path}: "
                              f"kafka={engine._short(kv)} minikafka={engine._short(mv)}")
    if args.dump:
        import fnmatch
        import pprint

        for v in result.verdicts:
            name = f"{engine.api_name(v.api_key)} v{v.version} {v.scenario} / {v.label}"
            if fnmatch.fnmatchcase(name, args.dump):
                print(f"== {name} ({v.verdict})\n-- kafka:\n{pprint.pformat(v.kafka, width=120)}"
                      f"\n-- minikafka:\n{pprint.pformat(v.minikafka, width=120)}")
    print(f"report: {args.report} ({result.seconds:.1f} s)")
    print(result.summary())
    n, e, a, u = result.counts()
    return 0 if u == 0 and not result.errors else 1


if __name__ == "__main__":
    sys.exit(main())
