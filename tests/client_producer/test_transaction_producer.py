"""TransactionMQProducer (send_message_in_transaction with a local-transaction callback and a check listener) on a
real local cluster: a committed transaction is consumed once, a rolled-back one never, one whose local transaction
says UNKNOW (or raises) is checked back through the producer's own TransactionChecks stream and its
check_local_transaction answer ends it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mq_client.producer import Message, ProducerConfig
from mq_client.producer.transaction import LocalTransactionState, TransactionMQProducer
from mq_common.codec import MessageExt
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, spec_for_tests

pytestmark = pytest.mark.integration

CHECK_ENV = {"MQ_BROKER_TRANSACTION_TIMEOUT_MS": "1000", "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "300"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("tx-producer"), broker_groups=1, broker_env=CHECK_ENV)
    with LocalCluster(spec) as started:
        yield started


class Listener:
    def __init__(self) -> None:
        self.executed: list[str] = []
        self.checked: list[str] = []

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.executed.append(msg.body.decode() if msg.body else "")
        if arg == "boom":
            raise RuntimeError("local transaction crashed")
        return LocalTransactionState(arg)

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg.body.decode())
        return LocalTransactionState.COMMIT_MESSAGE


async def bodies(cluster: LocalCluster, topic: str, count: int, timeout_s: float = 20.0) -> list[str]:
    async with asyncio.timeout(timeout_s):
        while True:
            found = sorted(m.body.decode() for _, m in await read_all(cluster.namesrv_addr, topic))
            if len(found) >= count:
                return found
            await asyncio.sleep(0.2)


async def test_commit_rollback_and_checked_back(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = await make_topic(cluster, "tx_producer", queues=2)
    listener = Listener()
    producer = TransactionMQProducer.connect(ProducerConfig(producer_group="tx_pg"), [cluster.namesrv_addr], listener)
    await producer.start()
    try:
        cases = {
            "committed": "COMMIT_MESSAGE",
            "rolled-back": "ROLLBACK_MESSAGE",
            "unknown": "UNKNOW",
            "crashed": "boom",
        }
        for body, arg in cases.items():
            result = await producer.send_message_in_transaction(Message(topic, body.encode()), arg)
            expected = LocalTransactionState.UNKNOW if arg == "boom" else LocalTransactionState(arg)
            assert result.local_transaction_state is expected
        assert listener.executed == list(cases)
        received = await bodies(cluster, topic, 3)
        assert received == ["committed", "crashed", "unknown"], "the two open ones were checked back and committed"
        assert sorted(listener.checked) == ["crashed", "unknown"]
        await asyncio.sleep(1.0)
        assert sorted(m.body.decode() for _, m in await read_all(cluster.namesrv_addr, topic)) == received
    finally:
        await producer.shutdown()
