"""The open transactions of a topic, one transaction's state, and the CommitLog offset open transactions still need.

Behind ``mqadmin queryTransactions`` and the transaction rows of ``queryMsgById`` (RocketMQ's tools have neither:
they only count half messages through the CID_RMQ_SYS_TRANS offsets). A transaction is *open* while it is not
committed, rolled back nor discarded (mq_broker.transaction.transaction_state): :meth:`OpenTransactions.query` walks
the half queue (RMQ_SYS_TRANS_HALF_TOPIC queue 0) from the check progress to its end in slices of SCAN_BATCH,
yielding to the event loop between them, as TransactionalMessageServiceImpl#check walks it, and keeps the newest copy
of each transaction of the topic that the op records (RMQ_SYS_TRANS_OP_HALF_TOPIC) have not ended.

:func:`min_open_offset` is the lowest CommitLog offset an open transaction still needs (the record at the check
progress: every open transaction's newest copy lies at or after it); the broker's CleanService keeps the CommitLog
files from there, as it keeps those of held timers (mq_broker.schedule.services.ScheduledDelivery#min_held_offset).
Runs on the broker's event loop, except :func:`min_open_offset` and :func:`lowest_offset` (any thread).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    MessageConst,
    MessageSysFlag,
    validate_topic,
)
from mq_common.errors import MQBrokerError
from mq_common.protocol.transaction import OpenTransaction
from mq_common.response_code import ResponseCode

from mq_broker.store.config import BrokerRole
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.transaction.half_message import COMMIT, DISCARDED, HALF_QUEUE_ID, ROLLBACK
from mq_broker.transaction.transaction_state import SCAN_BATCH, TransactionState, identity_of

DEFAULT_MAX_NUM: Final = 1000
"""Transactions listed when the request asks for 0."""
MAX_MAX_NUM: Final = 100_000

OPEN: Final = "OPEN"
COMMITTED: Final = "COMMITTED"
ROLLED_BACK: Final = "ROLLED_BACK"
CHECK_MAX: Final = "CHECK_MAX"
UNKNOWN: Final = "UNKNOWN"
_STATE_OF_END: Final = {COMMIT: COMMITTED, ROLLBACK: ROLLED_BACK, DISCARDED: CHECK_MAX}
_TYPE_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


@dataclass(frozen=True, slots=True)
class OpenTransactionsResult:
    """QueryOpenTransactionsResponse's fields: ``transactions`` oldest first (at most max_num), ``total_open`` (all
    of the topic), and for a UNIQ_KEY its ``state`` (OPEN, COMMITTED, ROLLED_BACK, CHECK_MAX, UNKNOWN) and, when
    OPEN, its ``transaction``."""

    transactions: list[OpenTransaction] = field(default_factory=list)
    total_open: int = 0
    state: str = ""
    transaction: OpenTransaction | None = None


def _check_times(half: MessageExt) -> int:
    text = half.properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0")
    return int(text) if text.isdigit() else 0


def _open_transaction(half: MessageExt, identity: int, now_ms: int) -> OpenTransaction:
    props = half.properties
    uniq_key = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
    return OpenTransaction(
        msg_id=uniq_key,
        producer_group=props.get(MessageConst.PRODUCER_GROUP, ""),
        transaction_id=props.get(MessageConst.TRANSACTION_ID) or uniq_key,
        born_timestamp_ms=half.born_timestamp_ms,
        age_ms=max(0, now_ms - half.born_timestamp_ms),
        check_times=_check_times(half),
        keys=props.get(MessageConst.KEYS, ""),
        tags=props.get(MessageConst.TAGS, ""),
        prepared_queue_offset=identity,
        queue_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
    )


def _still_open(state: TransactionState, identity: int, queue_offset: int) -> bool:
    """TransactionState#is_open for the copy at ``queue_offset`` of transaction ``identity``."""
    if identity in state.ended:
        return False
    return queue_offset >= state.half_progress or identity in state.latest_copy


class OpenTransactions:
    """Answers QueryOpenTransactions over one broker's store and transaction state (see the module). ``clock_ms``
    is the wall clock (tests pass their own)."""

    def __init__(
        self, store: DefaultMessageStore, state: TransactionState, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self.store = store
        self.state = state
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)

    async def query(self, topic: str, max_num: int = 0, uniq_key: str = "") -> OpenTransactionsResult:
        """The open transactions of real topic ``topic`` (at most ``max_num``, 0: DEFAULT_MAX_NUM) oldest first,
        with their total; with ``uniq_key`` instead that message's transaction state (found through the index of
        the half topic, no scan; ``transactions`` empty, ``total_open`` the broker's open count of the topic).

        Raises MQBrokerError: INVALID_PARAMETER 29 for an illegal topic name or a ``max_num`` below 0 or above
        MAX_MAX_NUM; SERVICE_NOT_AVAILABLE 14 on a slave (transactions are known to the master only)."""
        remark = validate_topic(topic)
        if remark is not None:
            raise MQBrokerError(remark, ResponseCode.INVALID_PARAMETER)
        if max_num < 0 or max_num > MAX_MAX_NUM:
            raise MQBrokerError(
                f"maxNum {max_num} is out of range [0, {MAX_MAX_NUM}] (0: {DEFAULT_MAX_NUM})",
                ResponseCode.INVALID_PARAMETER,
            )
        if self.store.broker_role is BrokerRole.SLAVE:
            raise MQBrokerError(
                "open transactions are known to the master only, ask the broker group's master",
                ResponseCode.SERVICE_NOT_AVAILABLE,
            )
        state = self.state
        state.ensure_loaded()
        state.catch_up_ops()
        if uniq_key:
            found, transaction = self._state_of(topic, uniq_key)
            return OpenTransactionsResult([], state.open_counts().get(topic, 0), found, transaction)
        return await self._scan(topic, max_num or DEFAULT_MAX_NUM)

    async def _scan(self, topic: str, max_num: int) -> OpenTransactionsResult:
        state = self.state
        newest: dict[int, OpenTransaction] = {}  # fields only, no bodies: memory stays small for many
        offset = state.half_progress
        end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        while offset < end:
            stop = min(end, offset + SCAN_BATCH)
            for half in state.iter_half(offset, stop):
                if half.properties.get(MessageConst.REAL_TOPIC) == topic:
                    identity = identity_of(half)  # copies come later in the queue: the last one wins
                    newest[identity] = _open_transaction(half, identity, 0)
            offset = stop
            await asyncio.sleep(0)  # a million half messages: slices, the loop keeps serving
        state.catch_up_ops()  # ended while the scan ran
        now_ms = self._clock_ms()
        open_ones = sorted(
            (t for i, t in newest.items() if _still_open(state, i, t.queue_offset)),
            key=lambda t: t.prepared_queue_offset,
        )
        listed = [replace(t, age_ms=max(0, now_ms - t.born_timestamp_ms)) for t in open_ones[:max_num]]
        return OpenTransactionsResult(listed, len(open_ones))

    def _state_of(self, topic: str, uniq_key: str) -> tuple[str, OpenTransaction | None]:
        """The transaction state of the half message ``uniq_key`` of ``topic`` (see OpenTransactionsResult)."""
        halves = [
            h
            for h in self._by_unique_key(TRANS_HALF_TOPIC, uniq_key)
            if h.properties.get(MessageConst.REAL_TOPIC) == topic
        ]
        if not halves:
            return (COMMITTED if self._committed(topic, uniq_key) else UNKNOWN), None
        half = max(halves, key=lambda h: h.queue_offset)  # the newest copy the index knows
        identity = identity_of(half)
        state = self.state
        if identity in state.ended and state.ended[identity] in _STATE_OF_END:
            return _STATE_OF_END[state.ended[identity]], None
        if _still_open(state, identity, half.queue_offset):
            return OPEN, _open_transaction(half, identity, self._clock_ms())
        # ended and forgotten (its last copy is behind the check progress): what it left behind says how
        if self._by_unique_key(TRANS_CHECK_MAX_TIME_TOPIC, uniq_key):
            return CHECK_MAX, None
        return (COMMITTED if self._committed(topic, uniq_key) else ROLLED_BACK), None

    def _committed(self, topic: str, uniq_key: str) -> bool:
        """Whether ``topic`` holds the committed message of ``uniq_key`` (the COMMIT transaction type)."""
        return any(
            m.sys_flag & _TYPE_MASK == MessageSysFlag.TRANSACTION_COMMIT_TYPE
            for m in self._by_unique_key(topic, uniq_key)
        )

    def _by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        found: list[MessageExt] = []
        for raw in self.store.query_message_by_unique_key(topic, uniq_key).messages:
            try:
                found.append(decode_message(raw, check_crc=False, decompress=False))
            except MessageDecodeError:
                continue
        return found


def min_open_offset(store: DefaultMessageStore, state: TransactionState) -> int | None:
    """The lowest CommitLog offset an open transaction still needs: that of the half record at the check progress
    (None when the half queue is read to its end, or the state is not loaded: a slave). Any thread (reads two ints
    and one ConsumeQueue unit)."""
    if not state.loaded:
        return None
    progress = state.half_progress
    if progress >= store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID):
        return None
    cq = store.find_consume_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
    unit = cq.get_unit(progress) if cq is not None else None
    if unit is None or unit.is_blank:
        return None
    return unit.commit_log_offset


def lowest_offset(*sources: Callable[[], int | None]) -> Callable[[], int | None]:
    """A CleanService ``keep_from``: the lowest offset any of ``sources`` needs (None when none needs one)."""

    def keep_from() -> int | None:
        offsets = [o for o in (source() for source in sources) if o is not None]
        return min(offsets, default=None)

    return keep_from
