"""The lite pull consumer: subscribe, poll, commit; queues shared among the group's consumers by rebalancing.

Mirrors org.apache.rocketmq.client.consumer.DefaultLitePullConsumer / DefaultLitePullConsumerImpl (subscribe mode,
CLUSTERING), with MQClientInstance's scheduled tasks: heartbeats to every broker of the subscribed topics
(heartbeatBrokerInterval), rebalancing (RebalanceService) and offset persistence
(persistConsumerOffsetInterval). Like DefaultMQPushConsumerImpl#copySubscription it also subscribes to the
group's ``%RETRY%<group>`` topic, so messages given back with :meth:`LitePullConsumer.send_message_back` come
back to the group (with their original topic, as ConsumeMessageConcurrentlyService#resetRetryAndNamespace).

Everything runs on the caller's asyncio loop: three background tasks plus one pull task per assigned queue, all
cancelled by :meth:`LitePullConsumer.close`. Not safe to share between loops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Final, Self

from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst, retry_topic
from mq_common.errors import MQClientError, MQError
from mq_common.logging import get_logger
from mq_common.protocol import ConsumeType, HeartbeatData, MessageModel, MessageQueue, SubscriptionData
from mq_common.response_code import ResponseCode
from mq_common.tasks import wait_event
from mq_common.tls import TlsClientConfig

from mq_client.consumer.config import (
    CONSUME_TIMESTAMP_DEFAULT_AGE_MS,
    ConsumeFromWhere,
    LitePullConsumerConfig,
    build_client_id,
)
from mq_client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from mq_client.consumer.process_queue import NO_OFFSET, AssignedMessageQueues, ConsumeRequest, MessageQueueState
from mq_client.consumer.pull_consumer import SUB_ALL, PullConsumer
from mq_client.consumer.pull_task import PullTaskContext, run_pull_task
from mq_client.consumer.queue_locks import QueueLocks
from mq_client.consumer.rebalance import RebalanceLitePull
from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = ["LitePullConsumer"]

_log = get_logger("mq_client.consumer.lite_pull_consumer")

MAX_BUFFERED_REQUESTS: Final = 10_000
"""Bound of the buffer of pulled batches (pull tasks wait when it is full; flow control keeps it far below)."""
MAX_SUBSCRIPTIONS: Final = 1_000
"""Topics one consumer may subscribe to."""
CLIENT_RPC_TIMEOUT_MS: Final = 3_000
"""Heartbeat/unregister deadline (ClientConfig.mqClientApiTimeout)."""

try:
    _CLIENT_VERSION = version("mq-client")
except PackageNotFoundError:  # pragma: no cover - a source tree that was not installed
    _CLIENT_VERSION = ""


class LitePullConsumer:
    """Poll messages of subscribed topics; the group's consumers share the queues (AllocateMessageQueueAveragely)
    and its offsets live on the brokers. Mirrors DefaultLitePullConsumer (subscribe mode, CLUSTERING).

    Delivery is at least once: poll() hands out whole pulled batches; with ``auto_commit`` what earlier polls
    returned is committed at the next poll once ``auto_commit_interval_ms`` passed and at close, and offsets
    reach the brokers every ``auto_commit_interval_ms``. After a crash or a rebalance the new owner of a queue
    starts from the last offset persisted, so messages after it may come again.
    """

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        consumer_group: str,
        *,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        pull_batch_size: int = 32,
        poll_timeout_ms: int = 5000,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        heartbeat_interval_ms: int = 30_000,
        rebalance_interval_ms: int = 20_000,
        broker_suspend_max_time_ms: int = 15_000,
        consumer_timeout_ms_when_suspend: int = 30_000,
        client_id: str | None = None,
        pool: ChannelPool | None = None,
        tls: TlsClientConfig | None = None,
        orderly: bool = False,
    ) -> None:
        """``consume_timestamp_ms`` (CONSUME_FROM_TIMESTAMP): ms since the epoch, default half an hour ago.

        ``tls`` makes the own ChannelPool (when ``pool`` is None) a TLS one. Raises MQClientError
        (INVALID_PARAMETER, 29) for inconsistent settings, (RPC_ADDR_IS_NULL) without name servers."""
        if consume_timestamp_ms is None:
            consume_timestamp_ms = int(time.time() * 1000) - CONSUME_TIMESTAMP_DEFAULT_AGE_MS
        self.config = LitePullConsumerConfig(
            consumer_group=consumer_group,
            client_id=client_id or build_client_id(),
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
            pull_batch_size=pull_batch_size,
            poll_timeout_ms=poll_timeout_ms,
            auto_commit=auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_interval_ms=rebalance_interval_ms,
            broker_suspend_max_time_ms=broker_suspend_max_time_ms,
            consumer_timeout_ms_when_suspend=consumer_timeout_ms_when_suspend,
            orderly=orderly,
        )
        self.config.check()
        self._own_pool = pool is None
        self._pool = ChannelPool(tls) if pool is None else pool
        self._queues = PullConsumer(namesrv_addrs, consumer_group, pool=self._pool)
        self._calls = ConsumerBrokerCalls(self._pool)
        self._offsets = RemoteBrokerOffsetStore(
            self._calls, consumer_group, self._master_addr, find_read_addr=self._read_addr
        )
        self._rebalance = RebalanceLitePull(self.config, self._queues, self._calls, self._offsets)
        self._locks = QueueLocks(consumer_group, self.config.client_id, self._calls, self._master_addr)
        self._assigned = AssignedMessageQueues()
        self._subscriptions: dict[str, str] = {}
        self._requests: asyncio.Queue[ConsumeRequest] = asyncio.Queue(MAX_BUFFERED_REQUESTS)
        self._ctx = PullTaskContext(
            self.config, self._queues, self._offsets, self._rebalance, self._requests, self._subscriptions
        )
        self._rebalance_now = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._running = False
        self._closed = False
        self._next_auto_commit_s = 0.0

    @property
    def client_id(self) -> str:
        """This consumer's id in its group (``host@pid#index#nanos`` unless given)."""
        return self.config.client_id

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- subscriptions and lifecycle -------------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str = SUB_ALL) -> None:
        """Consume ``topic``'s messages whose tag matches ``sub_expression`` (``"*"`` or ``"TagA || TagB"``);
        before or after start (then the next rebalance, triggered at once, picks it up). Mirrors
        DefaultLitePullConsumer#subscribe. Raises MQClientError (INVALID_PARAMETER) for a blank topic or past
        MAX_SUBSCRIPTIONS topics, (SYSTEM_ERROR) once closed."""
        if self._closed:
            raise MQClientError("The consumer is closed", ResponseCode.SYSTEM_ERROR)
        if not topic.strip():
            raise MQClientError("Topic can not be null or empty", ResponseCode.INVALID_PARAMETER)
        if topic not in self._subscriptions and len(self._subscriptions) >= MAX_SUBSCRIPTIONS:
            raise MQClientError(f"more than {MAX_SUBSCRIPTIONS} subscriptions", ResponseCode.INVALID_PARAMETER)
        self._subscriptions[topic] = sub_expression.strip() or SUB_ALL
        self._rebalance_now.set()

    async def start(self) -> None:
        """Subscribe to ``%RETRY%<group>``, send the first heartbeats, rebalance once (so :meth:`assignment` holds
        this consumer's queues when it returns, each with its start offset), then start the background tasks.
        Mirrors DefaultLitePullConsumerImpl#start. Raises MQClientError (SYSTEM_ERROR) when started twice or
        closed; broker failures are logged and retried by the background tasks."""
        if self._running or self._closed:
            raise MQClientError("The PullConsumer service state not OK, maybe started once", ResponseCode.SYSTEM_ERROR)
        self._running = True
        self._subscriptions.setdefault(retry_topic(self.config.consumer_group), SUB_ALL)
        await self._send_heartbeats()
        await self._do_rebalance()
        config = self.config
        self._background = [
            asyncio.create_task(self._every(config.heartbeat_interval_ms, self._send_heartbeats)),
            asyncio.create_task(self._every(config.rebalance_interval_ms, self._do_rebalance, self._rebalance_now)),
            asyncio.create_task(self._every(config.auto_commit_interval_ms, self._persist_offsets)),
        ]

    async def close(self) -> None:
        """Stop pulling, commit (with ``auto_commit``) what poll() returned, persist the offsets, unregister
        from every broker and close the channels (when this consumer made the pool). Idempotent; errors are
        logged. Mirrors DefaultLitePullConsumerImpl#shutdown + MQClientInstance#unregisterConsumer."""
        if self._closed:
            return
        self._closed = True
        was_running, self._running = self._running, False
        tasks = self._background + [s.task for s in self._assigned.states() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if was_running:
            if self.config.auto_commit:
                self._commit_all()
            await self._offsets.persist_all(self._assigned.queues())
            if self.config.orderly:
                await self._locks.unlock(self._assigned.queues())
            await self._unregister()
        self._assigned.remove(self._assigned.queues())
        await self._queues.close()
        if self._own_pool:
            await self._pool.close()

    # ---- consuming --------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next pulled batch of one queue (empty after ``timeout_ms``, default ``poll_timeout_ms``). With
        ``auto_commit``, first commits what earlier polls returned once the interval passed. Messages of the
        retry topic come with their original topic. Mirrors DefaultLitePullConsumerImpl#poll.

        Raises MQClientError (SYSTEM_ERROR) when not running, (INVALID_PARAMETER) for a negative timeout."""
        self._check_running()
        wait_ms = self.config.poll_timeout_ms if timeout_ms is None else timeout_ms
        if wait_ms < 0:
            raise MQClientError("Timeout must not be negative", ResponseCode.INVALID_PARAMETER)
        if self.config.auto_commit:
            self._maybe_auto_commit()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            request = await self._next_request(deadline - loop.time())
            if request is None:
                return []
            if not request.process_queue.dropped:
                return self._take(request)

    async def _next_request(self, wait_s: float) -> ConsumeRequest | None:
        try:
            if wait_s <= 0:
                return self._requests.get_nowait()
            async with asyncio.timeout(wait_s):
                return await self._requests.get()
        except (TimeoutError, asyncio.QueueEmpty):
            return None

    def _take(self, request: ConsumeRequest) -> list[MessageExt]:
        offset = request.process_queue.remove_messages(request.messages)
        state = self._assigned.get(request.mq)
        if state is not None and state.process_queue is request.process_queue:
            state.consume_offset = offset
        group_retry_topic = retry_topic(self.config.consumer_group)
        return [_with_original_topic(m, group_retry_topic) for m in request.messages]

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer pulls now. Mirrors DefaultLitePullConsumer#assignment."""
        return set(self._assigned.queues())

    async def commit_sync(self) -> None:
        """Commit what poll() returned so far and persist every assigned queue's offset to its broker now.
        Mirrors DefaultLitePullConsumer#commitSync (which RocketMQ persists on the next timer tick; here at
        once). Raises MQClientError (SYSTEM_ERROR) when not running; broker failures are logged."""
        self._check_running()
        self._commit_all()
        await self._offsets.persist_all(self._assigned.queues())

    async def committed(self, mq: MessageQueue) -> int:
        """The group's offset of ``mq`` (memory first, then the broker); -1 when none. Mirrors
        DefaultLitePullConsumer#committed. Raises MQClientError (SYSTEM_ERROR) when the broker failed to answer."""
        offset = await self._offsets.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if offset < NO_OFFSET:
            raise MQClientError("Fetch consume offset from broker exception", ResponseCode.SYSTEM_ERROR)
        return offset

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Make ``mq``'s next poll start at ``offset`` (buffered batches of ``mq`` are dropped). Mirrors
        DefaultLitePullConsumerImpl#seek. Raises MQClientError (SYSTEM_ERROR) when not running or ``mq`` is not
        assigned, (INVALID_PARAMETER) outside the queue's [min, max] offsets, and PullConsumer.queue_offsets'
        errors."""
        self._check_running()
        state = self._assigned.get(mq)
        if state is None:
            raise MQClientError(
                f"The message queue is not in assigned list, may be rebalancing, message queue: {mq}",
                ResponseCode.SYSTEM_ERROR,
            )
        bounds = await self._queues.queue_offsets(mq)
        if not bounds.min_offset <= offset <= bounds.max_offset:
            raise MQClientError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {bounds.min_offset}, "
                f"max offset = {bounds.max_offset}",
                ResponseCode.INVALID_PARAMETER,
            )
        if self._assigned.get(mq) is not state:
            raise MQClientError(f"The message queue was rebalanced away: {mq}", ResponseCode.SYSTEM_ERROR)
        if state.task is not None:
            state.task.cancel()
        state.replace_process_queue()
        state.seek_offset = offset
        self._start_pull_task(state)

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None) -> None:
        """Give ``msg`` back to the broker (ConsumerSendMsgBack): it comes again through ``%RETRY%<group>`` with
        reconsume_times + 1, or goes to ``%DLQ%<group>`` past the group's retryMaxTimes (``delay_level`` < 0: at
        once). ``broker_name``: where it was pulled from (default: its store host). Mirrors
        DefaultMQPushConsumerImpl#sendMessageBack (without its fallback of re-sending through a producer).

        Raises MQClientError (SYSTEM_ERROR) when not running, the broker's error (error_for_code) and transport
        errors."""
        self._check_running()
        await self._queues.send_message_back(msg, delay_level, broker_name)

    # ---- background work ----------------------------------------------------------------------------------

    async def _every(
        self, interval_ms: int, action: Callable[[], Awaitable[None]], wake: asyncio.Event | None = None
    ) -> None:
        """Run ``action`` every ``interval_ms`` (sooner when ``wake`` is set) until cancelled; failures logged."""
        while True:
            if wake is None:
                await asyncio.sleep(interval_ms / 1000)
            else:
                await wait_event(wake, interval_ms / 1000)
                wake.clear()
            try:
                await action()
            except MQError as exc:
                _log.warning("consumer_task_failed", action=action.__name__, error=str(exc))
            except Exception as exc:  # a bug must not end the consumer's heartbeats or rebalancing
                _log.error("consumer_task_crashed", action=action.__name__, error=repr(exc))

    async def _persist_offsets(self) -> None:
        await self._offsets.persist_all(self._assigned.queues())

    def _heartbeat(self) -> HeartbeatData:
        subscriptions = tuple(SubscriptionData(t, e) for t, e in sorted(self._subscriptions.items()))
        return HeartbeatData(
            client_id=self.config.client_id,
            consumer_group=self.config.consumer_group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            subscriptions=subscriptions,
            version=_CLIENT_VERSION,
        )

    async def _broker_addrs(self) -> list[str]:
        """Every address (masters and slaves) of every broker group of the subscribed topics with a route."""
        addrs: set[str] = set()
        for topic in list(self._subscriptions):
            try:
                route = await self._queues.route(topic)
            except MQError:
                continue
            addrs.update(a for b in route.broker_datas for a in b.broker_addrs.values())
        return sorted(addrs)

    async def _send_heartbeats(self) -> None:
        """Heartbeat to every broker of the subscribed topics. Mirrors MQClientInstance#sendHeartbeatToAllBroker."""
        heartbeat = self._heartbeat()
        for addr in await self._broker_addrs():
            try:
                await self._calls.heartbeat(addr, heartbeat, CLIENT_RPC_TIMEOUT_MS)
            except MQError as exc:
                _log.warning("heartbeat_failed", broker=addr, error=str(exc))

    async def _unregister(self) -> None:
        for addr in await self._broker_addrs():
            try:
                await self._calls.unregister_client(
                    addr, self.config.client_id, self.config.consumer_group, CLIENT_RPC_TIMEOUT_MS
                )
            except MQError as exc:
                _log.warning("unregister_client_failed", broker=addr, error=str(exc))

    async def _do_rebalance(self) -> None:
        """Re-allocate every subscribed topic's queues. Mirrors RebalanceImpl#doRebalance."""
        for topic in list(self._subscriptions):
            allocated = await self._rebalance.allocate(topic)
            if allocated is not None and self._running:
                await self._update_assignment(topic, set(allocated))

    async def _update_assignment(self, topic: str, allocated: set[MessageQueue]) -> None:
        """Drop the queues no longer ours (their offsets committed and persisted first) and start the new ones
        at their computed start offsets. Mirrors RebalanceImpl#updateProcessQueueTableInRebalance with
        RebalanceLitePullImpl#removeUnnecessaryMessageQueue and AssignedMessageQueue#updateAssignedMessageQueue."""
        current = set(self._assigned.queues(topic))
        dropped = current - allocated
        new = allocated - current
        if self.config.orderly:  # renew what we pull, drop what we lost; take the new ones we can lock
            kept = current & allocated
            dropped |= kept - await self._locks.lock(kept)
            new &= await self._locks.lock(new)
        if dropped:
            if self.config.auto_commit:
                self._commit_all(dropped)
            for state in self._assigned.remove(dropped):
                _log.info("queue_dropped", mq=str(state.mq), group=self.config.consumer_group)
            await self._offsets.persist(dropped)
            for mq in dropped:
                self._offsets.remove_offset(mq)
                self._queues.pull_nodes.remove(mq)
            if self.config.orderly:  # after the offsets are persisted: the next owner starts where we stopped
                await self._locks.unlock(dropped)
        for mq in sorted(new):
            self._offsets.remove_offset(mq)
            try:
                start = await self._rebalance.compute_pull_from_where(mq)
            except MQError as exc:
                _log.warning("compute_pull_from_where_failed", mq=str(mq), error=str(exc))
                continue
            if not self._running:
                return
            if self._assigned.get(mq) is not None:
                continue
            state = self._assigned.add(mq)
            state.pull_offset = state.consume_offset = start
            self._offsets.update_offset(mq, start, increase_only=False)
            self._start_pull_task(state)

    def _start_pull_task(self, state: MessageQueueState) -> None:
        state.task = asyncio.create_task(run_pull_task(state, self._ctx), name=f"pull {state.mq}")

    # ---- commits ----------------------------------------------------------------------------------------

    def _maybe_auto_commit(self) -> None:
        now_s = time.monotonic()
        if now_s >= self._next_auto_commit_s:
            self._commit_all()
            self._next_auto_commit_s = now_s + self.config.auto_commit_interval_ms / 1000

    def _commit_all(self, mqs: set[MessageQueue] | None = None) -> None:
        """Record each assigned queue's consume offset in the offset store. Mirrors #commitAll."""
        for state in self._assigned.states():
            if (mqs is None or state.mq in mqs) and state.consume_offset != NO_OFFSET:
                self._offsets.update_offset(state.mq, state.consume_offset, increase_only=False)

    def _check_running(self) -> None:
        if not self._running:
            raise MQClientError("The consumer not running, please start it first.", ResponseCode.SYSTEM_ERROR)

    async def _master_addr(self, mq: MessageQueue) -> str:
        """Where ``mq``'s offsets are committed: its group's master only (MQClientError while it is away)."""
        return await self._queues.find_master_addr(mq.broker_name, mq.topic)

    async def _read_addr(self, mq: MessageQueue) -> str:
        """Where ``mq``'s offsets are read: the master, else a slave (findBrokerAddressInSubscribe)."""
        return await self._queues.find_broker_addr(mq.broker_name, mq.topic)


def _with_original_topic(msg: MessageExt, group_retry_topic: str) -> MessageExt:
    """A message of the group's retry topic with its original topic back (RETRY_TOPIC property). Mirrors
    DefaultMQPushConsumerImpl#resetRetryAndNamespace."""
    original = msg.properties.get(MessageConst.RETRY_TOPIC)
    if original is None or msg.topic != group_retry_topic:
        return msg
    return dataclasses.replace(msg, topic=original)
