"""Send path of the broker: msgCheck, build the stored message, put the batch, map the store result.

Mirrors org.apache.rocketmq.broker.processor.{AbstractSendMessageProcessor#msgCheck,
SendMessageProcessor#sendMessage/#handlePutMessageResult}. Every item of a batch is checked
on its own: a bad item fails only itself; the good ones are stored together under one store write lock and
wait for one group commit.

Runs on the event loop. Requests and outcomes are mq_common.protocol's send headers (the client's too); business
outcomes are ``SendMessageResponseHeader.code`` + ``remark`` (RocketMQ numbers).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

from mq_common.codec import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    decode_properties,
    encode_properties,
    host_to_bytes,
    split_host_port,
)
from mq_common.constants import (
    MAX_PROPERTIES_SIZE_BYTES,
    TRANS_HALF_TOPIC,
    MessageConst,
    MixAll,
    PermName,
    is_client_forbidden_send_topic,
    validate_topic,
)
from mq_common.errors import (
    InvalidParameterError,
    MessageIllegalError,
    MQBrokerError,
    MQError,
    NoPermissionError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from mq_common.protocol import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicConfig,
)
from mq_common.record_layout import HOST_V6_FLAGS
from mq_common.response_code import ResponseCode

from mq_broker.schedule.schedule_hook import ScheduleHook
from mq_broker.store.api import MessageStore
from mq_broker.store.commit_log import MESSAGE_ILLEGAL_REMARK
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import (
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    tags_string_to_tags_code,
)
from mq_broker.store.message_store import SLAVE_PUT_REMARK
from mq_broker.topic_config import TopicConfigManager
from mq_broker.topic_message_type import check_message_type
from mq_broker.transaction.half_batch import half_message_batch
from mq_broker.transaction.half_message import half_placement, is_half_send
from mq_broker.transaction.transaction_state import TransactionState

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics

# RocketMQ up to 5.3 answered an out-of-range queue id with SYSTEM_ERROR; apache/rocketmq#9027 (Dec 2024) answers
# INVALID_PARAMETER (sends and pulls), as we do: SYSTEM_ERROR is kept for failures inside the broker, and a bad
# queue id is the request's fault (the fuzz harness counts SYSTEM_ERROR as a finding).
QUEUE_ID_ILLEGAL_CODE: Final = ResponseCode.INVALID_PARAMETER
SHUTTING_DOWN_REMARK: Final = "the broker is shutting down, message store has been shut down"
# SendMessageProcessor#handlePutMessageResult: a stored message's code (sendOK, with its id and queue offset).
_STORED_CODES: Final = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
AUTO_CREATE_ROUTE_WAIT_S: Final = 1.0
"""How long a send that auto-created a topic waits for the registration round that publishes its route."""
_UNKNOWN_HOST: Final = host_to_bytes("0.0.0.0", 0)


class SendMessageProcessor:
    """Checks and stores sends. ``broker_ip`` appears in RocketMQ's NO_PERMISSION remark."""

    def __init__(
        self,
        store: MessageStore,
        topic_config_manager: TopicConfigManager,
        *,
        broker_permission: int,
        broker_ip: str,
        cluster_name: str,
        max_message_size_bytes: int,
    ) -> None:
        self.store = store
        self.topics = topic_config_manager
        self.broker_permission = broker_permission
        self.broker_ip = broker_ip
        self.cluster_name = cluster_name
        self.max_message_size_bytes = max_message_size_bytes
        self.accepting = True
        # BrokerConfig.enableTopicMessageTypeCheck, and the delay/timer hook (None: nothing is held).
        self.enable_topic_message_type_check = True
        self.schedule_hook: ScheduleHook | None = None
        self.transaction_state: TransactionState | None = None
        self._random = random.Random()
        self.metrics: BrokerMetrics | None = None
        # Set by the controller to BrokerRegistrar.next_round: a send that auto-created a topic is answered once
        # the name servers have its route (at most AUTO_CREATE_ROUTE_WAIT_S later), so a consumer that asks for the
        # route right after the first send finds it.
        self.route_published: Callable[[], Awaitable[None]] | None = None

    async def _publish_created_topics(self, version_before: object) -> None:
        """After a put: when the topic table changed since ``version_before`` (a topic was auto-created), wait for
        a registration round, bounded by AUTO_CREATE_ROUTE_WAIT_S (a slow name server only delays the answer)."""
        if self.route_published is None or self.topics.data_version == version_before:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(AUTO_CREATE_ROUTE_WAIT_S):
                await self.route_published()

    def _count_half_messages(
        self, inners: Sequence[MessageExtBrokerInner], real_topics: Sequence[str], results: Sequence[PutMessageResult]
    ) -> None:
        """Tell the transaction state of every stored half message (its open count by real topic: the topic its
        request named, REAL_TOPIC of the stored half message)."""
        state = self.transaction_state
        assert state is not None
        for inner, topic, result in zip(inners, real_topics, results, strict=True):
            if inner.topic == TRANS_HALF_TOPIC and result.status.is_stored:
                state.on_half_stored(topic)

    def stop_accepting(self) -> None:
        """Later sends get SERVICE_NOT_AVAILABLE (SIGTERM, first step)."""
        self.accepting = False

    async def send_batch(
        self, requests: Sequence[SendMessageRequestHeader], peer_host: str = ""
    ) -> list[SendMessageResponseHeader]:
        """Check every request, store the valid ones together, one reply per request in order.

        ``peer_host`` (``"ip:port"``) stands in for an empty ``born_host``. Never raises for a bad request.
        """
        replies: list[SendMessageResponseHeader | None] = [None] * len(requests)
        inners: list[MessageExtBrokerInner] = []
        uniq_keys: list[str] = []
        positions: list[int] = []
        queue_ids: list[int] = []
        version_before = self.topics.data_version
        for i, request in enumerate(requests):
            try:
                inner, uniq_key, queue_id = self._prepare(request, peer_host)
            except MQError as exc:
                replies[i] = SendMessageResponseHeader.of_error(exc)
            else:
                inners.append(inner)
                uniq_keys.append(uniq_key)
                positions.append(i)
                queue_ids.append(queue_id)
        if inners:
            begin = time.perf_counter()
            results = await self.store.put_messages(inners)
            if self.metrics is not None:
                self.metrics.on_put(inners, results, (time.perf_counter() - begin) * 1000.0, peer_host)
            if self.transaction_state is not None:
                self._count_half_messages(inners, [requests[i].topic for i in positions], results)
            for i, queue_id, uniq_key, result in zip(positions, queue_ids, uniq_keys, results, strict=True):
                replies[i] = self._reply_for(result, queue_id, uniq_key)
            await self._publish_created_topics(version_before)
        out = [r for r in replies if r is not None]
        assert len(out) == len(requests)
        return out

    async def send_message_batch(
        self, request: SendMessageBatchRequestHeader, peer_host: str = ""
    ) -> SendMessageBatchResponseHeader:
        """SendMessageProcessor#sendBatchMessage: msgCheck of the header (the whole body counts against
        max_message_size_bytes), then every message stored or none. Retry topics are refused (MESSAGE_ILLEGAL, as
        RocketMQ). Never raises for a bad request.

        Beyond RocketMQ (which refuses it): a batch whose sysflag asks for half messages (TRANSACTION_PREPARED_TYPE,
        mq_client.producer.batch_transaction) is stored in one put as half messages of its topic and queue
        (mq_broker.transaction.half_batch), each counted open by the transaction state; its message type is checked
        against the topic's (a topic that declares another type than TRANSACTION or MIXED: MESSAGE_ILLEGAL 13). The
        answer names the real queue and the half queue's offsets, as a single half send's does.
        """
        header = SendMessageRequestHeader(
            topic=request.topic,
            body=request.body,
            queue_id=request.queue_id,
            producer_group=request.producer_group,
            default_topic=request.default_topic,
            default_topic_queue_nums=request.default_topic_queue_nums,
        )
        version_before = self.topics.data_version
        try:
            if not self.accepting:
                raise ServiceNotAvailableError(SHUTTING_DOWN_REMARK)
            config, queue_id = self.msg_check(header, peer_host)
            if request.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                raise MessageIllegalError(f"batch request does not support retry group {request.topic}")
            if ScheduleHook.may_hold(request.properties) and ScheduleHook.asks_delay(
                decode_properties(request.properties)
            ):
                raise MessageIllegalError("TimeDelayLevel or a delivery time is not supported for batching")
            properties = decode_properties(request.properties)
            half = is_half_send(request.sys_flag)
            if half and self.enable_topic_message_type_check:
                check_message_type(config, properties)
        except MQError as exc:
            return SendMessageBatchResponseHeader(code=int(exc.code), remark=exc.remark)
        sys_flag = request.sys_flag & ~HOST_V6_FLAGS
        born_host = _born_host_bytes(request.born_host, peer_host)
        if half:
            batch = half_message_batch(request, queue_id, properties, sys_flag, born_host, self._with_cluster)
        else:
            batch = MessageExtBatch(
                topic=request.topic,
                queue_id=queue_id,
                body=request.body,
                properties_string=self._with_cluster(request.properties, properties),
                sys_flag=sys_flag,
                born_timestamp_ms=request.born_timestamp_ms,
                born_host=born_host,
                wait_store_msg_ok=properties.get(MessageConst.WAIT_STORE_MSG_OK, "true") != "false",
            )
        begin = time.perf_counter()
        result = await self.store.put_message_batch(batch)
        if self.metrics is not None:
            self.metrics.on_put_batch(batch, result, (time.perf_counter() - begin) * 1000.0, peer_host)
        if half and self.transaction_state is not None and result.status.is_stored:
            self.transaction_state.on_half_stored(request.topic, result.msg_num)
        await self._publish_created_topics(version_before)
        if not result.status.is_stored:
            failed = self._reply_for(result, queue_id, "")
            return SendMessageBatchResponseHeader(code=failed.code, remark=result.remark or failed.remark)
        ok = self._reply_for(result, queue_id, "")
        return SendMessageBatchResponseHeader(
            code=ok.code,
            msg_id=result.msg_id,
            queue_id=queue_id,
            queue_offset=result.queue_offset,
            message_count=result.msg_num,
        )

    # --- msgCheck -----------------------------------------------------------------------------------------------

    def msg_check(self, request: SendMessageRequestHeader, peer_host: str = "") -> tuple[TopicConfig, int]:
        """AbstractSendMessageProcessor#msgCheck plus the body checks; returns (topic config, queue id).

        Raises (response code): ServiceNotAvailableError (14) on a SLAVE (DefaultMessageStore#checkStoreStatus's
        remark; nothing auto-created); NoPermissionError (16) when the broker or the topic is not writable or the topic
        is one clients may not send to (:func:`is_client_forbidden_send_topic`); InvalidParameterError (29) for an
        illegal topic name; TopicNotExistError (17) for an unknown topic that cannot be auto-created; MQBrokerError
        (29, QUEUE_ID_ILLEGAL_CODE) for a queue id out of range; MessageIllegalError (13) for an empty or too large
        body or properties. An unknown topic is auto-created only after every check passed (a refused send creates
        nothing).
        """
        topic = request.topic
        if self.store.broker_role is BrokerRole.SLAVE:  # checkStoreStatus, before any topic is auto-created
            raise ServiceNotAvailableError(SLAVE_PUT_REMARK)
        if not PermName.is_writeable(self.broker_permission):
            raise NoPermissionError(f"the broker[{self.broker_ip}] sending message is forbidden")
        remark = _topic_remark(topic)
        if remark is not None:
            raise InvalidParameterError(remark)
        if is_client_forbidden_send_topic(topic):
            raise NoPermissionError(f"Sending message to topic[{topic}] is forbidden.")
        self._check_body(request)
        config = self.topics.select_topic_config(topic)
        template = None
        if config is None:
            queue_nums = request.default_topic_queue_nums or self.topics.default_topic_queue_nums
            default_topic = request.default_topic or MixAll.DEFAULT_TOPIC
            config = template = self.topics.send_message_template(topic, default_topic, queue_nums)
            if config is None:
                raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        queue_id = request.queue_id
        if queue_id < 0 and config.write_queue_nums > 0:
            queue_id = self._random.randrange(config.write_queue_nums)
        if queue_id < 0 or queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            raise MQBrokerError(
                f"request queueId[{queue_id}] is illegal, {config} Producer: {peer_host}", QUEUE_ID_ILLEGAL_CODE
            )
        if not PermName.is_writeable(config.perm):
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        if template is not None:
            config = (
                self.topics.create_topic_in_send_message_method(
                    topic, request.default_topic or MixAll.DEFAULT_TOPIC, template.write_queue_nums
                )
                or template
            )
        return config, queue_id

    def _check_body(self, request: SendMessageRequestHeader) -> None:
        """MessageIllegalError (13) for an empty or too large body, or properties over MAX_PROPERTIES_SIZE_BYTES."""
        if not request.body:
            raise MessageIllegalError("the message body length is zero")
        if len(request.body) > self.max_message_size_bytes:
            raise MessageIllegalError(MESSAGE_ILLEGAL_REMARK % self.max_message_size_bytes)
        if len(request.properties) > MAX_PROPERTIES_SIZE_BYTES:  # characters: a lower bound of the bytes
            raise MessageIllegalError(f"the message properties are longer than {MAX_PROPERTIES_SIZE_BYTES} bytes")

    def _prepare(self, request: SendMessageRequestHeader, peer_host: str) -> tuple[MessageExtBrokerInner, str, int]:
        """The stored message, its UNIQ_KEY (the reply's transaction id) and the queue id the reply names. Raises
        MQError as msg_check; MESSAGE_ILLEGAL (13) for a message type the topic does not accept
        (mq_broker.topic_message_type) or a bad delay (mq_broker.schedule.schedule_hook). A delay-level or timer
        message is stored on SCHEDULE_TOPIC_XXXX / rmq_sys_wheel_timer (HookUtils#handleScheduleMessage), a
        transaction half message (TRANSACTION_PREPARED_TYPE) on RMQ_SYS_TRANS_HALF_TOPIC queue 0
        (mq_broker.transaction.half_message; it is never delayed)."""
        if not self.accepting:
            raise ServiceNotAvailableError(SHUTTING_DOWN_REMARK)
        config, queue_id = self.msg_check(request, peer_host)
        properties = decode_properties(request.properties)
        if self.enable_topic_message_type_check:
            check_message_type(config, properties)
        topic, stored_queue_id, text = request.topic, queue_id, request.properties
        sys_flag = request.sys_flag & ~HOST_V6_FLAGS
        if self.schedule_hook is not None and ScheduleHook.may_hold(text):  # refuses broker-only properties too
            placement = self.schedule_hook.place(topic, queue_id, properties, request.sys_flag)
            if placement is not None:
                topic, stored_queue_id, properties = placement.topic, placement.queue_id, placement.properties
                text = encode_properties(properties)
        if is_half_send(sys_flag):  # place() leaves half messages alone
            half = half_placement(topic, queue_id, properties, sys_flag, request.producer_group)
            topic, stored_queue_id, properties, sys_flag = half.topic, half.queue_id, half.properties, half.sys_flag
            text = encode_properties(properties)
        inner = MessageExtBrokerInner(
            topic=topic,
            queue_id=stored_queue_id,
            body=request.body,
            properties_string=self._with_cluster(text, properties),
            flag=request.flag,
            sys_flag=sys_flag,
            born_timestamp_ms=request.born_timestamp_ms,
            born_host=_born_host_bytes(request.born_host, peer_host),
            reconsume_times=request.reconsume_times,
            tags_code=tags_string_to_tags_code(properties.get(MessageConst.TAGS)),
            wait_store_msg_ok=properties.get(MessageConst.WAIT_STORE_MSG_OK, "true") != "false",
        )
        return inner, properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""), queue_id

    def _with_cluster(self, text: str, properties: dict[str, str]) -> str:
        """The property string with CLUSTER = this cluster (appended when absent; re-encoded otherwise)."""
        current = properties.get(MessageConst.CLUSTER)
        if current == self.cluster_name:
            return text
        if current is None and (not text or text.endswith(PROPERTY_SEPARATOR)):
            return f"{text}{MessageConst.CLUSTER}{NAME_VALUE_SEPARATOR}{self.cluster_name}{PROPERTY_SEPARATOR}"
        properties[MessageConst.CLUSTER] = self.cluster_name
        return encode_properties(properties)

    # --- handlePutMessageResult --------------------------------------------------------------------------------

    def _reply_for(self, result: PutMessageResult, queue_id: int, uniq_key: str) -> SendMessageResponseHeader:
        """SendMessageProcessor#handlePutMessageResult (``queue_id``: the queue the request asked for or was given;
        a held delay/timer message's answer names it, not the SCHEDULE_TOPIC_XXXX / rmq_sys_wheel_timer queue)."""
        status = result.status
        if status.is_stored:
            return SendMessageResponseHeader(
                code=int(_STORED_CODES[status]),
                msg_id=result.msg_id,
                queue_id=queue_id,
                queue_offset=result.queue_offset,
                transaction_id=uniq_key,
            )
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return SendMessageResponseHeader(
                int(ResponseCode.MESSAGE_ILLEGAL), MESSAGE_ILLEGAL_REMARK % self._store_limit()
            )
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return SendMessageResponseHeader(
                int(ResponseCode.SERVICE_NOT_AVAILABLE), result.remark or SHUTTING_DOWN_REMARK
            )
        if status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            # The store's remark names the cause (CREATE_MAPPED_FILE_FAILED_REMARK and the OS error).
            return SendMessageResponseHeader(
                int(ResponseCode.SYSTEM_ERROR), result.remark or "create mapped file failed, server is busy or broken."
            )
        return SendMessageResponseHeader(int(ResponseCode.SYSTEM_ERROR), "UNKNOWN_ERROR")

    def _store_limit(self) -> int:
        return self.store.config.max_message_size_bytes


@functools.lru_cache(maxsize=4096)
def _topic_remark(topic: str) -> str | None:
    """validate_topic, cached: a broker sees the same few topics over and over."""
    return validate_topic(topic)


@functools.lru_cache(maxsize=4096)
def _born_host_bytes(born_host: str, peer_host: str) -> bytes:
    """BORNHOST bytes from ``"ip:port"``, else from the peer, else 0.0.0.0:0."""
    for candidate in (born_host, peer_host):
        if not candidate:
            continue
        try:
            host, port = split_host_port(candidate)
            return host_to_bytes(host, port)
        except ValueError:
            continue
    return _UNKNOWN_HOST
