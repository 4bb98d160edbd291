"""Send outcomes. Mirrors org.apache.rocketmq.client.producer.{SendResult, SendStatus} and
org.apache.rocketmq.client.impl.CommunicationMode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode


class SendStatus(Enum):
    """How durable a stored message is. Mirrors SendStatus.

    Every value means the broker stored the message; only SEND_OK means it also met the broker's flush and
    replication policy.
    """

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


# MQClientAPIImpl#processSendResponse: the response codes that carry a SendResult.
SEND_STATUS_BY_CODE: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class CommunicationMode(Enum):
    """SYNC waits and retries (1 + retry_times_when_send_failed attempts); ASYNC and ONEWAY make one attempt
    in the core send loop. Mirrors CommunicationMode."""

    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


@dataclass(frozen=True, slots=True)
class SendResult:
    """A stored message. Mirrors SendResult.

    ``msg_id`` is the client id (UNIQ_KEY, 32 hex chars); ``offset_msg_id`` the broker's offset id
    (hex of store host, port, commit log offset); ``message_queue`` the queue it landed in (topic, broker
    name, queue id from the broker's answer); ``queue_offset`` its logical offset in that queue;
    ``recall_handle`` the handle that recalls a timer message (DefaultMQProducer.recall_message), "" for others.
    """

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    recall_handle: str = ""


@dataclass(frozen=True, slots=True)
class MessageBatchResult:
    """A stored MessageBatch (one SEND_BATCH_MESSAGE): the SendResults of its messages, by column.

    Message ``i`` of the batch has UNIQ_KEY ``msg_ids[i]``, offset msg id ``offset_msg_ids[i]`` and queue offset
    ``queue_offset + i`` in ``message_queue``; ``send_status`` is the whole batch's.
    """

    send_status: SendStatus
    msg_ids: Sequence[str]
    offset_msg_ids: Sequence[str]
    message_queue: MessageQueue
    queue_offset: int

    def __len__(self) -> int:
        return len(self.msg_ids)

    def results(self) -> list[SendResult]:
        """One SendResult per message, in order."""
        status, mq, first = self.send_status, self.message_queue, self.queue_offset
        return [
            SendResult(status, msg_id, offset_id, mq, first + i)
            for i, (msg_id, offset_id) in enumerate(zip(self.msg_ids, self.offset_msg_ids, strict=True))
        ]
