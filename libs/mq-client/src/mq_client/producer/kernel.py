"""One send attempt: message preparation, the broker request, the answer's translation, the time budget.

Mirrors DefaultMQProducerImpl#sendKernelImpl (UNIQ_KEY, compression, SendMessageRequestHeader, hooks) and
MQClientAPIImpl#processSendResponse. Shared by the single send loop (producer.py) and the batch sender
(batch.py). Runs on the producer's one asyncio loop.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from mq_common.codec import encode_properties
from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES, MessageConst, MessageSysFlag
from mq_common.errors import MessageIllegalError, MQBrokerError, MQError, RemotingError, RemotingTimeoutError
from mq_common.errors import error_for_code as _error_for_code
from mq_common.message_id import create_uniq_id
from mq_common.protocol import (
    MessageQueue,
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from mq_common.recall_handle import build_recall_handle

from mq_client.producer.config import ProducerConfig
from mq_client.producer.delay import delay_properties
from mq_client.producer.errors import BrokerNotFoundError
from mq_client.producer.fault_strategy import ClockMs
from mq_client.producer.hooks import ProducerHooks, SendMessageContext
from mq_client.producer.message import Message
from mq_client.producer.route_manager import TopicRouteManager
from mq_client.producer.send_result import SEND_STATUS_BY_CODE, CommunicationMode, MessageBatchResult, SendResult


class BrokerTransport(Protocol):
    """The part of :class:`mq_client.broker_client.BrokerClient` the producer uses (a coalescing batcher can stand in).

    Business codes come back in SendMessageResponseHeader; transport failures raise RemotingError /
    RemotingTimeoutError for the whole call.
    """

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader: ...

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]: ...

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader: ...


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A validated message as it goes on the wire (built once, reused by every attempt).

    ``body`` is zlib-compressed when ``sys_flag`` has MessageSysFlag.COMPRESSED_FLAG; ``properties`` is the
    encoded property string (TAGS, KEYS, WAIT, UNIQ_KEY, __SHARDINGKEY and the user's); ``msg_id`` the
    UNIQ_KEY; ``wire_size_bytes`` = body + properties + topic bytes (for batch sizing); ``deliver_ms`` the
    delivery time of a timer message (TIMER_DELIVER_MS, ms since the epoch), else 0.
    """

    message: Message
    body: bytes
    sys_flag: int
    properties: str
    msg_id: str
    wire_size_bytes: int
    deliver_ms: int = 0

    @property
    def topic(self) -> str:
        return self.message.topic


def prepare_message(msg: Message, config: ProducerConfig) -> OutgoingMessage:
    """Add the system properties and compress. ``msg`` must have passed validators.check_message.

    Compression: bodies of at least ``compress_msg_body_over_howmuch_bytes`` bytes are zlib-compressed at
    ``compress_level`` (DefaultMQProducerImpl#tryToCompressMessage). Raises MessageIllegalError (13) when the
    encoded properties exceed 32767 bytes (the broker's PROPERTIES_SIZE_EXCEEDED limit), or for a bad delay
    (:func:`mq_client.producer.delay.delay_properties`: a negative value, several kinds of delay).
    """
    assert msg.body is not None, "check_message refuses a null body"
    props: dict[str, str] = dict(msg.properties) if msg.properties else {}
    if msg.tags:
        props[MessageConst.TAGS] = msg.tags
    if msg.keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(msg.keys)
    if msg.sharding_key:
        props[MessageConst.SHARDING_KEY] = msg.sharding_key
    props.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true")
    deliver_ms = delay_properties(msg, props) if msg.is_delayed() else 0
    msg_id = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if msg_id is None:
        msg_id = props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
    properties = encode_properties(props)
    properties_len = len(properties) if properties.isascii() else len(properties.encode("utf-8"))
    if properties_len > MAX_PROPERTIES_SIZE_BYTES:
        raise MessageIllegalError(f"the message properties length over max value, MAX: {MAX_PROPERTIES_SIZE_BYTES}")
    body = msg.body
    sys_flag = 0
    if len(body) >= config.compress_msg_body_over_howmuch_bytes:
        body = zlib.compress(body, config.compress_level)
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
    topic = msg.topic
    size = len(body) + properties_len + (len(topic) if topic.isascii() else len(topic.encode("utf-8")))
    return OutgoingMessage(msg, body, sys_flag, properties, msg_id, size, deliver_ms)


def build_request(out: OutgoingMessage, queue_id: int, config: ProducerConfig) -> SendMessageRequestHeader:
    """The SendMessageRequestHeader + body of one attempt (born timestamp = now, wall clock ms)."""
    return SendMessageRequestHeader(
        producer_group=config.producer_group,
        topic=out.topic,
        queue_id=queue_id,
        sys_flag=out.sys_flag,
        born_timestamp_ms=time.time_ns() // 1_000_000,
        flag=out.message.flag,
        properties=out.properties,
        body=out.body,
        default_topic=config.create_topic_key,
        default_topic_queue_nums=config.default_topic_queue_nums,
    )


def response_outcome(resp: SendMessageResponseHeader, out: OutgoingMessage, broker_name: str) -> SendResult | MQError:
    """SendResult for SUCCESS / FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE, else the typed
    error (error_for_code). A timer message's result carries its recall handle (RecallMessageHandle.HandleV1 of the
    topic, ``broker_name``, TIMER_DELIVER_MS and UNIQ_KEY). Mirrors MQClientAPIImpl#processSendResponse."""
    status = SEND_STATUS_BY_CODE.get(resp.code)
    if status is None:
        return _error_for_code(resp.code, resp.remark, broker_name)
    return SendResult(
        send_status=status,
        msg_id=out.msg_id,
        offset_msg_id=resp.msg_id,
        message_queue=MessageQueue(out.topic, broker_name, resp.queue_id),
        queue_offset=resp.queue_offset,
        recall_handle=build_recall_handle(out.topic, broker_name, out.deliver_ms, out.msg_id) if out.deliver_ms else "",
    )


def _batch_result(
    resp: SendMessageBatchResponseHeader, topic: str, msg_ids: Sequence[str], broker_name: str, addr: str
) -> MessageBatchResult:
    """The result of a stored MessageBatch, or the typed error of its code (MQClientAPIImpl#processSendResponse
    for a batch: the msgId header lists every offset msg id)."""
    status = SEND_STATUS_BY_CODE.get(resp.code)
    if status is None:
        raise _error_for_code(resp.code, resp.remark, broker_name)
    offset_ids = resp.msg_id.split(",")
    if resp.message_count != len(msg_ids) or len(offset_ids) != len(msg_ids):
        raise RemotingError(
            f"{addr}: a batch of {len(msg_ids)} answered for {resp.message_count} ({len(offset_ids)} ids)"
        )
    return MessageBatchResult(
        status, msg_ids, offset_ids, MessageQueue(topic, broker_name, resp.queue_id), resp.queue_offset
    )


def is_retriable(err: MQError, retry_response_codes: frozenset[int]) -> bool:
    """sendDefaultImpl's retry rule: transport errors always; broker errors when their code is in
    ``retry_response_codes``; other errors by their ``retriable`` attribute (BrokerNotFoundError: yes)."""
    if isinstance(err, RemotingError):
        return True
    if isinstance(err, MQBrokerError):
        return err.code in retry_response_codes
    return err.retriable


class SendBudget:
    """One deadline shared by the route lookup and every attempt of a send (sendMsgTimeout)."""

    __slots__ = ("_begin_ms", "_clock_ms", "total_ms")

    def __init__(self, total_ms: int, clock_ms: ClockMs) -> None:
        self.total_ms = total_ms
        self._clock_ms = clock_ms
        self._begin_ms = clock_ms()

    def elapsed_ms(self) -> int:
        return self._clock_ms() - self._begin_ms

    def remaining_ms(self) -> int:
        """Milliseconds left (<= 0 when spent)."""
        return self.total_ms - self.elapsed_ms()


class SendKernel:
    """Sends prepared messages to one broker, resolving addresses and running hooks."""

    def __init__(
        self,
        config: ProducerConfig,
        routes: TopicRouteManager,
        transport: BrokerTransport,
        hooks: ProducerHooks,
    ) -> None:
        self.config = config
        self.routes = routes
        self.transport = transport
        self.hooks = hooks

    async def broker_addr(self, mq: MessageQueue, timeout_ms: int) -> str:
        """Master address of ``mq``'s broker, refreshing the topic's route once if unknown.
        Raises BrokerNotFoundError (211, retriable)."""
        addr = self.routes.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            await self.routes.find_publish_info(mq.topic, timeout_ms)
            addr = self.routes.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise BrokerNotFoundError(f"The broker[{mq.broker_name}] not exist")
        return addr

    def _before(self, out: OutgoingMessage, mq: MessageQueue, addr: str, mode: CommunicationMode) -> SendMessageContext:
        return self._before_send(out.message, out.msg_id, mq, addr, mode)

    def _before_send(
        self, message: Message, msg_id: str, mq: MessageQueue, addr: str, mode: CommunicationMode
    ) -> SendMessageContext:
        """Run the check-forbidden hooks (their MQError refuses the attempt) then the before-send hooks."""
        ctx = SendMessageContext(self.config.producer_group, message, msg_id, mq, addr, mode)
        self.hooks.run_check_forbidden(ctx)
        self.hooks.run_before(ctx)
        return ctx

    def _after(self, ctx: SendMessageContext, outcome: SendResult | MQError) -> None:
        if isinstance(outcome, SendResult):
            self.hooks.run_after(ctx, outcome, None)
        else:
            self.hooks.run_after(ctx, None, outcome)

    async def send_one(
        self, out: OutgoingMessage, mq: MessageQueue, timeout_ms: int, mode: CommunicationMode
    ) -> SendResult:
        """One attempt of one message to ``mq``. Raises the attempt's MQError (see response_outcome)."""
        # the known address without a coroutine (the common case); broker_addr refreshes the route when unknown
        addr = self.routes.find_broker_address_in_publish(mq.broker_name) or await self.broker_addr(mq, timeout_ms)
        ctx = self._before(out, mq, addr, mode) if self.hooks else None
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000.0):
                resp = await self.transport.send_message(addr, build_request(out, mq.queue_id, self.config), timeout_ms)
        except TimeoutError:
            outcome: SendResult | MQError = RemotingTimeoutError(
                f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)"
            )
        except MQError as exc:
            outcome = exc
        else:
            outcome = response_outcome(resp, out, mq.broker_name)
        if ctx is not None:
            self._after(ctx, outcome)
        if isinstance(outcome, MQError):
            raise outcome
        return outcome

    async def send_message_batch(
        self,
        body: bytes,
        msg_ids: Sequence[str],
        hook_message: Callable[[], Message],
        mq: MessageQueue,
        timeout_ms: int,
        mode: CommunicationMode,
        *,
        queue_free: bool = False,
        sys_flag: int = 0,
        properties: str = "",
    ) -> MessageBatchResult:
        """One attempt of a MessageBatch to ``mq``: one SEND_BATCH_MESSAGE RPC. ``body`` holds the messages encoded
        as mq_common.batch_codec's items, ``msg_ids`` their UNIQ_KEYs; ``queue_free``: no sharding key pins ``mq``
        (the transport may then merge it with other batches for the broker; results carry the queue used). Hooks
        see the batch as one send, by its first message (``hook_message()``, called only when there are hooks;
        RocketMQ's MessageBatch is one message to them). ``sys_flag`` and ``properties``: the request's (every
        message's sysflag; the batch's properties, appended by the broker to each message's: a batch of half
        messages, mq_client.producer.batch_transaction). Raises the attempt's MQError (transport, timeout, or the
        broker's code for the whole batch; RemotingError when the answer does not cover every message).
        """
        addr = await self.broker_addr(mq, timeout_ms)
        ctx = self._before_send(hook_message(), msg_ids[0], mq, addr, mode) if self.hooks else None
        request = SendMessageBatchRequestHeader(
            producer_group=self.config.producer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            born_timestamp_ms=time.time_ns() // 1_000_000,
            body=body,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            message_count=len(msg_ids),
            queue_free=queue_free,
            sys_flag=sys_flag,
            properties=properties,
        )
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000.0):
                resp = await self.transport.send_message_batch(addr, request, timeout_ms)
            result = _batch_result(resp, mq.topic, msg_ids, mq.broker_name, addr)
        except TimeoutError:
            error: MQError = RemotingTimeoutError(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)")
        except MQError as exc:
            error = exc
        else:
            if ctx is not None:
                first = SendResult(
                    result.send_status, msg_ids[0], result.offset_msg_ids[0], result.message_queue, result.queue_offset
                )
                self.hooks.run_after(ctx, first, None)
            return result
        if ctx is not None:
            self.hooks.run_after(ctx, None, error)
        raise error

    async def send_group(
        self,
        addr: str,
        items: Sequence[tuple[OutgoingMessage, MessageQueue]],
        timeout_ms: int,
        mode: CommunicationMode = CommunicationMode.SYNC,
    ) -> list[SendResult | MQError]:
        """One broker batch RPC to ``addr`` for ``items`` (all on one broker); one outcome per item, in order.
        A transport failure (or the timeout) becomes that error for every item; an item refused by a
        check-forbidden hook gets the hook's error and is not sent."""
        outcomes: list[SendResult | MQError | None] = [None] * len(items)
        contexts: list[SendMessageContext | None] = [None] * len(items)
        if self.hooks:
            for i, (out, mq) in enumerate(items):
                try:
                    contexts[i] = self._before(out, mq, addr, mode)
                except MQError as exc:
                    outcomes[i] = exc
        sending = [i for i in range(len(items)) if outcomes[i] is None]
        if sending:
            sent = await self._send_batch(addr, [items[i] for i in sending], timeout_ms)
            for i, outcome in zip(sending, sent, strict=True):
                outcomes[i] = outcome
                ctx = contexts[i]
                if ctx is not None:
                    self._after(ctx, outcome)
        return [o for o in outcomes if o is not None]

    async def _send_batch(
        self, addr: str, items: Sequence[tuple[OutgoingMessage, MessageQueue]], timeout_ms: int
    ) -> list[SendResult | MQError]:
        requests = [build_request(out, mq.queue_id, self.config) for out, mq in items]
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000.0):
                responses = await self.transport.send_batch(addr, requests, timeout_ms)
            if len(responses) != len(items):
                raise RemotingError(f"{addr}: {len(responses)} responses for {len(items)} sends")
        except TimeoutError:
            err: MQError = RemotingTimeoutError(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)")
            return [err] * len(items)
        except MQError as exc:
            return [exc] * len(items)
        return [response_outcome(r, out, mq.broker_name) for r, (out, mq) in zip(responses, items, strict=True)]
