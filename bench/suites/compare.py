"""Per-test comparison of one suite's outcomes on minikafka and on Apache Kafka 4.2.

    python3 bench/suites/compare.py MK_OUTPUT KAFKA_OUTPUT

Reads pytest `-rA` summaries (PASSED/FAILED/ERROR/SKIPPED lines), `go test -v` output
(--- PASS/FAIL/SKIP), jest `--json` files and librdkafka test-runner logs (one file per test,
outcome lines) and prints the counts of each side and every test whose outcome differs.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

PYTEST = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
GO = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
NORMAL = {"PASSED": "passed", "PASS": "passed", "FAILED": "failed", "FAIL": "failed",
          "ERROR": "error", "SKIPPED": "skipped", "SKIP": "skipped", "XFAIL": "xfail",
          "XPASS": "xpass", "pending": "skipped", "todo": "skipped", "disabled": "skipped"}


def outcomes(path: str) -> dict[str, str]:
    text = open(path, errors="replace").read()
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        out = {}
        for suite in data.get("testResults", []):
            for t in suite.get("assertionResults", []):
                name = suite["name"].split("/src/", 1)[-1] + "::" + t["fullName"]
                out[name] = NORMAL.get(t["status"], t["status"])
            if suite.get("status") == "failed" and not suite.get("assertionResults"):
                out[suite["name"].split("/src/", 1)[-1] + "::<suite>"] = "error"
        return out
    rk = re.findall(r"^\|(?:\x1b\[[0-9;]*m)* (\d{4}\S*)\s+\|\s+(PASSED|FAILED|SKIPPED)", text, re.M)
    if rk:  # librdkafka test-runner summary table
        return {name: NORMAL[status] for name, status in rk}
    if re.search(r"^(PASS|FAIL) src/", text, re.M):
        return jest_text(text)
    out = {}
    for line in text.splitlines():
        m = PYTEST.match(line) or GO.match(line)
        if m:
            name = m.group(2)
            if m.group(1) == "SKIPPED":  # "SKIPPED [1] file:line: reason"
                continue
            out[name] = NORMAL[m.group(1)]
    return out


def jest_text(text: str) -> dict[str, str]:
    """jest's default reporter: a PASS/FAIL line per file and a '●' line per failed test.
    Files that passed count as one 'passed' entry (file::<all>); each failed test is named."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^(PASS|FAIL) (src/\S+)", line)
        if m:
            current = m.group(2)
            out[current + "::<all>"] = "passed" if m.group(1) == "PASS" else "file-failed"
            continue
        m = re.match(r"^  ● (.+)$", line)
        if m and current and not m.group(1).startswith("Console"):
            out[current + "::" + m.group(1).strip()] = "failed"
    return out


def main() -> int:
    mk, kafka = outcomes(sys.argv[1]), outcomes(sys.argv[2])
    for label, side in (("minikafka", mk), ("kafka", kafka)):
        print(f"{label}: {dict(sorted(Counter(side.values()).items()))}")
    diff = sorted(n for n in set(mk) | set(kafka) if mk.get(n) != kafka.get(n))
    # randomly generated parameter ids (aiokafka's assignor tests) differ per run: a test
    # present on one side only counts as a difference unless its base name has the same
    # outcomes on both sides
    def base_outcomes(side, base):
        return sorted(v for n, v in side.items() if n.split("[", 1)[0] == base)
    diff = [n for n in diff if n in mk and n in kafka
            or base_outcomes(mk, n.split("[", 1)[0]) != base_outcomes(kafka, n.split("[", 1)[0])]
    for n in diff:
        print(f"  {n}: minikafka={mk.get(n, '-')} kafka={kafka.get(n, '-')}")
    print(f"{len(diff)} differ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
