"""bench_spark's own arithmetic: rows/s, ratios, the PASS/MISS of issue 34's Spark targets. No cluster, no Spark
session, no timings asserted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the bench scripts import each other as top-level modules

import bench_spark
from bench_spark import EXACTLY, FIRST, PLAIN, SOURCE, STREAM, WARM


def test_rate_and_ratio_guard_a_zero_denominator() -> None:
    assert bench_spark.rate(1_000, 0.5) == 2_000.0
    assert bench_spark.rate(1_000, 0.0) == 0.0
    assert bench_spark.ratio(1, 3) == 0.33
    assert bench_spark.ratio(5, 0) == 0.0


def test_ratio_check_passes_at_the_minimum_and_misses_below() -> None:
    assert bench_spark.ratio_check("r", 0.9, 0.9).passed
    missed = bench_spark.ratio_check("r", 0.89, 0.9, "a vs b")
    assert not missed.passed
    assert missed.measured == "0.89 x (a vs b)"
    assert missed.to_dict() == {"name": "r", "target": ">= 0.9 x", "measured": "0.89 x (a vs b)", "pass": False}


def test_all_rows_check_needs_every_row_and_no_failure() -> None:
    assert bench_spark.all_rows_check("s", 10, 10).passed
    assert not bench_spark.all_rows_check("s", 10, 9).passed
    assert not bench_spark.all_rows_check("s", 10, 10, failed=1).passed


def _rows(first_s: float, exactly_s: float, source_rows: int = 100) -> dict[str, dict[str, object]]:
    rows: dict[str, dict[str, object]] = {
        PLAIN: {"rows": 100, "published": 100, "failed": 0, "seconds": 1.0},
        FIRST: {"rows": 100, "published": 100, "failed": 0, "seconds": first_s},
        WARM: {"rows": 100, "published": 100, "failed": 0, "seconds": 1.0},
        EXACTLY: {"rows": 100, "published": 100, "failed": 0, "seconds": exactly_s},
        STREAM: {"rows": 100, "published": 100, "failed": 0, "seconds": 2.0},
        SOURCE: {"rows": source_rows, "partitions": 16, "seconds": 0.5},
    }
    bench_spark.finish_rows(rows, 100.0)
    return rows


def test_finish_rows_counts_published_rows_and_rows_read() -> None:
    rows = _rows(first_s=1.25, exactly_s=2.0)
    assert rows[FIRST]["rows_per_s"] == 80.0
    assert rows[FIRST]["x_plain"] == 0.8
    assert rows[SOURCE]["rows_per_s"] == 200.0  # a read row has no "published": its rows count
    assert rows[STREAM]["x_plain"] == 0.5


def test_judge_applies_issue_34_targets() -> None:
    checks = {c.name: c.passed for c in bench_spark.judge(_rows(first_s=1.1, exactly_s=2.0), 100)}
    assert checks == {
        "exactly once vs at least once (warm)": True,  # 0.5 x
        "Spark first write vs plain sender": True,  # 0.91 x
        "streaming sink, availableNow": True,
        "source read of the exactly-once topic": True,
    }
    missed = {c.name: c.passed for c in bench_spark.judge(_rows(first_s=1.25, exactly_s=2.5, source_rows=99), 100)}
    assert missed == {
        "exactly once vs at least once (warm)": False,  # 0.4 x
        "Spark first write vs plain sender": False,  # 0.8 x
        "streaming sink, availableNow": True,
        "source read of the exactly-once topic": False,
    }
