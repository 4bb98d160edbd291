"""Fencing and SyncStateSet changes in controller mode with real processes: a SIGSTOPped master is replaced, and
after SIGCONT it acknowledges nothing (a send queued to it meanwhile and a direct send afterwards are refused) and
rejoins as a slave; a killed slave leaves the SyncStateSet and SYNC_MASTER sends go on; mqadmin electMaster moves the
master and sends follow; consumer offsets committed on the old master are on the new one."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from failover_testkit import (
    FAILOVER_TARGET_S,
    GROUP,
    PEER,
    commit_log_bytes,
    producer_for,
    start_group,
    wait_for,
    wait_master,
    wait_sync_state_set,
    wait_topic_on,
)
from mq_client.admin.cli import app
from mq_client.broker_client import BrokerClient
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_common.channels import ChannelPool
from mq_common.protocol import SendMessageRequestHeader
from mq_common.protocol.consumer import ConsumerQueueOffset
from mq_common.response_code import ResponseCode
from mq_local.testing import make_topic
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


async def test_a_paused_master_acknowledges_nothing_after_resuming_and_rejoins_as_slave(tmp_path: Path) -> None:
    with start_group(tmp_path / "cluster") as cluster:
        topic = await make_topic(cluster, "fencing", queues=2)
        sends = await producer_for(cluster, topic, "fencing_producer")
        pool = ChannelPool()
        client = BrokerClient(pool)
        old_addr = cluster.group_processes(GROUP)[GROUP]
        try:
            await sends.first_ok_after("warm-up")
            await wait_sync_state_set(cluster, 2)
            await wait_topic_on(cluster, PEER, topic)
            await sends.send_many(30, "before")

            cluster.brokers[GROUP].send_signal(signal.SIGSTOP)
            request = SendMessageRequestHeader(topic=topic, body=b"queued while stopped", queue_id=0, properties="")
            queued = asyncio.create_task(client.send_message(old_addr, request, 60_000))
            took_s = await sends.first_ok_after("after-stop")
            print(f"SIGSTOP -> first SEND_OK on the new master: {took_s:.2f} s")
            assert took_s < FAILOVER_TARGET_S + 5
            await wait_master(cluster, PEER)
            await sends.send_many(20, "new-master")

            cluster.brokers[GROUP].send_signal(signal.SIGCONT)
            assert (await queued).code != ResponseCode.SUCCESS
            direct = await client.send_message(old_addr, request, 10_000)
            assert direct.code != ResponseCode.SUCCESS
            assert await sends.missing(cluster) == {}

            await wait_sync_state_set(cluster, 2)  # the old master caught up as a slave
            old, new = cluster.spec.broker_store_dir(GROUP), cluster.spec.broker_store_dir(PEER)

            async def identical() -> bool:
                return commit_log_bytes(old) == commit_log_bytes(new)

            await wait_for(identical, "the resumed old master's CommitLog is byte-identical to the new master's")
        finally:
            await sends.producer.shutdown()
            await client.close()
            await pool.close()


async def test_slave_loss_shrinks_the_set_elect_master_moves_it_and_offsets_follow(tmp_path: Path) -> None:
    with start_group(tmp_path / "cluster") as cluster:
        topic = await make_topic(cluster, "elect", queues=2)
        sends = await producer_for(cluster, topic, "elect_producer")
        pool = ChannelPool()
        calls = ConsumerBrokerCalls(pool)
        try:
            await sends.first_ok_after("warm-up")
            await wait_sync_state_set(cluster, 2)
            await asyncio.to_thread(cluster.kill_broker, PEER)
            info = await wait_sync_state_set(cluster, 1)
            assert info.sync_state_set == frozenset({1})
            await sends.send_many(20, "without-slave")  # SYNC_MASTER goes on with the set of one

            await asyncio.to_thread(cluster.start_broker, PEER)
            await wait_sync_state_set(cluster, 2)
            await wait_topic_on(cluster, PEER, topic)
            master_addr = cluster.group_processes(GROUP)[GROUP]
            committed = ConsumerQueueOffset("elect_consumer", topic, 0, 7)
            assert await calls.update_consumer_offsets(master_addr, [committed]) == [None]
            offsets = cluster.spec.broker_store_dir(PEER) / "config" / "consumerOffset.json"

            async def offset_copied() -> bool:
                return offsets.is_file() and "elect_consumer" in offsets.read_text(encoding="utf-8")

            await wait_for(offset_copied, "SlaveSynchronize copied the committed offset")

            elected = await asyncio.to_thread(  # the CLI runs its own event loop
                CliRunner().invoke,
                app,
                ["electMaster", "-a", cluster.spec.controller_addr, "-c", cluster.spec.cluster_name, "-bn", GROUP,
                 "-b", "2"],
            )  # fmt: skip
            assert elected.exit_code == 0, elected.output
            await wait_master(cluster, PEER)
            await sends.first_ok_after("after-elect")
            await sends.send_many(20, "elected")
            assert await sends.missing(cluster) == {}
            new_addr = cluster.group_processes(GROUP)[PEER]
            assert await calls.query_consumer_offset(new_addr, "elect_consumer", topic, 0) == 7
        finally:
            await sends.producer.shutdown()
            await pool.close()
