"""Consumer state across broker restarts (clean stop, SIGKILL of a real ``mqbroker`` process, unreadable files) and
topic deletion (config, offsets, consume queues, the registration sent to the name server)."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from broker_grpc_testkit import RunningBrokers
from consumer_testkit import (
    commit,
    create_topic,
    heartbeat,
    offset,
    query,
    send_to_queue,
    wait_until,
    wait_until_blocking,
)
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq_broker.store.message_store import StoreStartError
from mq_common.response_code import ResponseCode
from namesrv_testkit import RecordingNameServer, recording_namesrv
from test_broker_main import BrokerProcess

LONG_INTERVAL_MS = 600_000


async def test_clean_restart_reloads_offsets_and_groups(brokers: RunningBrokers, tmp_path: Path) -> None:
    root = tmp_path / "store"
    _controller, stub = await brokers.start(root, flush_consumer_offset_interval_ms=LONG_INTERVAL_MS)
    await create_topic(stub, "T", 2)
    await send_to_queue(stub, "T", 0, 5)
    assert await commit(stub, offset("G", "T", 0, 3), offset("G", "T", 1, 0)) == [0, 0]
    config = broker_pb2.SubscriptionGroupConfig(group_name="G2", retry_queue_nums=2, retry_max_times=7)
    await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))
    await brokers.stop_all()  # the stop writes what the periodic task had not
    offsets_file = json.loads((root / "config" / "consumerOffset.json").read_text())
    assert offsets_file["offsetTable"] == {"T@G": {"0": 3, "1": 0}}
    groups_file = json.loads((root / "config" / "subscriptionGroup.json").read_text())
    assert groups_file["subscriptionGroupTable"]["G2"]["retryMaxTimes"] == 7

    _controller, stub = await brokers.start(root, auto_create_subscription_group=False)
    assert (await query(stub, "G", "T", 0)).offset == 3
    assert (await query(stub, "G", "T", 1)).offset == 0
    everything = await stub.GetAllSubscriptionGroups(broker_pb2.GetAllSubscriptionGroupsRequest())
    assert {c.group_name: c for c in everything.configs}["G2"] == config
    assert await commit(stub, offset("G2", "T", 0, 1)) == [0]  # known after the restart without auto-create


async def test_unreadable_consumer_files_stop_the_start(brokers: RunningBrokers, tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    (root / "config" / "consumerOffset.json").write_text('{"offsetTable": {"T@G": {"0": ')
    with pytest.raises(StoreStartError, match=r"consumerOffset\.json"):
        await brokers.start(root)
    (root / "config" / "consumerOffset.json").unlink()
    (root / "config" / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": {"G": {"retryMaxTimes": 1}}}')
    with pytest.raises(StoreStartError, match="subscription group"):
        await brokers.start(root)
    (root / "config" / "subscriptionGroup.json").unlink()
    _controller, stub = await brokers.start(root)  # the store lock was released each time
    assert (await query(stub, "G", "T", 0)).code == ResponseCode.QUERY_NOT_FOUND


@pytest.mark.integration
def test_after_sigkill_the_last_persisted_offsets_are_used(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {"MQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS": str(LONG_INTERVAL_MS)}
    processes: list[BrokerProcess] = []

    def start(name: str) -> broker_pb2_grpc.BrokerStub:
        process = BrokerProcess(store, tmp_path / f"{name}.log", **env)
        processes.append(process)
        port = process.wait_event("started")["port"]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        return broker_pb2_grpc.BrokerStub(channel)

    def commit_sync(stub: broker_pb2_grpc.BrokerStub, value: int) -> None:
        request = broker_pb2.UpdateConsumerOffsetsRequest(offsets=[offset("G", "T", 0, value)])
        assert list(stub.UpdateConsumerOffsets(request, timeout=10).codes) == [0]

    def query_sync(stub: broker_pb2_grpc.BrokerStub) -> int:
        answer = stub.QueryConsumerOffset(
            broker_pb2.QueryConsumerOffsetRequest(consumer_group="G", topic="T", queue_id=0), timeout=10
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return answer.offset

    try:
        stub = start("first")
        config = common_pb2.TopicConfig(topic_name="T", read_queue_nums=1, write_queue_nums=1, perm=6)
        assert stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config), timeout=10).code == 0
        request = broker_pb2.SendMessageRequest(topic="T", queue_id=0, body=b"x", default_topic="TBW102")
        frame = broker_pb2.SendStreamRequest(frame_id=1, batch=broker_pb2.SendBatchRequest(requests=[request] * 5))
        (answer,) = stub.SendStream(iter([frame]), timeout=10)
        assert [r.code for r in answer.batch.responses] == [0] * 5
        commit_sync(stub, 2)
        processes[0].proc.send_signal(signal.SIGTERM)  # a clean stop persists offset 2
        assert processes[0].proc.wait(timeout=30) == 0

        stub = start("second")
        assert query_sync(stub) == 2
        commit_sync(stub, 4)  # not persisted: the next periodic write is minutes away
        group = broker_pb2.SubscriptionGroupConfig(group_name="G2", retry_queue_nums=1, retry_max_times=3)
        stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=group), timeout=10)
        groups_path = store / "config" / "subscriptionGroup.json"
        wait_until_blocking(lambda: groups_path.exists() and "G2" in groups_path.read_text())  # written at once
        processes[1].proc.kill()
        processes[1].proc.wait(timeout=30)

        stub = start("third")
        assert query_sync(stub) == 2  # the last persisted file, not the lost commit
        names = {
            c.group_name for c in stub.GetAllSubscriptionGroups(broker_pb2.GetAllSubscriptionGroupsRequest()).configs
        }
        assert "G2" in names
    finally:
        for process in processes:
            process.close()


@pytest.fixture
async def namesrv() -> AsyncIterator[tuple[RecordingNameServer, str]]:
    async with recording_namesrv() as running:
        yield running


async def test_delete_topic_drops_config_offsets_queues_and_route(
    brokers: RunningBrokers, namesrv: tuple[RecordingNameServer, str], tmp_path: Path
) -> None:
    recorder, addr = namesrv
    root = tmp_path / "store"
    controller, stub = await brokers.start(root, namesrv_addr=addr)
    await create_topic(stub, "Doomed", 2)
    await send_to_queue(stub, "Doomed", 0, 3)
    await send_to_queue(stub, "Doomed", 1, 2)
    await commit(stub, offset("G", "Doomed", 0, 2), offset("G", "Doomed", 1, 1))
    await stub.Heartbeat(heartbeat("c1", "G", "Doomed"))
    await wait_until(lambda: any("Doomed" in r.topic_config_table for r in recorder.registrations))
    registered = len(recorder.registrations)

    deleted = await stub.DeleteTopic(broker_pb2.DeleteTopicRequest(topic="Doomed"))
    assert deleted.code == ResponseCode.SUCCESS, deleted.remark
    # Registered again at once, without the topic (a registration already on its way may arrive first).
    await wait_until(lambda: any("Doomed" not in r.topic_config_table for r in recorder.registrations[registered:]))
    latest = next(r for r in reversed(recorder.registrations) if "Doomed" not in r.topic_config_table)
    assert "%RETRY%G" in latest.topic_config_table
    assert "Doomed" not in controller.build_registration().topic_configs
    stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="Doomed"))
    assert stats.code == ResponseCode.TOPIC_NOT_EXIST
    pulled = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="Doomed", queue_id=0, max_msg_nums=8)
    )
    assert pulled.code == ResponseCode.TOPIC_NOT_EXIST
    assert controller.store is not None
    assert controller.store.find_consume_queue("Doomed", 0) is None
    assert not (root / "consumequeue" / "Doomed").exists()
    assert (await query(stub, "G", "Doomed", 0)).code == ResponseCode.QUERY_NOT_FOUND
    assert controller.topics is not None
    await controller.topics.wait_persisted()  # written in the background
    topics_file = json.loads((root / "config" / "topics.json").read_text())
    assert "Doomed" not in topics_file["topicConfigTable"]

    await create_topic(stub, "Doomed", 1)  # created again: an empty queue
    assert (await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="Doomed"))).offsets[0].max_offset == 0
    await send_to_queue(stub, "Doomed", 0, 1)
    again = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="Doomed", queue_id=0, max_msg_nums=8)
    )
    assert (again.code, again.message_count) == (ResponseCode.SUCCESS, 1)


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        ("", ResponseCode.INVALID_PARAMETER),
        ("a b", ResponseCode.INVALID_PARAMETER),
        ("TBW102", ResponseCode.INVALID_PARAMETER),
        ("SELF_TEST_TOPIC", ResponseCode.INVALID_PARAMETER),
        ("DefaultCluster", ResponseCode.INVALID_PARAMETER),
        ("rmq_sys_anything", ResponseCode.INVALID_PARAMETER),
        ("NeverExisted", ResponseCode.SUCCESS),
    ],
)
async def test_delete_topic_refusals(brokers: RunningBrokers, tmp_path: Path, topic: str, code: int) -> None:
    controller, stub = await brokers.start(tmp_path / "store")
    topics = controller.topics
    assert topics is not None
    before = topics.select_topic_config(topic)
    answer = await stub.DeleteTopic(broker_pb2.DeleteTopicRequest(topic=topic))
    assert answer.code == code, answer.remark
    assert topics.select_topic_config(topic) == before  # a refused system topic stays
    assert bool(answer.remark) == (code != ResponseCode.SUCCESS)
