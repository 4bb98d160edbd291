"""Operator calls against name servers, brokers and the producer gateway: :class:`MQAdminClient`.

Mirrors org.apache.rocketmq.tools.admin.DefaultMQAdminExt: this module holds the topic, message and send
operations (examineTopicStats, createAndUpdateTopicConfig, queryMessage, viewMessage, plus what
ConsumeMessageCommand, QueryMsgByOffsetSubCommand, PrintMessageSubCommand and SendMessageCommand do); the name
server part is in mq_client.admin.admin_base, the consumer side in mq_client.admin.consumer_admin. Runs on the
caller's asyncio loop; errors are the typed mq_common.errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageExt
from mq_common.constants import MixAll, validate_topic
from mq_common.errors import MQClientError, TopicNotExistError
from mq_common.message_id import decode_offset_msg_id
from mq_common.protocol import MessageQueue, PullStatus, TopicConfig, TopicQueueOffset, TopicRouteData
from mq_common.response_code import ResponseCode

from mq_client.admin.admin_base import DEFAULT_GATEWAY_ADDR, gather_answers
from mq_client.admin.consumer_admin import ConsumerAdmin
from mq_client.admin.timer_admin import TimerAdmin
from mq_client.admin.transaction_admin import TransactionAdmin
from mq_client.consumer import DEFAULT_CONSUMER_GROUP
from mq_client.gateway_client import GatewayMessage, GatewaySendResult, gateway_send

# ConsumeMessageCommand pulls 32 messages a call; bound the loop so a huge count cannot spin forever.
CONSUME_BATCH_NUMS: Final = 32
# QueryMsgByKeySubCommand's default maxNum (also the broker's maxMsgsNumBatch).
DEFAULT_QUERY_MAX_NUM: Final = 64
MAX_CONSUME_MESSAGES: Final = 100_000
# printMsg's default bound on the messages it prints (RocketMQ's command prints every message in the range).
DEFAULT_PRINT_MAX_NUM: Final = 1024


@dataclass(frozen=True, slots=True)
class TopicClusterRow:
    """One line of ``topicList -c``: the cluster of the topic's first broker group (by name; '' when the name
    server lists it in no cluster), the topic and its message type by the route (NORMAL when undeclared)."""

    cluster: str
    topic: str
    message_type: str


@dataclass(frozen=True, slots=True)
class QueueMessages:
    """What :meth:`MQAdminClient.print_messages` read from one queue: the offsets [min_offset, max_offset) it
    covered (from the time range, else the queue's min/max) and the messages found there, in offset order."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...]


class MQAdminClient(ConsumerAdmin, TimerAdmin, TransactionAdmin):
    """Admin operations. Mirrors org.apache.rocketmq.tools.admin.DefaultMQAdminExt.

    Construction, channels and name server queries: :class:`mq_client.admin.admin_base.AdminBase`; consumer-side
    operations: :class:`mq_client.admin.consumer_admin.ConsumerAdmin`; timers (recall, pending timers, a message's
    timer state): :class:`mq_client.admin.timer_admin.TimerAdmin`; transactions (a topic's open ones, a message's
    transaction state): :class:`mq_client.admin.transaction_admin.TransactionAdmin`. Use as ``async with
    MQAdminClient([...]) as admin:`` or call :meth:`close`.
    """

    # ------------------------------------------------------------------------------------------------ broker

    async def topic_status(self, topic: str) -> list[TopicQueueOffset]:
        """Min/max offset of every queue of ``topic`` on every broker group of its route, sorted by
        (broker name, queue id). Mirrors DefaultMQAdminExt#examineTopicStats.

        Raises TopicNotExistError (17) without a route, the broker's error (error_for_code) otherwise."""
        return await self._topic_stats(topic, await self.topic_route(topic))

    async def _topic_stats(self, topic: str, route: TopicRouteData) -> list[TopicQueueOffset]:
        offsets: list[TopicQueueOffset] = []
        for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = broker.select_broker_addr()
            if addr is not None:
                offsets.extend(await self._broker.get_topic_stats(addr, topic, self.timeout_ms))
        return sorted(offsets, key=lambda o: (o.broker_name, o.queue_id))

    async def topic_cluster_list(self) -> list[TopicClusterRow]:
        """Every topic but %RETRY% / %DLQ% ones with its cluster and message type (one route query per topic), in
        topic order; a topic whose route went away meanwhile is left out. Mirrors TopicListSubCommand ``-c``
        (which prints consumer groups where this prints the type). Raises RemotingError when no name server
        answers."""
        info = await self.cluster_list()
        cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
        rows: list[TopicClusterRow] = []
        for topic in await self.topic_list():
            if topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX)):
                continue
            try:
                route = await self.topic_route(topic)
            except TopicNotExistError:
                continue
            names = sorted(b.broker_name for b in route.broker_datas)
            cluster = cluster_of.get(names[0], "") if names else ""
            rows.append(TopicClusterRow(cluster, topic, route.topic_message_type().value))
        return rows

    async def update_topic(
        self, config: TopicConfig, *, broker_addr: str | None = None, cluster_name: str | None = None
    ) -> list[str]:
        """Create or replace ``config`` on one broker (``broker_addr``) or on every master of ``cluster_name``.
        ``config.attributes`` is a modification (``{"+message.type": "DELAY"}``, ``{"-message.type": ""}``;
        mq_common.topic_attributes): the broker keeps the topic's other attributes.

        Mirrors UpdateTopicSubCommand (``-b`` / ``-c``) and #createAndUpdateTopicConfig. Returns the
        addresses updated, in order. Raises MQClientError (INVALID_PARAMETER) unless exactly one target is
        given or when the topic name is illegal, MQClientError (BROKER_NOT_EXIST) when the cluster has no
        master, the broker's error (error_for_code) on refusal, RemotingError on transport failure."""
        remark = validate_topic(config.topic_name)
        if remark is not None:
            raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)
        addrs = await self.resolve_broker_addrs(broker_addr, cluster_name)
        for addr in addrs:
            await self._broker.create_topic(addr, config, self.timeout_ms)
        return addrs

    async def consume_message(
        self,
        topic: str,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int = 0,
        count: int = 128,
        subscription: str = "*",
    ) -> list[MessageExt]:
        """Pull up to ``count`` messages from ``offset`` of one queue (or every queue of one broker group,
        or of the whole topic), in queue order. Mirrors ConsumeMessageCommand (``-b -i -o -c``).

        Stops a queue at NO_NEW_MSG / OFFSET_ILLEGAL. Raises MQClientError (INVALID_PARAMETER) for a queue
        id without a broker name or a count outside 1..100000, TopicNotExistError (17) without a route."""
        if queue_id is not None and broker_name is None:
            raise MQClientError("Please set the brokerName before queueId!", ResponseCode.INVALID_PARAMETER)
        if not 0 < count <= MAX_CONSUME_MESSAGES:
            raise MQClientError(
                f"count out of range [1, {MAX_CONSUME_MESSAGES}]: {count}", ResponseCode.INVALID_PARAMETER
            )
        if broker_name is not None and queue_id is not None:
            queues = [MessageQueue(topic, broker_name, queue_id)]
        else:
            queues = await self._consumer.fetch_subscribe_message_queues(topic)
            queues = [q for q in queues if broker_name is None or q.broker_name == broker_name]
        messages: list[MessageExt] = []
        for mq in queues:
            messages.extend(await self._consume_queue(mq, offset, count - len(messages), subscription))
            if len(messages) >= count:
                break
        return messages

    async def _consume_queue(
        self, mq: MessageQueue, offset: int, count: int, subscription: str, end_offset: int | None = None
    ) -> list[MessageExt]:
        """Up to ``count`` messages of ``mq`` from ``offset`` (below ``end_offset`` when given), in pulls of
        CONSUME_BATCH_NUMS; stops at NO_NEW_MSG / OFFSET_ILLEGAL or when a pull does not move forward."""
        out: list[MessageExt] = []
        for _ in range(MAX_CONSUME_MESSAGES // CONSUME_BATCH_NUMS + 1):
            if len(out) >= count or (end_offset is not None and offset >= end_offset):
                break
            result = await self._consumer.pull(mq, offset, min(CONSUME_BATCH_NUMS, count - len(out)), subscription)
            out.extend(m for m in result.messages if end_offset is None or m.queue_offset < end_offset)
            if (
                result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL)
                or result.next_begin_offset <= offset
            ):
                break
            offset = result.next_begin_offset
        return out[:count]

    async def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """The message at queue ``offset`` of (``topic``, ``broker_name``, ``queue_id``): one pull of one message.
        Mirrors QueryMsgByOffsetSubCommand (DefaultMQPullConsumer#pull(mq, "*", offset, 1)).

        Raises MQClientError NO_MESSAGE (208) when the pull finds none (the remark names the pull status and the
        queue's min/max offsets), MQClientError INVALID_PARAMETER (29) for a negative offset, MQClientError
        BROKER_NOT_EXIST (211) when the route has no such broker, TopicNotExistError (17) without a route."""
        mq = MessageQueue(topic, broker_name, queue_id)
        result = await self._consumer.pull(mq, offset, 1)
        if result.status is PullStatus.FOUND and result.messages:
            return result.messages[0]
        raise MQClientError(
            f"no message at offset {offset} of {mq}: {result.status.name} "
            f"(min offset {result.min_offset}, max offset {result.max_offset})",
            ResponseCode.NO_MESSAGE,
        )

    async def print_messages(
        self,
        topic: str,
        begin_timestamp_ms: int | None = None,
        end_timestamp_ms: int | None = None,
        subscription: str = "*",
        max_num: int = DEFAULT_PRINT_MAX_NUM,
    ) -> list[QueueMessages]:
        """The messages of every queue of ``topic`` stored in [begin, end) (a queue's min/max offset when a bound is
        None; the offsets come from SearchOffsetByTimestamp), matching ``subscription``, in (broker name, queue id)
        then offset order, ``max_num`` at most in all. Mirrors PrintMessageSubCommand (``-b -e -s``), bounded.

        Raises MQClientError INVALID_PARAMETER (29) for ``max_num`` outside 1..100000 or begin > end,
        TopicNotExistError (17) without a route, the broker's error (error_for_code) or RemotingError."""
        if not 0 < max_num <= MAX_CONSUME_MESSAGES:
            raise MQClientError(
                f"maxNum out of range [1, {MAX_CONSUME_MESSAGES}]: {max_num}", ResponseCode.INVALID_PARAMETER
            )
        if begin_timestamp_ms is not None and end_timestamp_ms is not None and begin_timestamp_ms > end_timestamp_ms:
            raise MQClientError(
                f"begin timestamp {begin_timestamp_ms} is after end timestamp {end_timestamp_ms}",
                ResponseCode.INVALID_PARAMETER,
            )
        route = await self.topic_route(topic)
        found: list[QueueMessages] = []
        remaining = max_num
        for stats in await self._topic_stats(topic, route):
            addr = route.find_broker_addr(stats.broker_name)
            if addr is None or remaining <= 0:
                continue
            begin = await self._offset_at(addr, topic, stats.queue_id, begin_timestamp_ms, stats.min_offset)
            end = await self._offset_at(addr, topic, stats.queue_id, end_timestamp_ms, stats.max_offset)
            mq = MessageQueue(topic, stats.broker_name, stats.queue_id)
            messages = await self._consume_queue(mq, begin, remaining, subscription, end)
            remaining -= len(messages)
            found.append(QueueMessages(mq, begin, end, tuple(messages)))
        return found

    async def _offset_at(self, addr: str, topic: str, queue_id: int, timestamp_ms: int | None, default: int) -> int:
        if timestamp_ms is None:
            return default
        return await self._calls.search_offset_by_timestamp(addr, topic, queue_id, timestamp_ms, self.timeout_ms)

    # ----------------------------------------------------------------------------------------------- queries

    async def query_msg_by_key(
        self, topic: str, key: str, max_num: int = DEFAULT_QUERY_MAX_NUM, begin_ms: int = 0, end_ms: int = 0
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS (or UNIQ_KEY) hold ``key``, stored within [begin_ms, end_ms]
        (``end_ms`` 0: no upper bound), asked of every broker group of the route (its master), merged newest
        first and cut to ``max_num``. Mirrors MQAdminImpl#queryMessage / QueryMsgByKeySubCommand.

        Raises MQClientError NO_MESSAGE (208) when no broker has one, TopicNotExistError (17) without a route,
        MQClientError INVALID_PARAMETER (29) for max_num < 1, the brokers' error when none answered."""
        if max_num < 1:
            raise MQClientError(f"maxNum[{max_num}] must be >= 1", ResponseCode.INVALID_PARAMETER)

        async def ask(addr: str) -> list[MessageExt]:
            result = await self._broker.query_message(addr, topic, key, max_num, begin_ms, end_ms, self.timeout_ms)
            return list(result.messages)

        found = await self._query_route(topic, ask)
        return found[:max_num]

    async def query_msg_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        """The messages of ``topic`` with UNIQ_KEY ``uniq_key`` (the producer's msgId; more than one after a
        retried send), newest first. Mirrors MQAdminImpl#queryMessageByUniqKey / QueryMsgByUniqueKeySubCommand.

        Raises like :meth:`query_msg_by_key`."""

        async def ask(addr: str) -> list[MessageExt]:
            return await self._broker.query_message_by_unique_key(addr, topic, uniq_key, self.timeout_ms)

        found = await self._query_route(topic, ask)
        return [m for m in found if m.uniq_key == uniq_key]

    async def query_msg_by_id(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset msg id, read from the broker the id names (MessageDecoder#decodeMessageId
        -> store host:port + CommitLog offset). Mirrors MQAdminImpl#viewMessage / QueryMsgByIdSubCommand.

        Raises MQClientError INVALID_PARAMETER (29) for a malformed id, the broker's error (QUERY_NOT_FOUND 22,
        ...), RemotingError when that broker does not answer."""
        msg_id = offset_msg_id.strip()
        try:
            host, port, _offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise MQClientError(f"illegal offset msg id [{msg_id}]: {exc}", ResponseCode.INVALID_PARAMETER) from exc
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return await self._broker.view_message_by_id(addr, msg_id, self.timeout_ms)

    async def _query_route(self, topic: str, ask: Callable[[str], Awaitable[list[MessageExt]]]) -> list[MessageExt]:
        """Run ``ask`` on each broker group of ``topic``'s route at once; merge newest first. A broker's
        QUERY_NOT_FOUND counts as no message; other errors are raised only when no broker answered."""
        answers = await gather_answers(
            [ask(a) for a in await self.route_addrs(topic)], ignore_code=ResponseCode.QUERY_NOT_FOUND
        )
        found = [m for messages in answers for m in messages]
        if not found:
            raise MQClientError("query message by key finished, but no message.", ResponseCode.NO_MESSAGE)
        found.sort(key=lambda m: (m.store_timestamp_ms, m.commit_log_offset), reverse=True)
        return found

    # ----------------------------------------------------------------------------------------------- gateway

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str = "",
        keys: Sequence[str] = (),
        producer_group: str = "",
        gateway_addr: str | None = None,
    ) -> GatewaySendResult:
        """Send one message through the producer gateway (ProducerGateway.Send). Mirrors SendMessageCommand.

        Raises the send's error (error_for_code: e.g. MessageIllegalError 13, TopicNotExistError 17) or
        RemotingError when the gateway is unreachable."""
        message = GatewayMessage(topic=topic, body=body, tag=tags, keys=tuple(k for k in keys if k))
        addr = gateway_addr or self.gateway_addr
        return await gateway_send(self._pool, addr, message, producer_group, timeout_ms=max(self.timeout_ms, 10_000))


__all__ = ["DEFAULT_CONSUMER_GROUP", "DEFAULT_GATEWAY_ADDR", "DEFAULT_QUERY_MAX_NUM", "MQAdminClient"]
