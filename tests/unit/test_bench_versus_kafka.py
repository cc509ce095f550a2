"""bench/versus_kafka.py without brokers: the ratio table (medians, ratio, which way is ahead), the
RESULTS.md block it rewrites in place, and the broker CPU it reads from /proc/PID/stat."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vk():
    pytest.importorskip("confluent_kafka")
    spec = importlib.util.spec_from_file_location("versus_kafka", ROOT / "bench" / "versus_kafka.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rounds(vk, kind, scale, n=3):
    out = []
    for i in range(n):
        r = {"broker": kind}
        for key, *_ in vk.METRICS:
            r[key] = scale * (i + 1)  # medians: 2 * scale
        out.append(r)
    return out


def test_table_gives_medians_ratios_and_the_right_direction(vk):
    text = vk.table(rounds(vk, "minikafka", 1.0) + rounds(vk, "kafka", 4.0), ["minikafka", "kafka"])
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()[2:]}
    assert len(lines) == len(vk.METRICS)
    start = lines["start-up: launch -> first Metadata answer"]
    assert "| 2.000 | 8.000 | 0.25 | yes |" in start  # lower is better: minikafka ahead
    produce = lines["produce 1 KiB, acks=all (idempotent)"]
    assert "| 2.000 | 8.000 | 0.25 | no |" in produce  # higher is better: minikafka behind


def test_one_broker_table_has_no_ratio(vk):
    text = vk.table(rounds(vk, "kafka", 1.0), ["kafka"])
    assert "minikafka / Kafka" not in text and text.splitlines()[2].endswith("| 2.000 |")


def test_write_results_replaces_its_block_and_keeps_the_rest(vk, tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\n\nearlier section\n")
    vk.write_results("first table", path)
    vk.write_results("second table", path)
    text = path.read_text()
    assert text.count(vk.START_MARK) == 1 and text.count(vk.END_MARK) == 1
    assert "second table" in text and "first table" not in text
    assert text.startswith("# Results\n\nearlier section\n")
    path.write_text(text + "\nafter the block\n")
    vk.write_results("third table", path)
    assert path.read_text().endswith("third table\n" + vk.END_MARK + "\n\nafter the block\n")


def test_cpu_seconds_counts_this_process_work(vk):
    before = vk.cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    spent = vk.cpu_seconds(os.getpid()) - before
    assert 0.2 <= spent <= 5.0, spent
