"""v2 SendMessage of TRANSACTION messages and v2 EndTransaction through a real gateway and cluster: the half message
waits (nothing on the topic), its transaction_id names it (broker, offsets, UNIQ_KEY), a commit delivers it once
(with the recovery duration as CHECK_IMMUNITY_TIME_IN_SECONDS), and every bad end gets its code and changes
nothing: blank, garbage or foreign transaction ids INVALID_TRANSACTION_ID 40008, a second commit or a rollback after
it BAD_REQUEST 40000 naming how it ended, an unspecified resolution OK with nothing done."""

from __future__ import annotations

import asyncio
import base64

from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import duration_pb2
from mq_common.codec import MessageExt
from mq_gateway.v2.transactions import TransactionId, decode_transaction_id, encode_transaction_id
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all

from tests.v2.conftest import Gateway, make_typed_topic, metadata, resource
from tests.v2.test_v2_send_message import send, v2_message

Code = definition_pb2.Code
COMMIT = definition_pb2.TransactionResolution.COMMIT
ROLLBACK = definition_pb2.TransactionResolution.ROLLBACK
MSG_ID = "0102FC000000013D600B1777E800000099"


async def end(
    gateway: Gateway, topic: str, transaction_id: str, resolution: int, message_id: str = MSG_ID
) -> definition_pb2.Status:
    request = service_pb2.EndTransactionRequest(
        topic=resource(topic),
        message_id=message_id,
        transaction_id=transaction_id,
        resolution=resolution,  # type: ignore[arg-type]
        source=definition_pb2.TransactionSource.SOURCE_CLIENT,
    )
    answer = await gateway.stub.EndTransaction(request, metadata=metadata(), timeout=10)
    return answer.status  # type: ignore[no-any-return]


async def read_until(cluster: LocalCluster, topic: str, count: int) -> list[MessageExt]:
    async with asyncio.timeout(20):
        while True:
            found = await read_all(cluster.namesrv_addr, topic)
            if len(found) >= count:
                return [m for _, m in found]
            await asyncio.sleep(0.1)


def test_transaction_ids_round_trip_and_refuse_garbage() -> None:
    tid = TransactionId("broker-a", 1234, 5, MSG_ID)
    assert decode_transaction_id(encode_transaction_id(tid)) == tid
    not_numbers = base64.urlsafe_b64encode(b"v1 b x 2 K").decode()
    for bad in ("", "x", "djEgYiAxIDI=", not_numbers, "***"):
        try:
            decode_transaction_id(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


async def test_a_committed_transaction_is_delivered_once(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_typed_topic(cluster, "v2_tx", "TRANSACTION", queues=1)
    message = v2_message(
        topic,
        b"tx-body",
        MSG_ID,
        message_type=definition_pb2.MessageType.TRANSACTION,
        orphaned_transaction_recovery_duration=duration_pb2.Duration(seconds=30),
    )
    answer = await send(gateway, message)
    assert answer.status.code == Code.OK, answer.status.message
    (entry,) = answer.entries
    tid = decode_transaction_id(entry.transaction_id)
    assert (tid.uniq_key, tid.tran_state_table_offset) == (MSG_ID, entry.offset)
    assert tid.broker_name.startswith("broker-")
    await asyncio.sleep(0.3)
    assert await read_all(cluster.namesrv_addr, topic) == [], "a half message is not on its topic"
    for bad_id, message_id in (("", MSG_ID), ("garbage!", MSG_ID), (entry.transaction_id, "OTHER")):
        status = await end(gateway, topic, bad_id, COMMIT, message_id)
        assert status.code == Code.INVALID_TRANSACTION_ID, (bad_id, status.message)
    foreign = encode_transaction_id(TransactionId(tid.broker_name, tid.commit_log_offset + 1, 0, MSG_ID))
    status = await end(gateway, topic, foreign, COMMIT)
    assert (status.code, "Find prepared" in status.message) == (Code.INVALID_TRANSACTION_ID, True), status.message
    unknown = await end(gateway, topic, entry.transaction_id, definition_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED)
    assert unknown.code == Code.OK
    status = await end(gateway, topic, entry.transaction_id, COMMIT)
    assert status.code == Code.OK, status.message
    (msg,) = await read_until(cluster, topic, 1)
    assert (msg.body, msg.uniq_key) == (b"tx-body", MSG_ID)
    assert msg.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert "TRAN_MSG" not in msg.properties
    for again in (COMMIT, ROLLBACK):
        status = await end(gateway, topic, entry.transaction_id, again)
        assert (status.code, "already committed" in status.message) == (Code.BAD_REQUEST, True), status.message
    await asyncio.sleep(0.3)
    assert len(await read_all(cluster.namesrv_addr, topic)) == 1
