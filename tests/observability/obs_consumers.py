"""The consumer phase of the observability load: consumer figures every broker of a local cluster must then export.

NEEDS THE CONSUMER SIDE (issue 17): the UpdateSubscriptionGroup / UpdateConsumerOffsets handlers (h/state), pull with
a group and ConsumerSendMsgBack (h/pull), and BrokerMetrics wired to them (controller: ``bind_consumers``; pull and
pop answers: ``on_messages_out``; RetryDlqService: ``on_send_to_dlq``). Without them the calls below fail
(UNIMPLEMENTED) and the tests using this phase fail: expected until those branches are merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.codec import iter_messages
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode

CONSUMER_GROUP: Final = "obs_consumer_group"
PULL_BATCH: Final = 32
CALL_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class ConsumedBroker:
    """What the phase did on one broker: messages of the topic stored there (all unconsumed: offset 0 is committed
    on every queue and pulls commit nothing), messages and stored bytes pulled, messages sent to the DLQ."""

    stored: int
    pulled: int
    pulled_bytes: int
    sent_to_dlq: int


async def consume_on_every_broker(broker_addrs: dict[str, str], topic: str) -> dict[str, ConsumedBroker]:
    """broker name -> what :func:`consume_on_broker` did there."""
    return {name: await consume_on_broker(addr, topic) for name, addr in sorted(broker_addrs.items())}


async def consume_on_broker(addr: str, topic: str) -> ConsumedBroker:
    """Create CONSUMER_GROUP, commit offset 0 on every queue of ``topic``, pull one batch per queue without
    committing, and send the first pulled message straight to the DLQ (delay level -1)."""
    async with grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        config = broker_pb2.SubscriptionGroupConfig(
            group_name=CONSUMER_GROUP, consume_enable=True, retry_max_times=16, retry_queue_nums=1
        )
        created = await stub.UpdateSubscriptionGroup(
            broker_pb2.UpdateSubscriptionGroupRequest(config=config), timeout=CALL_TIMEOUT_S
        )
        assert created.code == ResponseCode.SUCCESS, created.remark
        stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic=topic), timeout=CALL_TIMEOUT_S)
        assert stats.code == ResponseCode.SUCCESS, stats.remark
        queues = {q.queue_id: q.max_offset for q in stats.offsets}
        offsets = [
            broker_pb2.ConsumerQueueOffset(consumer_group=CONSUMER_GROUP, topic=topic, queue_id=q) for q in queues
        ]
        committed = await stub.UpdateConsumerOffsets(
            broker_pb2.UpdateConsumerOffsetsRequest(offsets=offsets), timeout=CALL_TIMEOUT_S
        )
        assert committed.code == ResponseCode.SUCCESS, committed.remark
        assert set(committed.codes) == {ResponseCode.SUCCESS}, list(committed.remarks)
        pulled = pulled_bytes = 0
        first: broker_pb2.ConsumerSendMsgBackRequest | None = None
        for queue_id in sorted(queues):
            request = broker_pb2.PullMessageRequest(
                consumer_group=CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=PULL_BATCH
            )
            answer = await stub.PullMessage(request, timeout=CALL_TIMEOUT_S)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            if answer.status != broker_pb2.PULL_STATUS_FOUND:
                continue
            pulled += answer.message_count
            pulled_bytes += len(answer.message_bytes)
            if first is None:
                msg = next(iter_messages(answer.message_bytes))
                first = broker_pb2.ConsumerSendMsgBackRequest(
                    group=CONSUMER_GROUP,
                    offset=msg.commit_log_offset,
                    delay_level=-1,
                    origin_msg_id=msg.offset_msg_id,
                    origin_topic=topic,
                )
        assert first is not None, f"nothing to pull from {addr}"
        sent_back = await stub.ConsumerSendMsgBack(first, timeout=CALL_TIMEOUT_S)
        assert sent_back.code == ResponseCode.SUCCESS, sent_back.remark
    return ConsumedBroker(stored=sum(queues.values()), pulled=pulled, pulled_bytes=pulled_bytes, sent_to_dlq=1)
