"""Transactions across a controller failover (issue 33): the SYNC_MASTER group of the HA rounds (ha_group.py: etcd,
mqcontroller, name server, two broker replicas in controller mode) holds half messages sent to its master; a third
is committed, a third rolled back, a third left open; then the master is SIGKILLed. The slave is promoted and its
TransactionalMessageCheckService recovers from the replicated CommitLog (half messages, op records) and the
CID_RMQ_SYS_TRANS offsets SlaveSynchronize copied; a producer of the group registers on the new master's
TransactionChecks stream (mq_client.transaction_checks) and answers every check COMMIT.

At the end the topic is read back from the new master: every committed and every open transaction's message is
there exactly once, no rolled-back one — never delivered twice, never lost when committed.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from ha_group import ELECTION_DEADLINE_S, ROUND_DEADLINE_S, replicas, start_group, wait_in_sync, wait_master
from mq_client.broker_client import BrokerClient
from mq_client.transaction_checks import TransactionCheck, TransactionCheckStreams
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.message_id import decode_offset_msg_id
from mq_common.protocol import PullStatus, SendMessageRequestHeader, TopicConfig
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_local.cluster import LocalCluster
from timer_testkit import PULL_BATCH, PULL_TIMEOUT_MS, broker_client, frames, send_frames

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(900)]

TOPIC: Final = "TxFailoverTopic"
QUEUES: Final = 4
PRODUCER_GROUP: Final = "tx_failover_pg"
TRANSACTIONS: Final = 300
CHECK_ENV: Final = {
    "MQ_BROKER_TRANSACTION_TIMEOUT_MS": "1000",
    "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "500",
    "MQ_BROKER_TRANSACTION_CHECK_MAX": "1000",  # checks before the failover reach nobody: never discard here
}


def half(i: int) -> SendMessageRequestHeader:
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"TX{i:05d}", MessageConst.TRANSACTION_PREPARED: "true"}
    return SendMessageRequestHeader(
        topic=TOPIC,
        body=f"tx-{i}".encode(),
        producer_group=PRODUCER_GROUP,
        queue_id=i % QUEUES,
        sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        properties=encode_properties(props),
    )


@pytest.fixture
def group(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = start_group(tmp_path / "data", **CHECK_ENV)
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_open_transactions_are_checked_by_the_promoted_master(group: LocalCluster) -> None:
    async with broker_client() as client:
        for addr in replicas(group):
            await client.create_topic(addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        master = await wait_master(group, ELECTION_DEADLINE_S)
        (slave_addr,) = [a for a in replicas(group) if a != master.master_addr]
        await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)
        answers = await send_frames(client, master.master_addr, frames([half(i) for i in range(TRANSACTIONS)], 50), 4)
        ended = {0: MessageSysFlag.TRANSACTION_COMMIT_TYPE, 1: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}
        for i, answer in enumerate(answers):
            kind = ended.get(i % 3)
            if kind is None:
                continue
            header = EndTransactionRequestHeader(
                producer_group=PRODUCER_GROUP,
                tran_state_table_offset=answer.queue_offset,
                commit_log_offset=decode_offset_msg_id(answer.msg_id)[2],
                commit_or_rollback=kind,
                msg_id=f"TX{i:05d}",
                transaction_id=f"TX{i:05d}",
                topic=TOPIC,
            )
            await client.end_transaction(master.master_addr, header)
        victim = replicas(group)[master.master_addr]
        victim.send_signal(signal.SIGKILL)
        assert victim.wait_exit(10.0)
        new_master = await wait_master(group, ELECTION_DEADLINE_S, not_addr=master.master_addr)
        addr = new_master.master_addr

        async def answer_commit(check: TransactionCheck) -> None:
            header = EndTransactionRequestHeader(
                producer_group=check.producer_group,
                tran_state_table_offset=check.tran_state_table_offset,
                commit_log_offset=check.commit_log_offset,
                commit_or_rollback=MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                from_transaction_check=True,
                msg_id=check.msg_id,
                transaction_id=check.transaction_id,
                topic=check.topic,
            )
            await client.end_transaction(addr, header)

        async def masters() -> set[str]:
            return {addr}

        pool = ChannelPool()
        streams = TransactionCheckStreams(pool, "chaos", lambda: frozenset({PRODUCER_GROUP}), masters, answer_commit)
        streams.start()
        expected = {f"TX{i:05d}" for i in range(TRANSACTIONS) if i % 3 != 1}
        try:
            async with asyncio.timeout(ROUND_DEADLINE_S):
                while True:
                    found = await _keys(client, addr)
                    if set(found) >= expected:
                        break
                    await asyncio.sleep(0.5)
            await asyncio.sleep(3.0)  # a few more check intervals: nothing may come twice
            found = await _keys(client, addr)
        finally:
            await streams.stop()
            await pool.close()
    counts = Counter(found)
    assert set(counts) == expected, sorted(set(counts) ^ expected)[:10]
    assert [k for k, n in counts.items() if n > 1] == []
    checked = TRANSACTIONS // 3
    print(f"\ntransaction failover: {len(expected)} delivered exactly once ({checked} checked by the new master)")


async def _keys(client: BrokerClient, addr: str) -> list[str]:
    out: list[str] = []
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            result = await client.pull_message(addr, TOPIC, queue_id, offset, PULL_BATCH, timeout_ms=PULL_TIMEOUT_MS)
            if result.status is not PullStatus.FOUND:
                break
            out.extend(m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in result.messages)
            offset = result.next_begin_offset
    return out
