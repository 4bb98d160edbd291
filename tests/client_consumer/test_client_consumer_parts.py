"""The lite pull consumer's parts without a cluster: the offset store's memory rules and per-broker batching, the
pull task's offsets (OFFSET_ILLEGAL correction, piggy-backed commit, flow control), the process queue's consume
offset, the settings' checks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from mq_client.consumer import ConsumeFromWhere, LitePullConsumerConfig, ReadOffsetType, RemoteBrokerOffsetStore
from mq_client.consumer.process_queue import MessageQueueState, ProcessQueue
from mq_client.consumer.pull_task import PullTaskContext, run_pull_task
from mq_common.codec import MessageExt
from mq_common.errors import MQBrokerError, MQClientError, MQError, RemotingError
from mq_common.protocol import ConsumerQueueOffset, MessageQueue, PullResult, PullStatus
from mq_common.response_code import ResponseCode

GROUP = "G"
MQ_A0, MQ_A1, MQ_B0 = MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)


class FakeCalls:
    """ConsumerBrokerCalls' offset calls over a dict per broker address."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str, int], int] = {}
        self.update_calls: list[tuple[str, list[ConsumerQueueOffset]]] = []
        self.refuse: set[tuple[str, int]] = set()
        self.down: set[str] = set()

    async def update_consumer_offsets(
        self, addr: str, offsets: Sequence[ConsumerQueueOffset], timeout_ms: int
    ) -> list[MQError | None]:
        if addr in self.down:
            raise RemotingError(f"{addr} down")
        self.update_calls.append((addr, list(offsets)))
        out: list[MQError | None] = []
        for o in offsets:
            if (o.topic, o.queue_id) in self.refuse:
                out.append(MQBrokerError("topic not exist", ResponseCode.TOPIC_NOT_EXIST))
                continue
            self.stored[(addr, o.topic, o.queue_id)] = o.offset
            out.append(None)
        return out

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, **_: Any) -> int:
        if addr in self.down:
            raise RemotingError(f"{addr} down")
        if (addr, topic, queue_id) not in self.stored:
            raise MQBrokerError("Not found", ResponseCode.QUERY_NOT_FOUND)
        return self.stored[(addr, topic, queue_id)]


async def _addr(mq: MessageQueue) -> str:
    if mq.broker_name == "gone":
        raise MQClientError("The broker[gone] not exist", ResponseCode.BROKER_NOT_EXIST)
    return f"{mq.broker_name}:10911"


def _store(calls: FakeCalls) -> RemoteBrokerOffsetStore:
    return RemoteBrokerOffsetStore(calls, GROUP, _addr)  # type: ignore[arg-type]


def test_update_offset_increase_only_ignores_smaller_offsets() -> None:
    store = _store(FakeCalls())
    store.update_offset(MQ_A0, 10, increase_only=True)
    store.update_offset(MQ_A0, 5, increase_only=True)
    assert store.offset_table() == {MQ_A0: 10}
    store.update_offset(MQ_A0, 5, increase_only=False)
    assert store.offset_table() == {MQ_A0: 5}
    store.remove_offset(MQ_A0)
    assert store.offset_table() == {}


async def test_persist_all_sends_one_rpc_per_broker_and_forgets_other_queues() -> None:
    calls = FakeCalls()
    store = _store(calls)
    for mq, offset in ((MQ_A0, 3), (MQ_A1, 4), (MQ_B0, 5), (MessageQueue("U", "a", 0), 6)):
        store.update_offset(mq, offset, increase_only=False)
    await store.persist_all([MQ_A0, MQ_A1, MQ_B0])
    assert sorted((addr, len(offsets)) for addr, offsets in calls.update_calls) == [("a:10911", 2), ("b:10911", 1)]
    assert calls.stored == {("a:10911", "T", 0): 3, ("a:10911", "T", 1): 4, ("b:10911", "T", 0): 5}
    assert set(store.offset_table()) == {MQ_A0, MQ_A1, MQ_B0}


async def test_persist_failures_are_logged_and_the_other_brokers_still_get_theirs() -> None:
    calls = FakeCalls()
    calls.down.add("a:10911")
    calls.refuse.add(("T", 1))
    store = _store(calls)
    gone = MessageQueue("T", "gone", 0)
    for mq in (MQ_A0, MQ_B0, MessageQueue("T", "b", 1), gone):
        store.update_offset(mq, 7, increase_only=False)
    await store.persist([MQ_A0, MQ_B0, MessageQueue("T", "b", 1), gone])
    assert calls.stored == {("b:10911", "T", 0): 7}
    assert len(store.offset_table()) == 4, "persist keeps every offset"


async def test_read_offset_memory_store_not_found_and_error() -> None:
    calls = FakeCalls()
    calls.stored[("a:10911", "T", 0)] = 42
    store = _store(calls)
    assert await store.read_offset(MQ_A0, ReadOffsetType.READ_FROM_MEMORY) == -1
    assert await store.read_offset(MQ_A0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 42
    assert store.offset_table() == {MQ_A0: 42}, "the broker's answer is kept"
    store.update_offset(MQ_A0, 50, increase_only=False)
    assert await store.read_offset(MQ_A0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 50
    assert await store.read_offset(MQ_A0, ReadOffsetType.READ_FROM_STORE) == 42
    assert await store.read_offset(MQ_B0, ReadOffsetType.READ_FROM_STORE) == -1
    calls.down.add("b:10911")
    assert await store.read_offset(MQ_B0, ReadOffsetType.READ_FROM_STORE) == -2


def _message(queue_offset: int) -> MessageExt:
    return MessageExt(
        topic="T",
        body=b"x",
        flag=0,
        properties={},
        queue_id=0,
        queue_offset=queue_offset,
        commit_log_offset=queue_offset * 100,
        store_size=100,
        sys_flag=0,
        born_timestamp_ms=0,
        born_host=("127.0.0.1", 1),
        store_timestamp_ms=0,
        store_host=("127.0.0.1", 10911),
    )


def test_process_queue_consume_offset_follows_the_batches() -> None:
    pq = ProcessQueue()
    first, second = [_message(0), _message(1)], [_message(5)]
    pq.put_messages(first)
    pq.put_messages(second)
    assert pq.msg_count == 3
    assert pq.remove_messages(first) == 5, "the next buffered batch's first offset"
    assert pq.remove_messages(second) == 6, "one past the highest offset once empty"
    assert pq.msg_count == 0


class ScriptedQueues:
    """PullConsumer.pull answering from a script; records (offset, commit_offset, suspend_timeout_ms)."""

    def __init__(self, script: list[PullResult]) -> None:
        self.script = script
        self.calls: list[tuple[int, int | None, int]] = []
        self.done = asyncio.Event()

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int, sub: str, **kwargs: Any) -> PullResult:
        self.calls.append((offset, kwargs["commit_offset"], kwargs["suspend_timeout_ms"]))
        if not self.script:
            self.done.set()
            await asyncio.Event().wait()  # parked like a long poll until cancelled
        return self.script.pop(0)


def _context(queues: ScriptedQueues, store: RemoteBrokerOffsetStore, **config: Any) -> PullTaskContext:
    settings = LitePullConsumerConfig(GROUP, "cid", **config)
    return PullTaskContext(settings, queues, store, None, asyncio.Queue(100), {"T": "*"})  # type: ignore[arg-type]


async def _run_until_parked(state: MessageQueueState, ctx: PullTaskContext, queues: ScriptedQueues) -> None:
    task = asyncio.create_task(run_pull_task(state, ctx))
    await asyncio.wait_for(queues.done.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_pull_task_corrects_an_illegal_offset_and_piggy_backs_the_commit() -> None:
    found = PullResult(PullStatus.FOUND, 102, 100, 102, (_message(100), _message(101)))
    queues = ScriptedQueues([PullResult(PullStatus.OFFSET_ILLEGAL, 100, 100, 102, ()), found])
    store = _store(FakeCalls())
    store.update_offset(MQ_A0, 7, increase_only=False)
    state = MessageQueueState(MQ_A0)
    state.pull_offset = state.consume_offset = 0
    ctx = _context(queues, store, broker_suspend_max_time_ms=15_000)
    await _run_until_parked(state, ctx, queues)
    assert queues.calls == [(0, 7, 15_000), (100, 7, 15_000), (102, 7, 15_000)]
    request = ctx.requests.get_nowait()
    assert [m.queue_offset for m in request.messages] == [100, 101]
    assert state.pull_offset == 102


async def test_pull_task_commits_nothing_before_an_offset_is_known_and_backs_off_when_full() -> None:
    batch = tuple(_message(i) for i in range(3))
    queues = ScriptedQueues([PullResult(PullStatus.FOUND, 3, 0, 3, batch)])
    state = MessageQueueState(MQ_A0)
    state.pull_offset = 0
    ctx = _context(queues, _store(FakeCalls()), pull_threshold_for_queue=2)
    task = asyncio.create_task(run_pull_task(state, ctx))
    await _until(lambda: state.process_queue.msg_count == 3)
    for _ in range(3):  # a few turns of the 50 ms back-off
        await asyncio.sleep(0.06)
    assert queues.calls == [(0, None, 15_000)], "buffer over pullThresholdForQueue: no second pull"
    request = ctx.requests.get_nowait()
    state.process_queue.remove_messages(request.messages)
    await asyncio.wait_for(queues.done.wait(), 30)
    assert queues.calls[1] == (3, None, 15_000), "the buffer drained: pulling again"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _until(condition: Any) -> None:
    for _ in range(3000):  # 30 s
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("consumer_group", ""),
        ("pull_batch_size", 0),
        ("pull_batch_size", 1025),
        ("auto_commit_interval_ms", 999),
        ("consumer_timeout_ms_when_suspend", 10_000),
        ("rebalance_interval_ms", 0),
    ],
)
def test_bad_settings_are_refused_with_invalid_parameter(field: str, value: object) -> None:
    values: dict[str, Any] = {"consumer_group": GROUP, "client_id": "cid", field: value}
    with pytest.raises(MQClientError) as err:
        LitePullConsumerConfig(**values).check()
    assert err.value.code == ResponseCode.INVALID_PARAMETER


def test_default_settings_pass_and_keep_rocketmq_defaults() -> None:
    config = LitePullConsumerConfig(GROUP, "cid")
    config.check()
    assert config.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert (config.pull_threshold_for_queue, config.auto_commit_interval_ms) == (1000, 5000)
