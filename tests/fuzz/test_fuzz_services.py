"""The bounded fuzz run of ``make test``: every RPC of the name server, the broker and the gateway (v1 and the v2
MessagingService, Telemetry included) against real processes, seeded. ``make fuzz`` (tests/fuzz/run_fuzz.py) runs
the same with at least 10,000 requests per service."""

from __future__ import annotations

import asyncio

import pytest
from fuzz_cluster import huge_request, idle_streams, store_snapshot, targets, write_successes
from fuzz_harness import fuzz_target, rss_bytes
from mq_local.cluster import LocalCluster
from proto_grammar import HOSTILE_CASES, SHAPED

REQUESTS_PER_CASE_SET = 120
MAX_RSS_GROWTH_BYTES = 512 * 1024 * 1024
SERVICES = ("namesrv", "broker", "gateway")


def _target(cluster: LocalCluster, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in targets(cluster) if t.name == name)


@pytest.mark.parametrize("service", SERVICES)
async def test_hostile_requests_are_refused_with_codes_and_store_nothing(cluster: LocalCluster, service: str) -> None:
    target = _target(cluster, service)
    before = await store_snapshot(cluster)
    report = await fuzz_target(target, requests=REQUESTS_PER_CASE_SET, seed=19, cases=HOSTILE_CASES)
    assert (report.crashed, report.hangs, report.unexpected) == (False, 0, 0), report.answers
    assert not report.findings, report.findings
    assert report.answers["grpc:INVALID_ARGUMENT"] > 0  # random bytes: refused by the request guard, not UNKNOWN
    assert "grpc:UNKNOWN" not in report.answers
    if write_successes(report) == 0:
        await asyncio.sleep(1.0)  # topics.json is written in the background
        after = await store_snapshot(cluster)
        assert after.without_empty_retry_topics() == before.without_empty_retry_topics()


@pytest.mark.parametrize("service", SERVICES)
async def test_valid_shaped_random_requests_get_documented_answers(cluster: LocalCluster, service: str) -> None:
    target = _target(cluster, service)
    rss_before = rss_bytes(target.pid)
    report = await fuzz_target(target, requests=REQUESTS_PER_CASE_SET, seed=20, cases=(SHAPED,))
    assert (report.crashed, report.hangs, report.unexpected) == (False, 0, 0), report.findings
    assert rss_bytes(target.pid) - rss_before < MAX_RSS_GROWTH_BYTES


@pytest.mark.parametrize("service", SERVICES)
async def test_a_thousand_idle_streams_leave_the_service_serving(cluster: LocalCluster, service: str) -> None:
    assert await idle_streams(_target(cluster, service))


@pytest.mark.parametrize("service", SERVICES)
async def test_a_100_mib_request_is_refused_with_a_code(cluster: LocalCluster, service: str) -> None:
    target = _target(cluster, service)
    rss_before = rss_bytes(target.pid)
    label = await huge_request(target)
    # Over the name server's and the broker's 64 MiB: refused by gRPC itself; the gateway takes 130 MiB (the 5.x
    # proxy's limit) and its guard refuses the undecodable bytes.
    assert label in {"grpc:RESOURCE_EXHAUSTED", "grpc:INVALID_ARGUMENT"}
    assert rss_bytes(target.pid) - rss_before < MAX_RSS_GROWTH_BYTES
