"""Pull path of the broker: checks, tag-filtered read of one queue, status mapping.

Mirrors org.apache.rocketmq.broker.processor.PullMessageProcessor (#processRequest checks and
#composeResponseHeader) and the client's MQClientAPIImpl#processPullResponse (code -> PullStatus,
mq_common.protocol.PULL_STATUS_BY_CODE). Requests and answers are mq_common.protocol's pull headers (the
consumer's too). Runs on the event loop; reads are page-cache copies.
"""

from __future__ import annotations

from mq_common.constants import PermName
from mq_common.protocol import PULL_STATUS_BY_CODE, PullMessageRequestHeader, PullMessageResponseHeader
from mq_common.response_code import ResponseCode

from mq_broker.send_processor import QUEUE_ID_ILLEGAL_CODE
from mq_broker.store.api import MessageStore
from mq_broker.store.message import GetMessageStatus
from mq_broker.store.message_filter import SubscriptionData, SubscriptionParseError
from mq_broker.topic_config import TopicConfigManager

# PullMessageProcessor#composeResponseHeader; "0 != offset" turns NO_MESSAGE_IN_QUEUE into OFFSET_MOVED.
_CODE_BY_STATUS: dict[GetMessageStatus, ResponseCode] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor:
    """Serves pulls from the store. ``broker_ip`` appears in RocketMQ's NO_PERMISSION remark."""

    def __init__(
        self,
        store: MessageStore,
        topic_config_manager: TopicConfigManager,
        *,
        broker_permission: int,
        broker_ip: str,
    ) -> None:
        self.store = store
        self.topics = topic_config_manager
        self.broker_permission = broker_permission
        self.broker_ip = broker_ip

    def pull(self, request: PullMessageRequestHeader, peer_host: str = "") -> PullMessageResponseHeader:
        """Checks then DefaultMessageStore#getMessage. Error codes: INVALID_PARAMETER (29, negative offset or
        max_msg_nums < 1), NO_PERMISSION (16), TOPIC_NOT_EXIST (17), QUEUE_ID_ILLEGAL_CODE (queue id out of
        range), SUBSCRIPTION_PARSE_FAILED (23). Found/not-found outcomes carry a PullStatus.
        """
        refused = self._check(request, peer_host)
        if refused is not None:
            return refused
        try:
            subscription = SubscriptionData.build(request.subscription)
        except SubscriptionParseError:
            return PullMessageResponseHeader(
                int(ResponseCode.SUBSCRIPTION_PARSE_FAILED), "parse the consumer's subscription failed"
            )
        result = self.store.get_messages(
            request.topic,
            request.queue_id,
            request.queue_offset,
            request.max_msg_nums,
            None if subscription.is_sub_all else subscription,
        )
        code = _CODE_BY_STATUS[result.status]
        no_queue_data = (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
        if result.status in no_queue_data and request.queue_offset != 0:
            code = ResponseCode.PULL_OFFSET_MOVED
        return PullMessageResponseHeader(
            code=int(code),
            remark=result.status.value,
            status=PULL_STATUS_BY_CODE[code],
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            message_bytes=b"".join(result.messages),
            message_count=result.message_count,
        )

    def _check(self, request: PullMessageRequestHeader, peer_host: str) -> PullMessageResponseHeader | None:
        if request.max_msg_nums < 1:
            return PullMessageResponseHeader(
                int(ResponseCode.INVALID_PARAMETER), f"maxMsgNums[{request.max_msg_nums}] must be > 0"
            )
        if request.queue_offset < 0:
            return PullMessageResponseHeader(
                int(ResponseCode.INVALID_PARAMETER), f"queueOffset[{request.queue_offset}] must be >= 0"
            )
        if not PermName.is_readable(self.broker_permission):
            return PullMessageResponseHeader(
                int(ResponseCode.NO_PERMISSION), f"the broker[{self.broker_ip}] pulling message is forbidden"
            )
        config = self.topics.select_topic_config(request.topic)
        if config is None:
            return PullMessageResponseHeader(
                int(ResponseCode.TOPIC_NOT_EXIST), f"topic[{request.topic}] not exist, apply first please!"
            )
        if not PermName.is_readable(config.perm):
            return PullMessageResponseHeader(
                int(ResponseCode.NO_PERMISSION), f"the topic[{request.topic}] pulling message is forbidden"
            )
        if request.queue_id < 0 or request.queue_id >= config.read_queue_nums:
            return PullMessageResponseHeader(
                int(QUEUE_ID_ILLEGAL_CODE),
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{peer_host}]",
            )
        return None
