"""Replication with real broker processes (mq_local, one broker group of a SYNC_MASTER and a SLAVE, 64 KiB CommitLog
files so the log rolls): byte-identical CommitLog, the slave's ConsumeQueues (pulls from the slave), SYNC_MASTER's
answers with the slave up / SIGSTOPped / killed, a slave refusing sends, a killed slave catching up from where it
was, and an emptied slave catching up 10k messages."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.protocol import PullStatus, SendMessageRequestHeader, TopicConfig
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests

FILE_BYTES = 64 * 1024
DEADLINE_S = 120.0
SLAVE = "broker-a-s1"
SEND_TIMEOUT_MS = 10_000


def _commit_log(store: Path) -> bytes:
    """The CommitLog files' bytes up to the last non-zero byte (a preallocated tail is zeros on both sides); empty
    while a restarted broker has not created its folder yet."""
    folder = store / "commitlog"
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return b"".join(f.read_bytes() for f in files).rstrip(b"\0")


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}")
        await asyncio.sleep(0.2)


def _request(topic: str, i: int) -> SendMessageRequestHeader:
    size = (10, 700, 3000)[i % 3]
    return SendMessageRequestHeader(topic=topic, body=bytes([i % 251]) * size, queue_id=i % 2, properties="")


@pytest.fixture
def cluster(tmp_path: Path) -> object:
    spec = spec_for_tests(
        tmp_path / "data",
        broker_groups=1,
        replicas_per_broker_group=2,
        broker_role="SYNC_MASTER",
        broker_env={
            "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(FILE_BYTES),
            "MQ_BROKER_SYNC_FLUSH_TIMEOUT_MS": "1500",
        },
    )
    with LocalCluster(spec) as started:
        yield started


async def test_replicated_group(cluster: LocalCluster) -> None:
    spec = cluster.spec
    master, slave = cluster.broker_addrs["broker-a"], cluster.slave_addrs[SLAVE]
    master_store, slave_store = spec.broker_store_dir("broker-a"), spec.broker_store_dir(SLAVE)
    topic = await make_topic(cluster, "ha", queues=2)
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        await client.create_topic(slave, TopicConfig(topic, read_queue_nums=2, write_queue_nums=2))

        async def send_code(i: int) -> int:
            return (await client.send_message(master, _request(topic, i), SEND_TIMEOUT_MS)).code

        async def identical() -> bool:
            return _commit_log(slave_store) == _commit_log(master_store)

        await _until(lambda: _code_is(send_code(0), ResponseCode.SUCCESS), "the slave connects (SEND_OK)")
        for start in range(1, 301, 20):
            replies = await client.send_batch(master, [_request(topic, i) for i in range(start, start + 20)], 10_000)
            assert {r.code for r in replies} == {ResponseCode.SUCCESS}
        assert len(list((master_store / "commitlog").iterdir())) > 3  # rolled over file boundaries
        await _until(identical, "byte-identical CommitLog")
        for queue_id in (0, 1):
            on_master = await client.pull_message(master, topic, queue_id, 0, 1000)
            on_slave = await client.pull_message(slave, topic, queue_id, 0, 1000)
            assert on_slave.status is PullStatus.FOUND
            assert [m.body for m in on_slave.messages] == [m.body for m in on_master.messages]

        refused = await client.send_message(slave, _request(topic, 1), SEND_TIMEOUT_MS)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in refused.remark

        cluster.slaves[SLAVE].send_signal(signal.SIGSTOP)
        try:
            assert await send_code(1) == ResponseCode.FLUSH_SLAVE_TIMEOUT
        finally:
            cluster.slaves[SLAVE].send_signal(signal.SIGCONT)
        await _until(lambda: _code_is(send_code(2), ResponseCode.SUCCESS), "SEND_OK once the slave resumed")

        await asyncio.to_thread(cluster.kill_broker, SLAVE)
        await _until(lambda: _code_is(send_code(3), ResponseCode.SLAVE_NOT_AVAILABLE), "SLAVE_NOT_AVAILABLE")
        for start in range(0, 200, 50):  # stored on the master while the slave is down
            await client.send_batch(master, [_request(topic, i) for i in range(start, start + 50)], 10_000)
        await asyncio.to_thread(cluster.start_broker, SLAVE)  # from where it was
        await _until(identical, "a restarted slave catches up")

        await asyncio.to_thread(cluster.kill_broker, SLAVE)
        for start in range(0, 10_000, 200):
            await client.send_batch(master, [_request(topic, i) for i in range(start, start + 200)], 30_000)
        shutil.rmtree(slave_store)
        await asyncio.to_thread(cluster.start_broker, SLAVE)  # empty: from the master's oldest file
        await _until(identical, "an empty slave catches up 10k messages")
        await _until(lambda: _code_is(send_code(4), ResponseCode.SUCCESS), "SEND_OK after the catch-up")
    finally:
        await client.close()
        await pool.close()


async def _code_is(reply: Awaitable[int], code: int) -> bool:
    return await reply == code
