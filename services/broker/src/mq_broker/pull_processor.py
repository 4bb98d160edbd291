"""Pull path of the broker: checks, tag-filtered read of one queue, status mapping, offset commit, long polling.

Mirrors org.apache.rocketmq.broker.processor.PullMessageProcessor (#processRequest checks, #tryCommitOffset,
#executeRequestWhenWakeup), DefaultPullMessageResultHandler (PULL_NOT_FOUND with the suspend flag is held in the
PullRequestHoldService, here mq_broker.consumer.long_polling) and #composeResponseHeader, and the client's
MQClientAPIImpl#processPullResponse (code -> PullStatus, mq_common.protocol.PULL_STATUS_BY_CODE). Requests and
answers are mq_common.protocol's pull headers (the consumer's too). Runs on the event loop; reads are page-cache
copies.
"""

from __future__ import annotations

from mq_common.constants import MixAll, PermName
from mq_common.protocol import (
    PULL_STATUS_BY_CODE,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SubscriptionGroupConfig,
)
from mq_common.response_code import ResponseCode

from mq_broker.consumer.long_polling import LongPollingService, PollingFullError
from mq_broker.consumer.messages_out import MessagesOutObserver
from mq_broker.consumer.offset_manager import ConsumerOffsetManager
from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.ha.read_suggestion import ReadSuggestionPolicy
from mq_broker.send_processor import QUEUE_ID_ILLEGAL_CODE
from mq_broker.store.api import MessageStore
from mq_broker.store.message import GetMessageStatus
from mq_broker.store.message_filter import MessageFilter, SubscriptionData, SubscriptionParseError
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
    """Serves pulls from the store. ``broker_ip`` appears in RocketMQ's NO_PERMISSION remark.

    ``groups`` / ``offsets``: the broker's SubscriptionGroupManager and ConsumerOffsetManager. ``long_polling``
    holds pulls that found nothing (None: never held), for at most ``suspend_max_time_ms``
    (brokerSuspendMaxTimeMillis). ``is_master``: only a master stores the offsets pulls commit (a slave takes
    them from its master through SlaveSynchronize). ``read_suggestion`` sets each answer's
    ``suggest_which_broker_id`` (mq_broker.ha.read_suggestion; None: always the master, 0). ``metrics`` (event
    loop) is told about every answer that carries messages.
    """

    def __init__(
        self,
        store: MessageStore,
        topic_config_manager: TopicConfigManager,
        *,
        broker_permission: int,
        broker_ip: str,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        long_polling: LongPollingService | None = None,
        suspend_max_time_ms: int = 0,
        is_master: bool = True,
        read_suggestion: ReadSuggestionPolicy | None = None,
    ) -> None:
        self.store = store
        self.topics = topic_config_manager
        self.broker_permission = broker_permission
        self.broker_ip = broker_ip
        self.groups = groups
        self.offsets = offsets
        self.long_polling = long_polling
        self.suspend_max_time_ms = suspend_max_time_ms
        self.is_master = is_master
        self.read_suggestion = read_suggestion
        self.metrics: MessagesOutObserver | None = None

    async def pull(self, request: PullMessageRequestHeader, peer_host: str = "") -> PullMessageResponseHeader:
        """Checks, DefaultMessageStore#getMessage, the offset commit, then long polling.

        Error codes: INVALID_PARAMETER (29: negative offset or commit offset, max_msg_nums < 1), NO_PERMISSION (16:
        broker or topic not readable, group's consumeEnable false), SUBSCRIPTION_GROUP_NOT_EXIST (26: unknown group,
        not auto-created), TOPIC_NOT_EXIST (17), QUEUE_ID_ILLEGAL_CODE (queue id out of range),
        SUBSCRIPTION_PARSE_FAILED (23). Found/not-found outcomes carry a PullStatus.

        Once the checks pass, ``commit_offset`` (when set, on a master) is stored for the group. A pull that finds
        nothing (PULL_NOT_FOUND: an empty queue, or ``queue_offset`` == max) with ``suspend_timeout_ms`` > 0 is
        held until a message arrives on its queue or min(suspend_timeout_ms, suspend_max_time_ms) pass, then read
        again once and answered (PULL_NOT_FOUND again after the timeout, or a message that does not match the
        tags: PULL_RETRY_IMMEDIATELY). More than the long polling bound held at once: POLLING_FULL (209) at once
        (RocketMQ holds pulls without a bound; the client backs off on it instead of pulling again at once).
        A cancelled call (the client went away) frees its slot at once.
        """
        refused = self._check(request, peer_host)
        if refused is not None:
            return refused
        group = self.groups.find_subscription_group_config(request.consumer_group)
        assert group is not None  # _check answered SUBSCRIPTION_GROUP_NOT_EXIST otherwise
        try:
            subscription = SubscriptionData.build(request.subscription)
        except SubscriptionParseError:
            return PullMessageResponseHeader(
                int(ResponseCode.SUBSCRIPTION_PARSE_FAILED), "parse the consumer's subscription failed"
            )
        message_filter = None if subscription.is_sub_all else subscription
        response = self._get(request, message_filter, group)
        self._try_commit_offset(request, peer_host)
        suspend_ms = min(request.suspend_timeout_ms, self.suspend_max_time_ms)
        if response.code != ResponseCode.PULL_NOT_FOUND or suspend_ms <= 0 or self.long_polling is None:
            return self._counted(request, response)
        # No await since the read above: a message stored from here on wakes the registration made below.
        try:
            await self.long_polling.wait_for_arrival(request.topic, (request.queue_id,), suspend_ms)
        except PollingFullError as exc:
            return PullMessageResponseHeader(int(ResponseCode.POLLING_FULL), f"pull polling full: {exc}")
        return self._counted(request, self._get(request, message_filter, group))

    def _counted(
        self, request: PullMessageRequestHeader, response: PullMessageResponseHeader
    ) -> PullMessageResponseHeader:
        if self.metrics is not None and response.message_count:
            self.metrics.on_messages_out(
                request.topic, request.consumer_group, response.message_count, len(response.message_bytes),
                is_retry=request.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX),
            )  # fmt: skip
        return response

    def _get(
        self, request: PullMessageRequestHeader, message_filter: MessageFilter | None, group: SubscriptionGroupConfig
    ) -> PullMessageResponseHeader:
        result = self.store.get_messages(
            request.topic, request.queue_id, request.queue_offset, request.max_msg_nums, message_filter
        )
        code = _CODE_BY_STATUS[result.status]
        no_queue_data = (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
        if result.status in no_queue_data and request.queue_offset != 0:
            code = ResponseCode.PULL_OFFSET_MOVED
        suggest = MixAll.MASTER_ID
        if self.read_suggestion is not None:
            suggestion = self.read_suggestion.suggest(group, result.messages)
            suggest = suggestion.broker_id
            if suggestion.retry_immediately:  # a slave sends the consumer to its master at once (no offset move)
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
        return PullMessageResponseHeader(
            code=int(code),
            remark=result.status.value,
            status=PULL_STATUS_BY_CODE[code],
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            message_bytes=b"".join(result.messages),
            message_count=result.message_count,
            suggest_which_broker_id=suggest,
        )

    def _try_commit_offset(self, request: PullMessageRequestHeader, peer_host: str) -> None:
        """PullMessageProcessor#tryCommitOffset: the commit a pull carries, stored on a master only."""
        if request.commit_offset is not None and self.is_master:
            self.offsets.commit_offset(
                peer_host, request.consumer_group, request.topic, request.queue_id, request.commit_offset
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
        if request.commit_offset is not None and request.commit_offset < 0:
            return PullMessageResponseHeader(
                int(ResponseCode.INVALID_PARAMETER), f"commitOffset[{request.commit_offset}] must be >= 0"
            )
        if not PermName.is_readable(self.broker_permission):
            return PullMessageResponseHeader(
                int(ResponseCode.NO_PERMISSION), f"the broker[{self.broker_ip}] pulling message is forbidden"
            )
        return self._check_group(request.consumer_group) or self._check_topic(request, peer_host)

    def _check_group(self, group: str) -> PullMessageResponseHeader | None:
        config = self.groups.find_subscription_group_config(group)
        if config is None:
            return PullMessageResponseHeader(
                int(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
                f"subscription group [{group}] does not exist, create it first (mqadmin updateSubGroup)",
            )
        if not config.consume_enable:
            return PullMessageResponseHeader(
                int(ResponseCode.NO_PERMISSION), f"subscription group no permission, {group}"
            )
        return None

    def _check_topic(self, request: PullMessageRequestHeader, peer_host: str) -> PullMessageResponseHeader | None:
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
