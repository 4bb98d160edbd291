"""CONSUMER_SEND_MSG_BACK: a consumer gives a message back for another delivery (or the dead letter queue).

Mirrors org.apache.rocketmq.broker.processor.AbstractSendMessageProcessor#consumerSendMsgBack: checks, the
original looked up by its CommitLog offset, then mq_broker.consumer.retry_dlq.RetryDlqService stores it on
``%RETRY%<group>`` / ``%DLQ%<group>``. Runs on the event loop.
"""

from __future__ import annotations

from mq_common.codec import MessageDecodeError, MessageExt
from mq_common.constants import PermName
from mq_common.errors import MQBrokerError
from mq_common.protocol import ConsumerSendMsgBackRequestHeader
from mq_common.response_code import ResponseCode

from mq_broker.consumer.retry_dlq import RetryDlqService
from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.store.api import MessageStore
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import PutMessageStatus
from mq_broker.store.message_store import SLAVE_PUT_REMARK


class ConsumerSendMsgBackProcessor:
    """Gives messages back through ``retry_dlq``. ``broker_ip`` appears in RocketMQ's NO_PERMISSION remark."""

    def __init__(
        self,
        store: MessageStore,
        groups: SubscriptionGroupManager,
        retry_dlq: RetryDlqService,
        *,
        broker_permission: int,
        broker_ip: str,
    ) -> None:
        self.store = store
        self.groups = groups
        self.retry_dlq = retry_dlq
        self.broker_permission = broker_permission
        self.broker_ip = broker_ip

    async def consumer_send_msg_back(self, request: ConsumerSendMsgBackRequestHeader, peer_host: str = "") -> None:
        """Store the message at CommitLog ``request.offset`` again for ``request.group`` (see
        RetryDlqService.send_back for where and how). Returns when it is stored (PUT_OK).

        Raises MQBrokerError: SUBSCRIPTION_GROUP_NOT_EXIST (26, unknown group, not auto-created);
        SERVICE_NOT_AVAILABLE (14) on a SLAVE; NO_PERMISSION
        (16: the broker is not writeable, the group's consumeEnable is false, or the retry topic is not writeable);
        SYSTEM_ERROR (1) "look message by offset failed, <offset>" when no intact message starts at that offset,
        or with the put status's name when the store did not take it (FLUSH_DISK_TIMEOUT included: the consumer
        then sends it again itself).
        """
        group = request.group
        config = self.groups.find_subscription_group_config(group)
        if config is None:
            raise MQBrokerError(f"subscription group not exist, {group}", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
        if self.store.broker_role is BrokerRole.SLAVE:  # before the retry topic is created
            raise MQBrokerError(SLAVE_PUT_REMARK, ResponseCode.SERVICE_NOT_AVAILABLE)
        if not PermName.is_writeable(self.broker_permission):
            raise MQBrokerError(
                f"the broker[{self.broker_ip}] sending message is forbidden", ResponseCode.NO_PERMISSION
            )
        if not config.consume_enable:
            raise MQBrokerError(f"subscription group no permission, {group}", ResponseCode.NO_PERMISSION)
        msg = self._look_message(request.offset)
        result = await self.retry_dlq.send_back(
            msg,
            group=group,
            delay_level=request.delay_level,
            max_reconsume_times=request.max_reconsume_times,
            client_host=peer_host,
            hold_delay=True,
        )
        if result.status is not PutMessageStatus.PUT_OK:
            raise MQBrokerError(result.status.value, ResponseCode.SYSTEM_ERROR)

    def _look_message(self, offset: int) -> MessageExt:
        """DefaultMessageStore#lookMessageByOffset, or SYSTEM_ERROR with RocketMQ's remark."""
        msg: MessageExt | None = None
        if offset >= 0:
            try:
                msg = self.store.lookup_message_by_offset(offset)
            except MessageDecodeError:
                msg = None
        if msg is None:
            raise MQBrokerError(f"look message by offset failed, {offset}", ResponseCode.SYSTEM_ERROR)
        return msg
