"""bench_timer's own logic and the timer rounds' verdict (tests/chaos/timer_testkit.py): due-time schedules, the
exactly-once / none-early judgement, percentiles, the throughput ratio, /proc memory figures and the PASS/MISS maths.
No broker, no timings asserted."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the bench scripts import each other as top-level modules

import bench_timer
from timer_testkit import Delivered, percentile, verdict  # on sys.path through bench_timer


def delivered(key: str, due_ms: int, store_ms: int) -> Delivered:
    return Delivered(key, due_ms, store_ms, store_ms, 0)


def test_due_schedules() -> None:
    burst = bench_timer.burst_due_ms(10_000, 4)
    assert burst == [10_000, 10_250, 10_500, 10_750]
    assert all(10_000 <= d < 11_000 for d in bench_timer.burst_due_ms(10_000, 100_000))
    paced = bench_timer.paced_due_ms(0, 5_000, 2.0)
    assert len(paced) == 10_000
    assert paced[4_999] < 1_000 <= paced[5_000]
    spread = bench_timer.spread_due_ms(600_000, 1_000, 86_400)
    assert spread[0] == 600_000
    assert spread[-1] < 600_000 + 86_400_000
    assert spread == sorted(spread)


def test_verdict_finds_every_kind_of_fault() -> None:
    due = {"a": 100, "b": 200, "c": 300, "d": 400}
    records = [
        delivered("a", 100, 150),
        delivered("b", 200, 190),  # early
        delivered("c", 300, 310),
        delivered("c", 300, 320),  # twice
        delivered("r", 500, 510),  # recalled
        delivered("x", 0, 10),  # never sent
    ]
    found = verdict(due, records, recalled={"r"})
    assert not found.ok
    assert found.missing == ["d"]
    assert found.duplicated == {"c": 2}
    assert found.early == [("b", 10)]
    assert found.recalled_delivered == ["r"]
    assert found.unknown == ["x"]
    assert found.delivered == 4
    assert found.lateness_ms == [50, -10, 10, 20]
    assert "missing 1" in found.summary()


def test_verdict_ok() -> None:
    found = verdict({"a": 100, "b": 100}, [delivered("a", 100, 100), delivered("b", 100, 1_100)], recalled={"z"})
    assert found.ok
    assert found.lateness_ms == [0, 1_000]


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7], 99) == 7
    assert percentile([], 99) != percentile([], 99)  # NaN


def test_ratio_of_pairs_is_the_median_ratio() -> None:
    assert bench_timer.ratio_of_pairs([(100.0, 90.0), (100.0, 50.0), (100.0, 100.0)]) == 0.9


def test_memory_of_this_process() -> None:
    figures = bench_timer.memory_kib(os.getpid())
    assert set(figures) == {"VmRSS", "RssAnon", "RssFile"}
    assert figures["VmRSS"] >= figures["RssAnon"] > 0


def test_lateness_row_and_targets() -> None:
    due = {f"k{i}": 1_000 for i in range(100)}
    records = [delivered(f"k{i}", 1_000, 1_000 + 10 * i) for i in range(100)]
    row = bench_timer.lateness_row("burst", 100, due, records, 1.0)
    assert (row["delivered"], row["missing"], row["duplicated"], row["early"]) == (100, 0, 0, 0)
    assert row["p99_s"] == 0.98
    assert row["max_s"] == 0.99
    pending = {
        "pending": 1_000_000, "extra_anon_mib": 70.0, "extra_rss_mib": 300.0, "extra_rss_file_mib": 230.0,
        "twin_rss_file_growth_mib": 200.0,
        "throughput_pairs": [(100, 79)], "throughput_ratio": 0.79,
    }  # fmt: skip
    checks = bench_timer.targets(pending, row, None)
    assert [c["pass"] for c in checks] == [True, False, True]
    late = dict(row, max_s=5.5)
    assert [c["pass"] for c in bench_timer.targets(None, late, None)] == [False]
    short = dict(row, delivered=99, missing=1)
    assert [c["pass"] for c in bench_timer.targets(None, None, short)] == [False]
