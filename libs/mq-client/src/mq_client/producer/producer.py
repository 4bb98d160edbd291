"""The producer core: lifecycle, route lookup, queue selection, fault isolation, retries within one budget.

Mirrors org.apache.rocketmq.client.impl.producer.DefaultMQProducerImpl (#start, #shutdown, #sendDefaultImpl,
#updateFaultItem, #selectOneMessageQueue) behind the DefaultMQProducer facade. Runs on ONE asyncio loop:
create, start, use and shut it down on the same loop (channels and tasks belong to it).

Retry rule (SYNC): up to 1 + retry_times_when_send_failed attempts, all inside ONE send_msg_timeout_ms budget
that also pays for the route lookup; each attempt's RPC timeout is what is left of it. An attempt is retried
after a transport error (RemotingError), a missing broker address (BrokerNotFoundError), a broker code in
``retry_response_codes`` (TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID,
NOT_IN_CURRENT_UNIT, SYSTEM_BUSY), and, with retry_another_broker_when_not_store_ok, after a stored but not
SEND_OK result. Retries move to another broker (round robin skipping the last one, or latency isolation),
except for messages with a sharding key, which keep their key's queue (ordered messages never switch queue).
Other errors end the send at once. Isolation (send_latency_fault_enable) counts transport errors, missing
brokers and retriable broker codes as failures; a non-retriable code (e.g. MESSAGE_ILLEGAL) is the message's
fault, so it only records the latency (RocketMQ 4.x isolates on every broker exception).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mq_common.errors import MQClientError, MQError, TopicNotExistError
from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_common.recall_handle import decode_recall_handle
from mq_common.response_code import ResponseCode

from mq_client.producer.backpressure import InFlightLimiter, Permit
from mq_client.producer.batch import BatchSender
from mq_client.producer.config import ProducerConfig
from mq_client.producer.errors import ProducerStateError, SendFailedError
from mq_client.producer.fault_strategy import (
    LATENCY_TABLES,
    ClockMs,
    LatencyFaultTolerance,
    MQFaultStrategy,
    monotonic_ms,
)
from mq_client.producer.hooks import ProducerHooks
from mq_client.producer.kernel import (
    BrokerTransport,
    OutgoingMessage,
    SendBudget,
    SendKernel,
    prepare_message,
)
from mq_client.producer.message import Message, MessageBatch
from mq_client.producer.message_batch import ChunkOutcome, EncodedMessageBatch, MessageBatchSender, qualifies
from mq_client.producer.route_manager import NameServerLookup, TopicRouteManager
from mq_client.producer.selectors import select_by_sharding_key
from mq_client.producer.send_loop import retry_policy, send_with_retries
from mq_client.producer.send_result import CommunicationMode, SendResult
from mq_client.producer.topic_publish_info import SendWhichQueue, TopicPublishInfo
from mq_client.producer.validators import check_group, check_message, check_topic

if TYPE_CHECKING:
    from mq_common.tls.settings import TlsClientConfig

log = get_logger("mq_client.producer")


class ServiceState(Enum):
    """Mirrors org.apache.rocketmq.common.ServiceState."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


@runtime_checkable
class MessageRecaller(Protocol):
    """The broker call :meth:`DefaultMQProducer.recall_message` makes (mq_client.broker_client.BrokerClient)."""

    async def recall_message(
        self,
        addr: str,
        producer_group: str,
        topic: str,
        recall_handle: str,
        broker_name: str,
        timeout_ms: int,
    ) -> str: ...


@runtime_checkable
class TransactionEnder(Protocol):
    """The broker call :meth:`DefaultMQProducer.end_transaction` makes (mq_client.broker_client.BrokerClient)."""

    async def end_transaction(
        self, addr: str, header: EndTransactionRequestHeader, broker_name: str, timeout_ms: int
    ) -> str: ...


class DefaultMQProducer:
    """An asyncio RocketMQ producer. Mirrors DefaultMQProducer + DefaultMQProducerImpl.

    ``namesrv`` answers route queries (mq_common.namesrv_client.NameServerClient); ``transport`` carries sends to
    brokers (mq_client.broker_client.BrokerClient, or a coalescing wrapper); ``recaller`` makes the broker's
    RecallMessage call (default: ``transport`` when it has one, e.g. a BrokerClient). ``rng`` seeds the
    round-robin starts, ``clock_ms`` is the monotonic clock of budgets and fault items (both injectable for tests);
    ``on_shutdown`` runs last in :meth:`shutdown` (e.g. closing the channel pool). Use :meth:`connect` to
    build one over real gRPC channels.
    """

    def __init__(
        self,
        config: ProducerConfig,
        namesrv: NameServerLookup,
        transport: BrokerTransport,
        *,
        hooks: ProducerHooks | None = None,
        rng: random.Random | None = None,
        clock_ms: ClockMs = monotonic_ms,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        recaller: MessageRecaller | None = None,
    ) -> None:
        self.config = config
        self._recaller = recaller if recaller is not None else _recaller_of(transport)
        self._retry_policies = {mode: retry_policy(config, mode) for mode in CommunicationMode}
        self._rng = rng or random.Random()
        self._clock_ms = clock_ms
        self._state = ServiceState.CREATE_JUST
        self._on_shutdown = on_shutdown
        self.routes = TopicRouteManager(
            namesrv,
            create_topic_key=config.create_topic_key,
            default_topic_queue_nums=config.default_topic_queue_nums,
            mq_client_api_timeout_ms=config.mq_client_api_timeout_ms,
            poll_name_server_interval_ms=config.poll_name_server_interval_ms,
            rng=self._rng,
        )
        lft = LatencyFaultTolerance(clock_ms, SendWhichQueue(rng=self._rng))
        if config.latency_fault_tables == "4.x":
            self.fault_strategy = MQFaultStrategy(config.send_latency_fault_enable, lft)
        else:
            tables = LATENCY_TABLES[config.latency_fault_tables]
            self.fault_strategy = MQFaultStrategy.with_tables(tables, config.send_latency_fault_enable, lft)
        self.fault_strategy.broker_failure_listener = self.routes.broker_unreachable
        self.routes.master_changed_listener = self.fault_strategy.latency_fault_tolerance.remove
        self._kernel = SendKernel(config, self.routes, transport, hooks or ProducerHooks())
        self._batch = BatchSender(self._kernel, self.fault_strategy, clock_ms)
        self._message_batch = MessageBatchSender(self._kernel, self.fault_strategy, clock_ms)
        self.limiter = InFlightLimiter(config.max_in_flight_messages, config.max_in_flight_bytes)
        self._background: set[asyncio.Task[Any]] = set()

    @classmethod
    def connect(
        cls,
        config: ProducerConfig,
        namesrv_addrs: Sequence[str],
        *,
        hooks: ProducerHooks | None = None,
        rng: random.Random | None = None,
        tls: TlsClientConfig | None = None,
    ) -> DefaultMQProducer:
        """A producer over gRPC (TLS channels with ``tls``): one ChannelPool, a NameServerClient (failover over
        ``namesrv_addrs``) and a BrokerClient, which sends over one Broker.SendStream per broker (the gateway's
        path; the broker has no unary send RPC); :meth:`shutdown` ends those streams, then closes the pool. Raises
        MQClientError when ``namesrv_addrs`` is empty. Call on the loop that will use the producer."""
        from mq_common.channels import ChannelPool
        from mq_common.namesrv_client import NameServerClient

        from mq_client.broker_client import BrokerClient

        pool = ChannelPool(tls)
        broker = BrokerClient(pool)

        async def close() -> None:
            await broker.close()
            await pool.close()

        return cls(config, NameServerClient(namesrv_addrs, pool), broker, hooks=hooks, rng=rng, on_shutdown=close)

    # ---- lifecycle -----------------------------------------------------------------------------------

    @property
    def service_state(self) -> ServiceState:
        return self._state

    async def start(self) -> None:
        """CREATE_JUST -> RUNNING: check the config, start the route refresh task (no network call here).

        Raises ProducerStateError (14) in any other state ("The producer service state not OK, maybe started
        once, RUNNING"); MQClientError for a bad producer group (state becomes START_FAILED).
        Mirrors DefaultMQProducerImpl#start.
        """
        if self._state is not ServiceState.CREATE_JUST:
            raise ProducerStateError(f"The producer service state not OK, maybe started once, {self._state.value}")
        self._state = ServiceState.START_FAILED
        check_group(self.config.producer_group)
        self.routes.start()
        self._state = ServiceState.RUNNING

    async def shutdown(self) -> None:
        """RUNNING -> SHUTDOWN_ALREADY: refuse new sends, wait for the ONEWAY / ASYNC sends in the background
        (each ends within its own budget), stop the refresh task, then ``on_shutdown``. Idempotent; SYNC sends
        already running finish or fail on their own. Mirrors DefaultMQProducerImpl#shutdown."""
        if self._state is ServiceState.SHUTDOWN_ALREADY:
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.routes.stop()
        if self._on_shutdown is not None:
            await self._on_shutdown()

    def _make_sure_state_ok(self) -> None:
        if self._state is not ServiceState.RUNNING:
            raise ProducerStateError(f"The producer service state not OK, {self._state.value}")

    # ---- send ----------------------------------------------------------------------------------------

    async def send(self, msg: Message, timeout_ms: int | None = None, *, checked: bool = False) -> SendResult:
        """SYNC send of one message within ``timeout_ms`` (default send_msg_timeout_ms) for everything.
        ``checked``: the caller ran validators.check_message's checks or stricter ones (the v2 proxy's request
        checks), so they are not run again.

        Returns the SendResult (send_status may be FLUSH_DISK_TIMEOUT etc.: stored, not durable yet). Raises:
        ProducerStateError (14) when not RUNNING; MessageIllegalError (13) from validation; TopicNotExistError
        (17) "No route info of this topic: T"; RemotingError / RemotingTimeoutError when no name server
        answered; a non-retriable MQBrokerError as the broker sent it; SendFailedError when every attempt
        failed or the budget ran out (code = the last error's, RPC_TIME_OUT -1006 when the budget ran out).
        Mirrors DefaultMQProducerImpl#sendDefaultImpl (CommunicationMode.SYNC).
        """
        self._make_sure_state_ok()
        if not checked:
            check_message(msg, self.config.max_message_size_bytes)
        budget = self._budget(timeout_ms)
        # acquire/release, not `async with limiter.admit(...)`: the context manager costs ~2 µs per message here
        permit = await self.limiter.acquire(1, _body_bytes(msg), budget.remaining_ms())
        try:
            tp_info = await self._find_publish_info(msg.topic, budget)
            out = prepare_message(msg, self.config)
            return await self._send_default_impl(out, tp_info, budget, CommunicationMode.SYNC)
        finally:
            self.limiter.release(permit)

    async def send_oneway(self, msg: Message, timeout_ms: int | None = None) -> str:
        """ONEWAY send: validate, take in-flight permits, look the route up, then hand the message to ONE
        attempt in the background and return its UNIQ_KEY (msg id) at once. The attempt's outcome is only
        logged and fed to the fault strategy; no retry. Mirrors DefaultMQProducerImpl#sendOneway.

        Raises like :meth:`send` before the hand-over (ProducerStateError 14, MessageIllegalError 13,
        TopicNotExistError 17, FlowControlError 215 when the in-flight limits stayed full for the budget).
        """
        self._make_sure_state_ok()
        check_message(msg, self.config.max_message_size_bytes)
        budget = self._budget(timeout_ms)
        permit = await self.limiter.acquire(1, _body_bytes(msg), budget.remaining_ms())
        try:
            tp_info = await self._find_publish_info(msg.topic, budget)
            out = prepare_message(msg, self.config)
        except BaseException:
            self.limiter.release(permit)
            raise
        self._spawn(self._oneway_attempt(out, tp_info, budget, permit))
        return out.msg_id

    async def _oneway_attempt(
        self, out: OutgoingMessage, tp_info: TopicPublishInfo, budget: SendBudget, permit: Permit
    ) -> None:
        try:
            await self._send_default_impl(out, tp_info, budget, CommunicationMode.ONEWAY)
        except MQError as exc:
            log.debug("oneway_send_failed", topic=out.topic, msg_id=out.msg_id, error=str(exc))
        finally:
            self.limiter.release(permit)

    async def send_async(self, msg: Message, timeout_ms: int | None = None) -> asyncio.Task[SendResult]:
        """ASYNC send: take in-flight permits (waiting inside the budget), then start the send in the
        background and return its task, whose result is the SendResult or whose exception is the MQError
        (validation, route, or the last attempt's). Attempts: 1 + retry_times_when_send_async_failed, retried
        after transport failures only (MQClientAPIImpl#onExceptionImpl: a broker's answer is final), each on
        another queue as SYNC retries; one budget. Mirrors DefaultMQProducerImpl#send(msg, SendCallback).

        Raises ProducerStateError (14) when not RUNNING, FlowControlError (215) when the limits stayed full.
        """
        self._make_sure_state_ok()
        budget = self._budget(timeout_ms)
        permit = await self.limiter.acquire(1, _body_bytes(msg), budget.remaining_ms())
        return self._spawn(self._async_send(msg, budget, permit))

    async def _async_send(self, msg: Message, budget: SendBudget, permit: Permit) -> SendResult:
        try:
            check_message(msg, self.config.max_message_size_bytes)
            tp_info = await self._find_publish_info(msg.topic, budget)
            out = prepare_message(msg, self.config)
            return await self._send_default_impl(out, tp_info, budget, CommunicationMode.ASYNC)
        finally:
            self.limiter.release(permit)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _budget(self, timeout_ms: int | None) -> SendBudget:
        return SendBudget(self.config.send_msg_timeout_ms if timeout_ms is None else timeout_ms, self._clock_ms)

    async def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> list[SendResult | MQError]:
        """SYNC send of many messages (any topics) within one ``timeout_ms`` budget; one outcome per message,
        in order (a SendResult, or the MQError that would have been raised by :meth:`send`).

        Messages of one topic (no delay, no transaction, no body to compress) go as RocketMQ's MessageBatch:
        grouped by their sharding key's queue when they have different keys, chunks of at most
        max_message_size_bytes, each one SEND_BATCH_MESSAGE to one queue, retried whole (message_batch.py).
        Any other mix: each message gets its queue (sharding key hash, else round robin); messages are grouped
        per broker and each broker gets batch RPCs (concurrently across brokers, in order within one); failed
        messages are retried per :meth:`send`'s rule (batch.py).
        Raises ProducerStateError (14) when not RUNNING.
        """
        self._make_sure_state_ok()
        budget = self._budget(timeout_ms)
        size = sum(_body_bytes(m) for m in msgs if m is not None)
        async with self.limiter.admit(len(msgs), size, budget.remaining_ms()):
            if qualifies(msgs, self.config):
                outcomes = await self._message_batch.send(msgs, budget, self._find_publish_info)
                if outcomes is not None:
                    return outcomes
            return await self._batch.send(msgs, budget, self._find_publish_info)

    async def send_message_batch(self, batch: MessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome] | None:
        """SYNC send of ``batch`` (one topic, by column) as RocketMQ MessageBatches within one ``timeout_ms`` budget:
        chunks of at most max_message_size_bytes / max_broker_batch_messages, each one SEND_BATCH_MESSAGE to one
        queue, retried whole. Returns each chunk's outcome (its MessageBatchResult or final MQError) in message
        order. Returns None, sending nothing, when :func:`message_batch.refusal` refuses the batch (a delay level,
        a body to compress, an invalid message...): send its messages with :meth:`send_batch` instead.
        Raises ProducerStateError (14) when not RUNNING, FlowControlError when the in-flight limits keep it out.
        """
        self._make_sure_state_ok()
        budget = self._budget(timeout_ms)
        size = sum(map(len, batch.bodies)) or 1
        async with self.limiter.admit(len(batch.bodies), size, budget.remaining_ms()):
            return await self._message_batch.send_batch(batch, budget, self._find_publish_info)

    async def send_encoded_batch(self, batch: EncodedMessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome]:
        """SYNC send of ``batch`` (encoded whole, one chunk; see message_batch.encoded_refusal) as one
        SEND_BATCH_MESSAGE within one ``timeout_ms`` budget, retried as :meth:`send_message_batch`'s chunks are.
        Returns its one outcome (MessageBatchResult or final MQError) for messages 0 .. n-1.
        Raises ProducerStateError (14) when not RUNNING, FlowControlError when the in-flight limits keep it out.
        """
        self._make_sure_state_ok()
        budget = self._budget(timeout_ms)
        async with self.limiter.admit(len(batch.msg_ids), len(batch.body) or 1, budget.remaining_ms()):
            return await self._message_batch.send_encoded(batch, budget, self._find_publish_info)

    async def _find_publish_info(self, topic: str, budget: SendBudget) -> TopicPublishInfo:
        remaining = budget.remaining_ms()
        if remaining <= 0:
            raise SendFailedError(
                times=0, cost_ms=budget.elapsed_ms(), topic=topic, brokers_sent=(), cause=None, budget_spent=True
            )
        tp_info = await self.routes.find_publish_info(topic, remaining)
        if not tp_info.ok():
            raise TopicNotExistError(f"No route info of this topic: {topic}")
        return tp_info

    # ---- recall --------------------------------------------------------------------------------------

    async def recall_message(self, topic: str, recall_handle: str, timeout_ms: int | None = None) -> str:
        """Cancel a timer message that is not delivered yet, by the ``recall_handle`` of its SendResult; returns
        its UNIQ_KEY. The call goes to the master of the handle's broker in ``topic``'s route, within
        ``timeout_ms`` (default send_msg_timeout_ms). Mirrors DefaultMQProducerImpl#recallMessage.

        Raises ProducerStateError (14) when not RUNNING; MessageIllegalError (13) for an illegal topic or one no
        producer may send to (%RETRY%, %DLQ%, TBW102); MQClientError ILLEGAL_OPERATION (604) "recall handle is
        invalid" for a garbage handle; TopicNotExistError (17) without a route; MQClientError
        BROKER_NOT_EXIST (211) when the route has no master of the handle's broker; the broker's answer as
        MQBrokerError (ILLEGAL_OPERATION 604: too late, unknown, already recalled, another topic or broker);
        transport errors. MQClientError(SYSTEM_ERROR) when the producer has no broker client to recall with.
        """
        self._make_sure_state_ok()
        check_topic(topic)
        try:
            handle = decode_recall_handle(recall_handle)
        except ValueError as exc:
            raise MQClientError(str(exc), ResponseCode.ILLEGAL_OPERATION) from None
        if self._recaller is None:
            raise MQClientError("this producer has no broker client to recall messages with")
        addr = await self.routes.master_addr(topic, handle.broker_name)
        timeout = self.config.send_msg_timeout_ms if timeout_ms is None else timeout_ms
        return await self._recaller.recall_message(
            addr, self.config.producer_group, topic, recall_handle, handle.broker_name, timeout
        )

    async def end_transaction(
        self, topic: str, broker_name: str, header: EndTransactionRequestHeader, timeout_ms: int | None = None
    ) -> str:
        """END_TRANSACTION of a half message stored on ``broker_name`` (its master in ``topic``'s route), within
        ``timeout_ms`` (default send_msg_timeout_ms); returns the broker's remark. Mirrors
        DefaultMQProducerImpl#endTransaction.

        Raises ProducerStateError (14) when not RUNNING; MessageIllegalError (13) for an illegal topic;
        TopicNotExistError (17) without a route; MQClientError BROKER_NOT_EXIST (211) when the route has no master
        of ``broker_name``; the broker's answer as MQBrokerError (SYSTEM_ERROR 1, ILLEGAL_OPERATION 604: see
        BrokerClient.end_transaction); transport errors. MQClientError(SYSTEM_ERROR) without a broker client.
        """
        self._make_sure_state_ok()
        check_topic(topic)
        ender = self._recaller
        if not isinstance(ender, TransactionEnder):
            raise MQClientError("this producer has no broker client to end transactions with")
        addr = await self.routes.master_addr(topic, broker_name)
        timeout = self.config.send_msg_timeout_ms if timeout_ms is None else timeout_ms
        return await ender.end_transaction(addr, header, broker_name, timeout)

    def select_one_message_queue(self, tp_info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        """Mirrors DefaultMQProducerImpl#selectOneMessageQueue (delegates to MQFaultStrategy)."""
        return self.fault_strategy.select_one_message_queue(tp_info, last_broker_name)

    def update_fault_item(self, broker_name: str, current_latency_ms: int, isolation: bool) -> None:
        """Mirrors DefaultMQProducerImpl#updateFaultItem."""
        self.fault_strategy.update_fault_item(broker_name, current_latency_ms, isolation)

    async def _send_default_impl(
        self, out: OutgoingMessage, tp_info: TopicPublishInfo, budget: SendBudget, mode: CommunicationMode
    ) -> SendResult:
        policy = self._retry_policies[mode]
        key = out.message.sharding_key
        fixed_mq = select_by_sharding_key(tp_info.message_queues, key) if key else None

        def choose_queue(last_broker_name: str | None) -> MessageQueue:
            return fixed_mq or self.select_one_message_queue(tp_info, last_broker_name)

        async def attempt(mq: MessageQueue, remaining_ms: int) -> SendResult:
            return await self._kernel.send_one(out, mq, remaining_ms, mode)

        return await send_with_retries(
            topic=out.topic,
            policy=policy,
            budget=budget,
            clock_ms=self._clock_ms,
            choose_queue=choose_queue,
            update_fault_item=self.update_fault_item,
            attempt=attempt,
        )


def _recaller_of(transport: BrokerTransport) -> MessageRecaller | None:
    """``transport`` when it can recall (a BrokerClient), else None."""
    return transport if isinstance(transport, MessageRecaller) else None


def _body_bytes(msg: Message) -> int:
    """Bytes a message counts for the in-flight limit (its body; 1 when it has none, as RocketMQ)."""
    return len(msg.body) if msg.body else 1
