"""Helpers for the transaction tests: half-message sends, END_TRANSACTION requests, and what a topic or a system
queue holds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from broker_grpc_testkit import send_request, stream_send
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.codec import MessageExt, decode_message, iter_messages
from mq_common.constants import MessageSysFlag
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


TOPIC = "TxTopic"
COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


async def send_half(
    stub: broker_pb2_grpc.BrokerAsyncStub, uniq: str, born_ms: int = 1_700_000_000_000, **props: str
) -> broker_pb2.SendMessageResponse:
    """A half message of producer group PG to TOPIC queue 1 (born in 2023 unless ``born_ms``: checkable at once)."""
    request = send_request(TOPIC, uniq.encode(), 1, UNIQ_KEY=uniq, TAGS="T", TRAN_MSG="true", **props)
    request.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    request.born_timestamp_ms = born_ms
    answer: broker_pb2.SendMessageResponse = await stream_send(stub, request)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer


def end_request(sent: broker_pb2.SendMessageResponse, kind: int, **overrides: Any) -> broker_pb2.EndTransactionRequest:
    values: dict[str, Any] = {
        "producer_group": "PG",
        "tran_state_table_offset": sent.queue_offset,
        "commit_log_offset": decode_offset_msg_id(sent.msg_id)[2],
        "commit_or_rollback": kind,
        "msg_id": sent.transaction_id,
        "transaction_id": sent.transaction_id,
        "topic": TOPIC,
    }
    values.update(overrides)
    return broker_pb2.EndTransactionRequest(**values)


async def pulled(stub: broker_pb2_grpc.BrokerAsyncStub, topic: str = TOPIC, queue_id: int = 1) -> list[MessageExt]:
    resp = await stub.PullMessage(
        broker_pb2.PullMessageRequest(
            consumer_group="G", topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=32
        )
    )
    return list(iter_messages(resp.message_bytes)) if resp.status == broker_pb2.PULL_STATUS_FOUND else []


async def stored(controller: BrokerController, topic: str, count: int | None = None) -> list[MessageExt]:
    """The records of ``topic`` queue 0 read from the store (system topics cannot be pulled); with ``count``, once
    there are that many (the ConsumeQueue is built asynchronously)."""
    async with asyncio.timeout(10):
        while True:
            assert controller.store is not None
            result = controller.store.get_messages(topic, 0, 0, 64)
            found = [decode_message(r) for r in result.messages]
            if count is None or len(found) >= count:
                return found
            await asyncio.sleep(0.02)
