"""Lite pull consumer tests: a real local cluster (mqnamesrv + two mqbroker groups + mqgateway on 127.0.0.1), a
producer sending straight to the brokers, a factory of consumers closed after each test; makes lite_pull_testkit.py
importable (the suite runs --import-mode=importlib)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mq_client.consumer import LitePullConsumer
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from lite_pull_testkit import FAST  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        tmp_path_factory.mktemp("consumer-cluster"),
        broker_groups=2,
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000"},
        start_wait_s=90.0,
    )
    with LocalCluster(spec) as started:
        yield started


@pytest.fixture
async def producer(cluster: LocalCluster) -> AsyncIterator[DefaultMQProducer]:
    p = DefaultMQProducer.connect(ProducerConfig(producer_group="consumer_test_producer"), [cluster.namesrv_addr])
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


@pytest.fixture
async def consumers(cluster: LocalCluster) -> AsyncIterator[Callable[..., LitePullConsumer]]:
    """A factory of LitePullConsumers on the cluster (FAST intervals unless overridden), all closed at the end."""
    made: list[LitePullConsumer] = []

    def make(group: str, **kwargs: Any) -> LitePullConsumer:
        consumer = LitePullConsumer([cluster.namesrv_addr], group, **{**FAST, **kwargs})
        made.append(consumer)
        return consumer

    try:
        yield make
    finally:
        await asyncio.gather(*(c.close() for c in made))
