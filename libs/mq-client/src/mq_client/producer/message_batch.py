"""RocketMQ's own batch send: messages of one topic as MessageBatches, each one SEND_BATCH_MESSAGE to one queue.

Mirrors DefaultMQProducer#send(Collection<Message>) -> #batch (MessageBatch.generateFromList + encode) sent by
DefaultMQProducerImpl#sendDefaultImpl: a MessageBatch is one message to the send loop — one queue per attempt
from MQFaultStrategy (avoiding the broker of the last failed attempt; a sharding key pins the key's queue), the
fault item updated with the attempt's latency, the whole batch retried on a retriable failure within one budget
(1 + retryTimesWhenSendFailed attempts), retryAnotherBrokerWhenNotStoreOK. A batch of one transaction's half
messages is retried on its first queue only, and a stored non-OK answer is final for it (a copy on a second broker
would be committed twice). A batch whose encoded body passes
max_message_size_bytes (4 MiB, as RocketMQ's limit on a batch) or holds more than max_broker_batch_messages is
split into chunks, sent concurrently (in order, one after another, when they share a sharding key). A batch
whose messages have different sharding keys (``MessageBatch.sharding_keys``) is first cut into one group per
key's queue (:func:`queue_groups`): a group keeps its messages' send order, goes to its queue only (as an ordered
message would), and gets its own chunks; the messages without a key form one queue-free group. RocketMQ's client
leaves that grouping to the application (MessageBatch refuses mixed queues); doing it here gives a keyed batch
from any gRPC client the batch path and per-key order at once.

The hot path works on :class:`MessageBatch` columns: no object per message, the properties text and the batch
item bytes built in a few list passes. :func:`refusal` says when a batch cannot go this way: one topic (by
construction), no delay level (RocketMQ refuses delayed batches), no transaction, no body large enough to be
compressed (compression is per message, on the mixed path of batch.py), and every message valid (Validators). A
transaction is not a refusal when it is the batch's own (``MessageBatch.transaction``: all messages half messages of
one transaction, this project's extension, mq_client.producer.batch_transaction): its SEND_BATCH_MESSAGE carries the
PREPARED sysflag and the transaction's properties; a TRAN_MSG among a message's own properties still is.
A caller that already holds the encoded body (:class:`EncodedMessageBatch`: the gateway encodes plain SendBatch
requests in C, checked by :func:`encoded_refusal`) skips prepare and goes through the same send loop as one
chunk (:meth:`MessageBatchSender.send_encoded`). Runs on the producer's asyncio loop.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from mq_common.batch_codec import BATCH_ITEM_OVERHEAD_BYTES
from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES, MessageConst
from mq_common.errors import MQError
from mq_common.message_id import create_uniq_ids
from mq_common.protocol import MessageQueue

from mq_client.producer.batch_transaction import BatchTransaction
from mq_client.producer.config import ProducerConfig
from mq_client.producer.fault_strategy import ClockMs, MQFaultStrategy
from mq_client.producer.kernel import SendBudget, SendKernel
from mq_client.producer.message import Message, MessageBatch
from mq_client.producer.selectors import select_by_sharding_key
from mq_client.producer.send_loop import retry_policy, send_with_retries
from mq_client.producer.send_result import CommunicationMode, MessageBatchResult, SendResult
from mq_client.producer.topic_publish_info import TopicPublishInfo
from mq_client.producer.validators import check_message, check_topic

Outcome = SendResult | MQError
FindPublishInfo = Callable[[str, SendBudget], Awaitable[TopicPublishInfo]]
_NOT_IN_BATCH: Final = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TRANSACTION_PREPARED,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
)
_SEPARATORS: Final = ("\x01", "\x02")
_HEAD: Final = struct.Struct(">iiiii")  # batch_codec's item head: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_PROPS_LEN: Final = struct.Struct(">H")
_WAIT: Final = f"{MessageConst.WAIT_STORE_MSG_OK}\x01true\x02"
_UNIQ: Final = f"{MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01"


@dataclass(frozen=True, slots=True)
class ChunkOutcome:
    """Messages ``start`` .. ``stop - 1`` of a MessageBatch: stored as one MessageBatch, or refused by ``result``.

    ``positions``: when the sender regrouped the batch by queue (per-message sharding keys), the batch positions of
    this chunk's messages, in the chunk's order (message ``j`` of the result is batch message ``positions[j]``);
    None when the chunk is the batch's own messages ``start`` .. ``stop - 1``.
    """

    start: int
    stop: int
    result: MessageBatchResult | MQError
    positions: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return self.stop - self.start

    def indices(self) -> Sequence[int]:
        """The batch positions of this chunk's messages, in the chunk's (and its result's) order."""
        return range(self.start, self.stop) if self.positions is None else self.positions


ENCODED_FIXED_PROPERTIES: Final = f"{_WAIT}{_UNIQ}".encode()
"""The properties text every message of an :class:`EncodedMessageBatch` ends with, before its UNIQ_KEY and \\x02
(after its TAGS and KEYS, when it has them): the order of kernel.prepare_message."""


@dataclass(frozen=True, slots=True)
class EncodedMessageBatch:
    """Messages of one topic already encoded as one RocketMQ MessageBatch body (batch_codec items, each with its
    TAGS, KEYS, WAIT and UNIQ_KEY properties: what :func:`prepare` and ``_Prepared.encode`` would write), built by a
    caller that checked them with :func:`encoded_refusal` (the gateway's wire scanner). ``msg_ids``: the UNIQ_KEYs,
    in message order; ``first_message`` builds message 0 for the send hooks (called only when hooks are set);
    ``transaction``: every message is a half message of it (``MessageBatch.transaction``), else None."""

    topic: str
    body: bytes
    msg_ids: list[str]
    first_message: Callable[[], Message]
    transaction: BatchTransaction | None = None


def encoded_refusal(
    config: ProducerConfig,
    topic: str,
    count: int,
    min_body_bytes: int,
    max_body_bytes: int,
    total_bytes: int,
    max_properties_bytes: int,
) -> str | None:
    """:func:`refusal` for a batch about to be encoded whole (:class:`EncodedMessageBatch`), or None when it can go
    as one MessageBatch: message batches enabled, the topic (Validators#checkTopic), every body 1 ..
    max_message_size_bytes and below the compression threshold, the longest properties text within 32,767 bytes,
    the encoded body (``total_bytes``) within max_message_size_bytes and ``count`` within max_broker_batch_messages
    (so it is one chunk). The caller has checked the texts (no \\x01 / \\x02, no user properties)."""
    shape = _shape_refusal(config, topic, count, min_body_bytes, max_body_bytes)
    if shape is not None:
        return shape
    if max_properties_bytes > MAX_PROPERTIES_SIZE_BYTES:
        return f"a message's properties pass {MAX_PROPERTIES_SIZE_BYTES} bytes"
    if total_bytes > config.max_message_size_bytes or count > config.max_broker_batch_messages:
        return "more than one chunk"
    return None


def _shape_refusal(
    config: ProducerConfig, topic: str, count: int, min_body_bytes: int, max_body_bytes: int
) -> str | None:
    """The checks :func:`refusal` and :func:`encoded_refusal` share: batches enabled, at least one message, the
    topic (Validators#checkTopic), every body 1 .. max_message_size_bytes and below the compression threshold."""
    if not config.message_batch_enable:
        return "message batches are disabled"
    if count <= 0:
        return "no message"
    try:
        check_topic(topic)
    except MQError as exc:
        return exc.remark
    if min_body_bytes <= 0:
        return "a body is empty"
    if max_body_bytes > config.max_message_size_bytes or max_body_bytes >= config.compress_msg_body_over_howmuch_bytes:
        return "a body is too large (or would be compressed)"
    return None


def qualifies(msgs: Sequence[Message], config: ProducerConfig) -> bool:
    """True when ``msgs`` share one topic, carry no delay (level or timer, as a field or a property) or transaction
    property, no body large enough to compress, and ``config.message_batch_enable``: then
    :meth:`MessageBatchSender.send` takes them (messages with different sharding keys go as one MessageBatch per
    queue)."""
    if not msgs or not config.message_batch_enable:
        return False
    first = msgs[0]
    threshold = config.compress_msg_body_over_howmuch_bytes
    for msg in msgs:
        if msg is None or msg.topic != first.topic:
            return False
        if msg.body is not None and len(msg.body) >= threshold:
            return False
        if msg.is_delayed():
            return False
        if msg.properties and any(name in msg.properties for name in _NOT_IN_BATCH):
            return False
    return True


def refusal(batch: MessageBatch, config: ProducerConfig) -> str | None:
    """Why ``batch`` cannot be sent as MessageBatches (then send its messages with send_batch, which gives each
    its own error), or None. Checks, on whole columns: message batches enabled, at least one message, the topic
    (Validators#checkTopic), every body 1 .. max_message_size_bytes and below the compression threshold, no
    \\x01 / \\x02 in tags, keys, sharding key or properties, no DELAY, TIMER_* or TRAN_MSG property; the batch's
    transaction (if any) with a producer group and an id, neither holding \\x01 / \\x02."""
    sizes = list(map(len, batch.bodies))
    shape = _shape_refusal(config, batch.topic, len(sizes), min(sizes, default=0), max(sizes, default=0))
    if shape is not None:
        return shape
    if batch.transaction is not None and (unfit := batch.transaction.refusal()) is not None:
        return unfit
    texts = [batch.sharding_key, *batch.tags, *batch.sharding_keys]
    if batch.keys:
        texts.extend(key for keys in batch.keys for key in keys)
    for props in batch.properties:
        if props:
            if any(name in props for name in _NOT_IN_BATCH):
                return "a message has a delay level or is transactional"
            texts.extend(props)
            texts.extend(props.values())
    text = "".join(texts)
    if _SEPARATORS[0] in text or _SEPARATORS[1] in text:
        return "a tag, key, sharding key or property holds \\x01 or \\x02"
    return None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A MessageBatch ready for the wire: per message its UNIQ_KEY, batch item head (22 bytes but the properties
    length), properties tail (PROPERTIESLENGTH + PROPERTIES) and encoded item size."""

    msg_ids: list[str]
    heads: list[bytes]
    tails: list[bytes]
    sizes: list[int]

    def encode(self, bodies: Sequence[bytes], start: int, stop: int) -> bytes:
        """The batch_codec body of messages ``start`` .. ``stop - 1`` (one join)."""
        parts: list[bytes] = [b""] * (3 * (stop - start))
        parts[0::3] = self.heads[start:stop]
        parts[1::3] = bodies[start:stop]
        parts[2::3] = self.tails[start:stop]
        return b"".join(parts)


def _properties(batch: MessageBatch) -> tuple[list[str], list[str]]:
    """Each message's properties text (its user properties, TAGS, KEYS, __SHARDINGKEY, WAIT, UNIQ_KEY: the order of
    kernel.prepare_message) and UNIQ_KEY (a user UNIQ_KEY is kept)."""
    count = len(batch.bodies)
    ids = create_uniq_ids(count)
    tags = batch.tags or [""] * count
    keys: Sequence[Sequence[str]] = batch.keys or [()] * count
    sharding_keys = batch.sharding_keys or [batch.sharding_key] * count
    key_texts: dict[str, str] = {}
    texts: list[str] = []
    for i, (tag, msg_keys, sharding_key) in enumerate(zip(tags, keys, sharding_keys, strict=True)):
        props = batch.properties[i] if batch.properties else None
        if props:
            text, ids[i] = _with_user_properties(props, tag, msg_keys, sharding_key, ids[i])
            texts.append(text)
            continue
        key = key_texts.get(sharding_key)
        if key is None:
            key = key_texts[sharding_key] = _sharding_text(sharding_key)
        tag_text = f"{MessageConst.TAGS}\x01{tag}\x02" if tag else ""
        keys_text = f"{MessageConst.KEYS}\x01{MessageConst.KEY_SEPARATOR.join(msg_keys)}\x02" if msg_keys else ""
        texts.append(f"{tag_text}{keys_text}{key}{_WAIT}{_UNIQ}{ids[i]}\x02")
    return texts, ids


def _with_user_properties(
    user: Mapping[str, str], tag: str, keys: Sequence[str], sharding_key: str, new_id: str
) -> tuple[str, str]:
    props = dict(user)
    if tag:
        props[MessageConst.TAGS] = tag
    if keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(keys)
    if sharding_key:
        props[MessageConst.SHARDING_KEY] = sharding_key
    props.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true")
    msg_id = props.setdefault(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, new_id)
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()), msg_id


def _sharding_text(sharding_key: str) -> str:
    return f"{MessageConst.SHARDING_KEY}\x01{sharding_key}\x02" if sharding_key else ""


def _prepare_plain(batch: MessageBatch) -> _Prepared | str:
    """:func:`prepare` for messages without tags, keys or user properties: their properties differ only by the
    UNIQ_KEY (one length), so a head is packed once per body length (and flag)."""
    ids = create_uniq_ids(len(batch.bodies))
    text_head = f"{_sharding_text(batch.sharding_key)}{_WAIT}{_UNIQ}".encode()
    props_len = len(text_head) + len(ids[0]) + 1
    if props_len > MAX_PROPERTIES_SIZE_BYTES:
        return f"a message's properties pass {MAX_PROPERTIES_SIZE_BYTES} bytes"
    prefix = _PROPS_LEN.pack(props_len) + text_head
    tails = [prefix + uid.encode() + b"\x02" for uid in ids]
    fixed = BATCH_ITEM_OVERHEAD_BYTES + props_len
    lengths = list(map(len, batch.bodies))
    sizes = [fixed + n for n in lengths]
    head = _HEAD.pack
    if batch.flags:
        heads = [head(fixed + n, 0, 0, flag, n) for n, flag in zip(lengths, batch.flags, strict=True)]
    else:
        packed = {n: head(fixed + n, 0, 0, 0, n) for n in set(lengths)}
        heads = list(map(packed.__getitem__, lengths))
    return _Prepared(ids, heads, tails, sizes)


def prepare(batch: MessageBatch) -> _Prepared | str:
    """UNIQ_KEYs, properties and item bytes of every message; a refusal text when a message's properties pass
    32,767 bytes."""
    if not (batch.tags or batch.keys or batch.properties or batch.sharding_keys):
        return _prepare_plain(batch)
    texts, ids = _properties(batch)
    encoded = [text.encode("utf-8") for text in texts]
    if max(map(len, encoded)) > MAX_PROPERTIES_SIZE_BYTES:
        return f"a message's properties pass {MAX_PROPERTIES_SIZE_BYTES} bytes"
    head, props_len, overhead = _HEAD.pack, _PROPS_LEN.pack, BATCH_ITEM_OVERHEAD_BYTES
    sizes = [overhead + len(body) + len(props) for body, props in zip(batch.bodies, encoded, strict=True)]
    flags = batch.flags or [0] * len(sizes)
    heads = [head(size, 0, 0, flag, len(body)) for size, flag, body in zip(sizes, flags, batch.bodies, strict=True)]
    tails = [props_len(len(props)) + props for props in encoded]
    return _Prepared(ids, heads, tails, sizes)


def chunk_ranges(sizes: Sequence[int], max_body_bytes: int, max_messages: int) -> list[tuple[int, int]]:
    """Consecutive (start, stop) runs whose encoded batch body stays within ``max_body_bytes`` and whose length
    stays within ``max_messages``; a single message always fits."""
    if len(sizes) <= max_messages and sum(sizes) <= max_body_bytes:
        return [(0, len(sizes))]
    ranges: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (total + size > max_body_bytes or i - start >= max_messages):
            ranges.append((start, i))
            start, total = i, 0
        total += size
    ranges.append((start, len(sizes)))
    return ranges


def queue_groups(
    sharding_keys: Sequence[str], queues: Sequence[MessageQueue]
) -> list[tuple[MessageQueue | None, list[int]]]:
    """Positions of ``sharding_keys`` grouped by their key's queue (selectors.select_by_sharding_key; None for the
    messages without a key), groups in order of first appearance, positions ascending in each."""
    by_key: dict[str, MessageQueue | None] = {}
    groups: dict[MessageQueue | None, list[int]] = {}
    for i, key in enumerate(sharding_keys):
        if key in by_key:
            mq = by_key[key]
        else:
            mq = by_key[key] = select_by_sharding_key(queues, key) if key else None
        members = groups.get(mq)
        if members is None:
            groups[mq] = [i]
        else:
            members.append(i)
    return list(groups.items())


class MessageBatchSender:
    """Sends MessageBatches for DefaultMQProducer#send_message_batch and #send_batch."""

    def __init__(self, kernel: SendKernel, fault_strategy: MQFaultStrategy, clock_ms: ClockMs) -> None:
        self._kernel = kernel
        self._fault = fault_strategy
        self._clock_ms = clock_ms
        self._policy = retry_policy(kernel.config, CommunicationMode.SYNC)
        # A batch of half messages is retried on its first queue only, and a stored non-OK answer is final: a retry
        # on another broker after a lost answer would leave two copies a whole-transaction commit would both commit
        # (one broker's commit rolls back the copies of a UNIQ_KEY it already committed).
        self._half_policy = replace(self._policy, retry_not_store_ok=False)

    async def send(
        self, msgs: Sequence[Message], budget: SendBudget, find_publish_info: FindPublishInfo
    ) -> list[Outcome] | None:
        """``msgs`` (:func:`qualifies`) as MessageBatches: one outcome per message, in order — a message refused by
        the validators gets its error, the others their chunk's SendResult or final error. None when the valid
        messages cannot go as MessageBatches after all (see :func:`refusal`); nothing was sent then."""
        outcomes: list[Outcome | None] = [None] * len(msgs)
        valid: list[int] = []
        max_size = self._kernel.config.max_message_size_bytes
        for i, msg in enumerate(msgs):
            try:
                check_message(msg, max_size)
            except MQError as exc:
                outcomes[i] = exc
            else:
                valid.append(i)
        if valid:
            chunks = await self.send_batch(
                MessageBatch.from_messages([msgs[i] for i in valid]), budget, find_publish_info
            )
            if chunks is None:
                return None
            for chunk in chunks:
                result = chunk.result
                per_message: Sequence[Outcome] = (
                    result.results() if isinstance(result, MessageBatchResult) else [result] * len(chunk)
                )
                for position, outcome in zip(chunk.indices(), per_message, strict=True):
                    outcomes[valid[position]] = outcome
        assert all(o is not None for o in outcomes)
        return [o for o in outcomes if o is not None]

    async def send_batch(
        self, batch: MessageBatch, budget: SendBudget, find_publish_info: FindPublishInfo
    ) -> list[ChunkOutcome] | None:
        """``batch`` as MessageBatches: the outcome of each chunk (a route lookup failure is one outcome for every
        message). One sharding key (or none): chunks in message order. Per-message ``sharding_keys``: the messages
        are grouped by their key's queue (a message without a key joins the queue-free group), each group keeps its
        messages' order and goes as its own chunks to its queue, groups concurrently; each chunk's ``positions``
        says which batch messages it holds. None when :func:`refusal` or :func:`prepare` refuses the batch; nothing
        was sent then."""
        config = self._kernel.config
        if refusal(batch, config) is not None:
            return None
        try:
            tp_info = await find_publish_info(batch.topic, budget)
        except MQError as exc:
            return [ChunkOutcome(0, len(batch), exc)]
        if batch.sharding_keys:
            return await self._send_by_queue(batch, tp_info, budget)
        prepared = prepare(batch)
        if isinstance(prepared, str):
            return None
        fixed = select_by_sharding_key(tp_info.message_queues, batch.sharding_key) if batch.sharding_key else None
        return await self._send_group(batch, prepared, (0, len(batch)), tp_info, fixed, budget)

    async def _send_by_queue(
        self, batch: MessageBatch, tp_info: TopicPublishInfo, budget: SendBudget
    ) -> list[ChunkOutcome] | None:
        groups = queue_groups(batch.sharding_keys, tp_info.message_queues)
        positions = [i for _mq, members in groups for i in members]
        regrouped = len(groups) > 1
        work = batch.select(positions) if regrouped else batch
        prepared = prepare(work)
        if isinstance(prepared, str):
            return None
        spans: list[tuple[MessageQueue | None, tuple[int, int]]] = []
        start = 0
        for mq, members in groups:
            spans.append((mq, (start, start + len(members))))
            start += len(members)
        sent = await asyncio.gather(
            *(self._send_group(work, prepared, span, tp_info, mq, budget) for mq, span in spans)
        )
        chunks = [chunk for group in sent for chunk in group]
        if not regrouped:
            return chunks
        return [replace(c, positions=tuple(positions[c.start : c.stop])) for c in chunks]

    async def _send_group(
        self,
        batch: MessageBatch,
        prepared: _Prepared,
        span: tuple[int, int],
        tp_info: TopicPublishInfo,
        fixed_mq: MessageQueue | None,
        budget: SendBudget,
    ) -> list[ChunkOutcome]:
        """Messages ``span`` of ``batch`` as chunks: to ``fixed_mq`` one after another (their order is the key's),
        or queue-free (MQFaultStrategy per chunk) concurrently."""
        config = self._kernel.config
        start, stop = span
        sizes = prepared.sizes[start:stop]
        ranges = [
            (start + a, start + b)
            for a, b in chunk_ranges(sizes, config.max_message_size_bytes, config.max_broker_batch_messages)
        ]
        if fixed_mq is not None or len(ranges) == 1:
            return [await self._send_chunk(batch, prepared, r, tp_info, fixed_mq, budget) for r in ranges]
        return list(
            await asyncio.gather(*(self._send_chunk(batch, prepared, r, tp_info, None, budget) for r in ranges))
        )

    async def send_encoded(
        self, batch: EncodedMessageBatch, budget: SendBudget, find_publish_info: FindPublishInfo
    ) -> list[ChunkOutcome]:
        """``batch`` as one MessageBatch to one queue (MQFaultStrategy picks it; retried as :meth:`send_batch`'s
        chunks are): one outcome for all its messages. A route lookup failure is that outcome."""
        try:
            tp_info = await find_publish_info(batch.topic, budget)
        except MQError as exc:
            return [ChunkOutcome(0, len(batch.msg_ids), exc)]
        chunk = await self._send_body(
            batch.topic,
            batch.body,
            batch.msg_ids,
            batch.first_message,
            (0, len(batch.msg_ids)),
            tp_info,
            None,
            budget,
            batch.transaction,
        )
        return [chunk]

    async def _send_chunk(
        self,
        batch: MessageBatch,
        prepared: _Prepared,
        span: tuple[int, int],
        tp_info: TopicPublishInfo,
        fixed_mq: MessageQueue | None,
        budget: SendBudget,
    ) -> ChunkOutcome:
        start, stop = span

        def hook_message() -> Message:
            return batch.message(start)

        body = prepared.encode(batch.bodies, start, stop)
        return await self._send_body(
            batch.topic,
            body,
            prepared.msg_ids[start:stop],
            hook_message,
            span,
            tp_info,
            fixed_mq,
            budget,
            batch.transaction,
        )

    async def _send_body(
        self,
        topic: str,
        body: bytes,
        msg_ids: list[str],
        hook_message: Callable[[], Message],
        span: tuple[int, int],
        tp_info: TopicPublishInfo,
        fixed_mq: MessageQueue | None,
        budget: SendBudget,
        transaction: BatchTransaction | None = None,
    ) -> ChunkOutcome:
        """sendDefaultImpl for one MessageBatch (messages ``span`` of a batch, encoded as ``body``; half messages of
        ``transaction`` when given)."""
        kernel = self._kernel
        start, stop = span
        sys_flag, properties = (0, "") if transaction is None else (transaction.sys_flag, transaction.properties_text())

        first: list[MessageQueue] = []

        def choose_queue(last_broker_name: str | None) -> MessageQueue:
            if fixed_mq is not None:
                return fixed_mq
            if transaction is not None and first:
                return first[0]
            mq = self._fault.select_one_message_queue(tp_info, last_broker_name)
            first.append(mq)
            return mq

        async def attempt(mq: MessageQueue, remaining_ms: int) -> MessageBatchResult:
            return await kernel.send_message_batch(
                body,
                msg_ids,
                hook_message,
                mq,
                remaining_ms,
                CommunicationMode.SYNC,
                queue_free=fixed_mq is None,
                sys_flag=sys_flag,
                properties=properties,
            )

        try:
            result = await send_with_retries(
                topic=topic,
                policy=self._policy if transaction is None else self._half_policy,
                budget=budget,
                clock_ms=self._clock_ms,
                choose_queue=choose_queue,
                update_fault_item=self._fault.update_fault_item,
                attempt=attempt,
            )
        except MQError as exc:
            return ChunkOutcome(start, stop, exc)
        return ChunkOutcome(start, stop, result)
