"""The pieces of controller mode without processes: the master lease, the SyncStateSet rule of the group transfer,
the HA handshake encoding, and the gateway's route invalidation when a handle's broker does not answer."""

from __future__ import annotations

import asyncio
from typing import Any

from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf.duration_pb2 import Duration
from mq_broker.ha.lease import LEASE_EXPIRED_REMARK, NOT_MASTER_REMARK, MasterLease
from mq_broker.ha.protocol import (
    ANSWER_HEADER,
    HANDSHAKE_ACCEPTED,
    HANDSHAKE_HEADER,
    HANDSHAKE_MARKER,
    REPORT,
    decode_entries,
    encode_answer,
    encode_handshake,
)
from mq_broker.store.group_transfer import GroupTransferService
from mq_broker.store.message import PutMessageStatus
from mq_common.errors import RemotingError
from mq_common.protocol.pop import ReceiptHandle
from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.handles import ReceiptHandleActivity


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_lease_holds_for_lease_ms_from_the_heartbeat_sent_and_never_goes_back() -> None:
    clock = Clock()
    lease = MasterLease(2_000, clock)
    assert lease.refusal() == NOT_MASTER_REMARK
    lease.renew(3, sent_at_s=100.0)
    clock.now_s = 101.9
    assert lease.refusal() is None
    lease.renew(3, sent_at_s=99.0)  # an older heartbeat's late answer extends nothing
    lease.renew(2, sent_at_s=101.5)  # nor does an older epoch
    clock.now_s = 102.0
    assert lease.refusal() == LEASE_EXPIRED_REMARK
    lease.renew(3, sent_at_s=101.9)
    assert lease.held
    lease.revoke()
    assert lease.refusal() == NOT_MASTER_REMARK


async def test_controller_mode_counts_only_sync_state_set_members_and_follows_its_size() -> None:
    transfer = GroupTransferService(in_sync_replicas=2, max_gap_bytes=1 << 20, timeout_ms=60_000)
    transfer.set_sync_state_set(frozenset(), set_size=1)  # the master alone in the set: it acknowledges alone
    assert transfer.needed_copies() == 1
    assert await transfer.put_request(100, 100) is PutMessageStatus.PUT_OK

    transfer.on_slave_ack("outsider:1", 500)
    transfer.set_sync_state_set(frozenset({"member:1"}), set_size=2)
    assert transfer.needed_copies() == 2
    assert await transfer.put_request(400, 500) is PutMessageStatus.SLAVE_NOT_AVAILABLE  # the member is not connected
    transfer.on_slave_ack("member:1", 300)
    waiting = transfer.put_request(400, 500)
    transfer.on_slave_ack("outsider:1", 600)  # not a member: does not count
    await asyncio.sleep(0)
    assert not waiting.done()
    transfer.on_slave_ack("member:1", 400)
    assert await waiting is PutMessageStatus.PUT_OK

    stuck = transfer.put_request(900, 900)
    transfer.set_sync_state_set(frozenset(), set_size=1)  # the member left the set: the master goes on alone
    assert await stuck is PutMessageStatus.PUT_OK


def test_min_in_sync_replicas_is_a_floor() -> None:
    transfer = GroupTransferService(3, 1 << 20, 60_000, min_in_sync_replicas=2)
    transfer.set_sync_state_set(frozenset(), set_size=1)
    assert transfer.needed_copies() == 2
    transfer.set_sync_state_set(frozenset({"a", "b", "c"}), set_size=5)
    assert transfer.needed_copies() == 3
    transfer.set_sync_state_set(None)
    assert transfer.needed_copies() == 3


def test_handshake_and_answer_layout() -> None:
    entries = ((1, 0, 4096), (3, 4096, 9000))
    raw = encode_handshake(2, 9000, entries)
    assert REPORT.unpack_from(raw, 0)[0] == HANDSHAKE_MARKER
    assert HANDSHAKE_HEADER.unpack_from(raw, REPORT.size) == (2, 9000, 2)
    assert decode_entries(raw[REPORT.size + HANDSHAKE_HEADER.size :], 2) == entries
    answer = encode_answer(HANDSHAKE_ACCEPTED, 1, entries[:1])
    assert ANSWER_HEADER.unpack_from(answer, 0) == (HANDSHAKE_ACCEPTED, 1, 1)
    assert len(answer) == ANSWER_HEADER.size + 20


class _Routes:
    def __init__(self) -> None:
        self.invalidated: list[str] = []

    async def master_addr(self, topic: str, broker_name: str) -> str:
        return "127.0.0.9:10911"

    def invalidate(self, topic: str) -> None:
        self.invalidated.append(topic)


class _DeadBroker:
    async def change_invisible_time(self, *args: Any) -> Any:
        raise RemotingError("connect to <127.0.0.9:10911> failed")

    async def ack_message(self, *args: Any) -> Any:
        raise RemotingError("connect to <127.0.0.9:10911> failed")


async def test_gateway_forgets_the_route_when_the_handles_broker_does_not_answer() -> None:
    routes = _Routes()
    activity = ReceiptHandleActivity(routes, _DeadBroker(), None, ConsumerActivityConfig())  # type: ignore[arg-type]
    handle = ReceiptHandle(0, 1_000, 30_000, 0, "0", "broker-a", 0, 5, 100).encode()
    request = service_pb2.ChangeInvisibleDurationRequest(
        group=definition_pb2.Resource(name="g"),
        topic=definition_pb2.Resource(name="t"),
        receipt_handle=handle,
        invisible_duration=Duration(seconds=10),
    )
    answer = await activity.change_invisible_duration(request)
    assert answer.status.code != definition_pb2.Code.OK
    assert routes.invalidated == ["t"]
    acked = await activity.ack_message(
        service_pb2.AckMessageRequest(
            group=definition_pb2.Resource(name="g"),
            topic=definition_pb2.Resource(name="t"),
            entries=[service_pb2.AckMessageEntry(message_id="m", receipt_handle=handle)],
        )
    )
    assert acked.status.code != definition_pb2.Code.OK
    assert routes.invalidated == ["t", "t"]
    await activity.close()
