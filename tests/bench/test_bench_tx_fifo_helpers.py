"""bench_tx_fifo's own logic: body keys, the per-group order verdict, the exactly-once read-back counts, the pair
ratio and the PASS/MISS maths. No broker, no timings asserted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # the bench scripts import each other as top-level modules

import bench_tx_fifo
from bench_tx_fifo import OrderFindings


def test_bodies_are_1_kib_and_carry_their_key() -> None:
    data = bench_tx_fifo.body(bench_tx_fifo.fifo_key(7, 42))
    assert len(data) == bench_tx_fifo.BODY_BYTES == 1024
    assert bench_tx_fifo.parse_fifo_key(bench_tx_fifo.key_of(data)) == ("g007", 42)


def test_order_findings_judge_first_receipts_per_group() -> None:
    assert bench_tx_fifo.order_findings({"a": [0, 1, 2], "b": [0, 1, 2]}, 3) == OrderFindings(0, 0, 0, 2)
    # b's 2 came before its 1: two first receipts out of turn; a redelivery of 1 is a duplicate, not a violation
    found = bench_tx_fifo.order_findings({"a": [0, 1, 1, 2], "b": [0, 2, 1]}, 3)
    assert found == OrderFindings(violations=2, duplicates=1, missing=0, groups=2)
    assert bench_tx_fifo.order_findings({"a": [0, 1]}, 3) == OrderFindings(0, 0, 1, 1)


def test_exactly_once_counts() -> None:
    found = bench_tx_fifo.exactly_once(["k1", "k2", "k3"], ["k1", "k1", "k2", "zz"])
    assert found == {"delivered": 2, "missing": 1, "duplicated": 1, "unknown": 1}


def test_ratio_of_pairs_is_the_median_of_per_pair_ratios() -> None:
    assert bench_tx_fifo.ratio_of_pairs([(100.0, 30.0), (100.0, 50.0), (200.0, 20.0)]) == 0.3


def tx_row(ratio: float, missing: int = 0) -> dict[str, Any]:
    back = {"delivered": 10 - missing, "missing": missing, "duplicated": 0, "unknown": 0}
    return {"pairs": [(1000, round(1000 * ratio))], "ratio": ratio, "committed": 10, "read_back": back}


def check_row(resolved_s: float, checked: int = 100) -> dict[str, Any]:
    return {
        "open": 100, "checked": checked, "check_calls": checked, "read_back": {"delivered": checked, "duplicated": 0},
        "check_interval_ms": 5_000, "transaction_timeout_ms": 2_000, "resolved_after_eligible_s": resolved_s,
        "first_check_after_eligible_s": 0.1, "checks_span_s": 1.0, "limit_s": bench_tx_fifo.check_within_s(5_000),
    }  # fmt: skip


def fifo_row(ratio: float, violations: int) -> dict[str, Any]:
    return {
        "messages": 1000, "groups": 10, "orderly_msgs_per_s": [500], "plain_msgs_per_s": [1000], "ratio": ratio,
        "orderly_violations": violations, "orderly_missing": 0, "orderly_duplicates": 0, "plain_violations": 3,
    }  # fmt: skip


def test_targets_pass_and_miss() -> None:
    assert bench_tx_fifo.check_within_s(5_000) == 10.0
    passing = bench_tx_fifo.targets(tx_row(0.35), check_row(9.5), fifo_row(0.6, 0))
    assert [c["pass"] for c in passing] == [True, True, True, True]
    assert [c["pass"] for c in bench_tx_fifo.targets(tx_row(0.29), None, None)] == [False]
    assert [c["pass"] for c in bench_tx_fifo.targets(tx_row(0.5, missing=1), None, None)] == [False]
    assert [c["pass"] for c in bench_tx_fifo.targets(None, check_row(10.5), None)] == [False]
    assert [c["pass"] for c in bench_tx_fifo.targets(None, check_row(1.0, checked=99), None)] == [False]
    assert [c["pass"] for c in bench_tx_fifo.targets(None, None, fifo_row(0.4, 1))] == [False, False]
