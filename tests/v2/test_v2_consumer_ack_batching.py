"""Ack coalescing toward the brokers (mq_gateway.v2.consumer.ack_batcher): concurrent v2 acks of one broker, group
and topic share one broker AckMessage call, and each v2 caller still gets the status of its own handles.

First the AckBatcher's rule over a scripted broker call (what waits while a call is in flight, the bound, failures,
callers that gave up), then ConsumerActivity over a real cluster (mqnamesrv + broker-a + broker-b), the broker
calls counted by a wrapper around PopBrokerCalls.ack_message: a mix of live, spent, duplicated and garbage handles
in concurrent single-entry acks, nothing left to redeliver; and a killed broker answering each waiting caller an
error status while the other broker's acks succeed (last test: it kills broker-b of the module's cluster).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.pop_calls import PopBrokerCalls
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_common.channels import ChannelPool
from mq_common.errors import RemotingError
from mq_common.protocol import AckMessageRequestHeader, AckMessageResponseHeader
from mq_common.response_code import ResponseCode
from mq_gateway.v2.consumer import ConsumerActivity
from mq_gateway.v2.consumer.ack_batcher import AckBatcher, AckTarget, split_answer
from mq_gateway.v2.consumer.handles import decode_handle
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from v2_consumer_testkit import (  # noqa: E402  (importable only after the path insert)
    CTX,
    ack_request,
    new_activity,
    receive_request,
    receive_until,
    send_all,
    started_cluster,
)

Code = definition_pb2.Code
TARGET = AckTarget("127.0.0.1:1", "broker-a", "g", "t")
BROKERS = ("broker-a", "broker-b")


class ScriptedBroker:
    """An AckCall that records each call's handles and answers once released: SUCCESS for handles starting with
    "ok", NO_MESSAGE for the others; ``fail`` makes every call raise it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(
        self, addr: str, header: AckMessageRequestHeader, timeout_ms: int, broker_name: str
    ) -> AckMessageResponseHeader:
        self.calls.append(header.receipt_handles)
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        handles = header.receipt_handles
        codes = tuple(int(ResponseCode.SUCCESS if h.startswith("ok") else ResponseCode.NO_MESSAGE) for h in handles)
        remarks = tuple("" if c == 0 else f"spent {h}" for c, h in zip(codes, handles, strict=True))
        return AckMessageResponseHeader(0, "", codes, remarks)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_acks_gather_while_a_call_is_in_flight_and_each_gets_its_own_results() -> None:
    broker = ScriptedBroker()
    batcher = AckBatcher(broker, timeout_ms=3_000)
    first = batcher.ack(TARGET, ("ok-0",))
    await settle()
    assert broker.calls == [("ok-0",)]  # an idle target: out at once
    later = [batcher.ack(TARGET, (f"ok-{i}", f"x-{i}")) for i in range(1, 11)]
    other = batcher.ack(AckTarget("127.0.0.1:1", "broker-a", "other-group", "t"), ("ok-g",))
    await settle()
    assert broker.calls == [("ok-0",), ("ok-g",)]  # the first target's acks wait for its call in flight
    broker.release.set()
    assert await first == [(0, "")]
    results = await asyncio.gather(*later)
    assert broker.calls[2] == tuple(h for i in range(1, 11) for h in (f"ok-{i}", f"x-{i}"))  # one call, in order
    assert results == [[(0, ""), (int(ResponseCode.NO_MESSAGE), f"spent x-{i}")] for i in range(1, 11)]
    assert await other == [(0, "")]
    assert (batcher.stats.acks, batcher.stats.broker_calls, batcher.stats.handles) == (12, 3, 22)
    await batcher.close()


async def test_a_batch_stays_within_max_handles_and_never_splits_a_caller() -> None:
    broker = ScriptedBroker()
    batcher = AckBatcher(broker, timeout_ms=3_000, max_handles=4)
    futures = [batcher.ack(TARGET, tuple(f"ok-{i}-{j}" for j in range(size))) for i, size in enumerate((3, 2, 4, 1))]
    with pytest.raises(ValueError, match="1 to 4 handles"):
        batcher.ack(TARGET, tuple(f"ok-{j}" for j in range(5)))
    broker.release.set()
    results = await asyncio.gather(*futures)
    assert [len(r) for r in results] == [3, 2, 4, 1]
    assert all(len(call) <= 4 for call in broker.calls)
    # 3 opens a batch that 2 cannot join (3 goes out), 4 cannot join 2 (2 goes out) and fills its own (out at
    # once); 1 waits for a call in flight
    assert broker.calls == [tuple(f"ok-{i}-{j}" for j in range(size)) for i, size in enumerate((3, 2, 4, 1))]
    await batcher.close()


async def test_a_refused_call_is_raised_to_each_of_its_callers() -> None:
    broker = ScriptedBroker()
    broker.fail = RemotingError("connection refused")
    batcher = AckBatcher(broker, timeout_ms=3_000)
    futures = [batcher.ack(TARGET, (f"ok-{i}",)) for i in range(5)]
    broker.release.set()
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    assert len(broker.calls) == 1
    assert all(isinstance(o, RemotingError) for o in outcomes)


async def test_a_caller_that_gave_up_before_its_batch_went_out_is_not_acked() -> None:
    broker = ScriptedBroker()
    batcher = AckBatcher(broker, timeout_ms=3_000)
    busy = batcher.ack(TARGET, ("ok-busy",))
    await settle()
    gave_up = batcher.ack(TARGET, ("ok-gone",))
    kept = batcher.ack(TARGET, ("ok-kept",))
    gave_up.cancel()
    broker.release.set()
    assert [await busy, await kept] == [[(0, "")], [(0, "")]]
    assert broker.calls == [("ok-busy",), ("ok-kept",)]


async def test_close_sends_what_is_gathering_and_waits_for_it() -> None:
    broker = ScriptedBroker()
    batcher = AckBatcher(broker, timeout_ms=3_000)
    busy = batcher.ack(TARGET, ("ok-busy",))
    await settle()
    waiting = batcher.ack(TARGET, ("ok-waiting",))
    closing = asyncio.ensure_future(batcher.close())
    await settle()
    assert broker.calls == [("ok-busy",), ("ok-waiting",)]  # sent at close without waiting for the busy call
    broker.release.set()
    await closing
    assert [await busy, await waiting] == [[(0, "")], [(0, "")]]


def test_split_answer_refuses_a_wrong_number_of_codes() -> None:
    assert split_answer(AckMessageResponseHeader(17, "no topic"), 2) == [(17, "no topic"), (17, "no topic")]
    assert split_answer(AckMessageResponseHeader(0, "", (0, 208), ("",)), 2) == [(0, ""), (208, "")]
    with pytest.raises(RemotingError):
        split_answer(AckMessageResponseHeader(0, "", (0,), ("",)), 2)


# -- over a real cluster --------------------------------------------------------------------------------------------


class CountedAcks:
    """Counts PopBrokerCalls.ack_message calls (and their handles) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        real = PopBrokerCalls.ack_message

        async def counted(
            calls: PopBrokerCalls, addr: str, request: AckMessageRequestHeader, timeout_ms: int = 3_000,
            broker_name: str = "",
        ) -> AckMessageResponseHeader:  # fmt: skip
            self.calls.append((broker_name, len(request.receipt_handles)))
            return await real(calls, addr, request, timeout_ms, broker_name)

        monkeypatch.setattr(PopBrokerCalls, "ack_message", counted)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with started_cluster(tmp_path_factory.mktemp("v2-ack-batching")) as started:
        yield started


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> CountedAcks:
    return CountedAcks(monkeypatch)


@pytest.fixture
async def activity(cluster: LocalCluster, pool: ChannelPool, counted: CountedAcks) -> AsyncIterator[ConsumerActivity]:
    made = new_activity(cluster, pool)  # after the wrapper: the batcher holds the wrapped method
    try:
        yield made
    finally:
        await made.close()


async def stored_and_received(cluster: LocalCluster, activity: ConsumerActivity, name: str, count: int) -> tuple[
        str, list[definition_pb2.Message]]:  # fmt: skip
    topic = await make_topic(cluster, name)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group=f"{name}_p"), [cluster.namesrv_addr])
    await producer.start()
    try:
        sent = await send_all(producer, topic, count)
    finally:
        await producer.shutdown()
    requests = [receive_request(name, topic, broker_name=b) for b in BROKERS]
    got = await receive_until(activity, requests, count)
    assert {m.system_properties.message_id for m in got} == set(sent)
    return topic, got


def single_acks(group: str, topic: str, messages: list[definition_pb2.Message]) -> list[service_pb2.AckMessageRequest]:
    return [ack_request(group, topic, [m]) for m in messages]


async def test_concurrent_acks_share_broker_calls_and_each_caller_gets_its_status(
    cluster: LocalCluster, activity: ConsumerActivity, counted: CountedAcks
) -> None:
    group = "v2ab_mix"
    topic, got = await stored_and_received(cluster, activity, group, 64)
    spent, live = got[:8], got[8:]
    assert (await activity.ack_message(ack_request(group, topic, spent), CTX)).status.code == Code.OK
    counted.calls.clear()
    garbage = ack_request(group, topic, [])
    garbage.entries.add(message_id="x", receipt_handle="garbage")
    requests = [*single_acks(group, topic, live), *single_acks(group, topic, spent), garbage,
                ack_request(group, topic, [live[0], spent[0]])]  # fmt: skip
    answers = await asyncio.gather(*(activity.ack_message(r, CTX) for r in requests))
    live_answers, spent_answers = answers[: len(live)], answers[len(live) : len(live) + len(spent)]
    duplicate = answers[-1]
    acked_live = sum(1 for a in live_answers if a.status.code == Code.OK) + (
        duplicate.entries[0].status.code == Code.OK
    )
    assert acked_live == len(live)
    assert all(a.status.code == Code.INVALID_RECEIPT_HANDLE for a in spent_answers), spent_answers
    assert answers[-2].status.code == Code.INVALID_RECEIPT_HANDLE
    assert duplicate.entries[1].status.code == Code.INVALID_RECEIPT_HANDLE
    # every live handle was acked exactly once: the duplicate of live[0] lost against its single-entry ack or won
    assert (live_answers[0].status.code == Code.OK) != (duplicate.entries[0].status.code == Code.OK)
    handles = sum(n for _, n in counted.calls)
    assert handles == len(live) + len(spent) + 2  # the garbage handle never reached a broker
    assert len(counted.calls) <= 2 * len(BROKERS), counted.calls  # 74 v2 acks, a call or two per broker
    again = await activity.ack_message(ack_request(group, topic, live), CTX)  # within the 60 s invisible time:
    assert {e.status.code for e in again.entries} == {Code.INVALID_RECEIPT_HANDLE}  # refused as acked already


async def test_a_broker_that_is_down_answers_each_waiting_caller_an_error(
    cluster: LocalCluster, activity: ConsumerActivity, counted: CountedAcks
) -> None:
    """Kills broker-b: keep this test last in the module."""
    group = "v2ab_down"
    topic, got = await stored_and_received(cluster, activity, group, 32)
    on_b = [m for m in got if decode_handle(m.system_properties.receipt_handle).broker_name == "broker-b"]
    on_a = [m for m in got if m not in on_b]
    assert on_a
    assert on_b
    cluster.kill_broker("broker-b")
    answers = await asyncio.gather(*(activity.ack_message(r, CTX) for r in single_acks(group, topic, got)))
    by_id = {m.system_properties.message_id: a for m, a in zip(got, answers, strict=True)}
    assert all(by_id[m.system_properties.message_id].status.code == Code.OK for m in on_a)
    failed = [by_id[m.system_properties.message_id].status for m in on_b]
    assert all(s.code not in (Code.OK, Code.INVALID_RECEIPT_HANDLE) for s in failed), failed
    assert all(s.message for s in failed)
