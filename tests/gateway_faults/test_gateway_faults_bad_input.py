"""Fault isolation (e): each bad input through the gateway gets its code and remark, and nothing is lost —
a concurrent stream of good sends is stored exactly once, and no bad message is stored.

Bad inputs go both as single Sends and mixed into SendBatch requests with good messages (the batch fails
only the bad ones). The cluster runs with auto-create off, so an unknown topic is TOPIC_NOT_EXIST.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from gateway_faults_testkit import RPC_TIMEOUT_S, Publisher, body_of, fault_spec, gateway_stub
from mq.gateway.v1 import gateway_pb2
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, unique_topic

if TYPE_CHECKING:
    from gateway_faults_testkit import GatewayStub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GOOD_STREAM = 1_500
ROUNDS = 3  # every bad input this many times as a Send and as a batch member


@dataclass(frozen=True, slots=True)
class BadInput:
    name: str
    message: gateway_pb2.Message
    code: int
    remark: str


def bad_inputs(topic: str) -> list[BadInput]:
    illegal = ResponseCode.MESSAGE_ILLEGAL
    return [
        BadInput("empty body", gateway_pb2.Message(topic=topic, body=b""), illegal, "the message body length is zero"),
        BadInput(
            "illegal topic",
            gateway_pb2.Message(topic="bad topic/name!", body=b"x"),
            illegal,
            "contains illegal characters",
        ),
        BadInput(
            "5 MiB body",
            gateway_pb2.Message(topic=topic, body=b"x" * (5 * 1024 * 1024)),
            illegal,
            f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE_BYTES}",
        ),
        BadInput(
            "reserved property",
            gateway_pb2.Message(topic=topic, body=b"x", properties={"UNIQ_KEY": "forged"}),
            illegal,
            "property is used by system: UNIQ_KEY",
        ),
        BadInput(
            "unknown topic, auto-create off",
            gateway_pb2.Message(topic=unique_topic("never_created"), body=b"x"),
            ResponseCode.TOPIC_NOT_EXIST,
            "No route info of this topic",
        ),
    ]


async def send_bad_inputs(stub: GatewayStub, topic: str) -> list[tuple[str, bytes]]:
    """Every bad input as a Send and inside a batch; asserts each outcome; returns the batches' good bodies
    as (name, body) pairs."""
    good_in_batches: list[tuple[str, bytes]] = []
    for round_no in range(ROUNDS):
        for bad in bad_inputs(topic):
            result = (await stub.Send(gateway_pb2.SendRequest(message=bad.message), timeout=RPC_TIMEOUT_S)).result
            assert (result.code, bad.remark in result.remark) == (bad.code, True), (bad.name, result.remark)
            goods = [b"batch-%d-%s-%d" % (round_no, bad.name.encode(), i) for i in range(2)]
            messages = [gateway_pb2.Message(topic=topic, body=goods[0]), bad.message]
            messages.append(gateway_pb2.Message(topic=topic, body=goods[1]))
            response = await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=RPC_TIMEOUT_S)
            codes = [r.code for r in response.results]
            assert codes == [ResponseCode.SUCCESS, bad.code, ResponseCode.SUCCESS], (bad.name, codes)
            assert bad.remark in response.results[1].remark, (bad.name, response.results[1].remark)
            good_in_batches.extend((bad.name, body) for body in goods)
    return good_in_batches


async def test_bad_inputs_get_their_codes_and_good_sends_are_stored_exactly_once(tmp_path: Path) -> None:
    with LocalCluster(fault_spec(tmp_path / "data", isolation=False)) as cluster:
        topic = await make_topic(cluster, "fault_bad_input")
        async with gateway_stub(cluster.gateway_addr) as stub:
            stream = Publisher(stub, topic, workers=4)
            records, good_in_batches = await asyncio.gather(
                stream.run(GOOD_STREAM, time.monotonic() + 120.0), send_bad_inputs(stub, topic)
            )
        stored = await read_all(cluster.namesrv_addr, topic)

    assert len(records) == GOOD_STREAM
    assert [(r.code, r.remark) for r in records if not r.ok] == []
    expected = [body_of(i) for i in range(GOOD_STREAM)] + [body for _, body in good_in_batches]
    counts = Counter(m.body for _, m in stored)
    assert {body: n for body, n in counts.items() if n != 1} == {}  # nothing twice
    assert sorted(counts) == sorted(expected)  # nothing lost, nothing bad stored
