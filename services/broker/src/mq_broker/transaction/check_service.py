"""TransactionalMessageCheckService: every transaction_check_interval_ms, check back the open transactions older
than their timeout.

Mirrors org.apache.rocketmq.broker.transaction.TransactionalMessageCheckService and
TransactionalMessageServiceImpl#check. One pass walks the half queue from the check progress (the consumer offset of
CID_RMQ_SYS_TRANS, mq_broker.transaction.transaction_state) to where it ended when the pass began:
- an ended transaction's half message (or an older copy of a transaction copied further on) is passed over;
- one checked ``transaction_check_max`` times (TRANSACTION_CHECK_TIMES) goes to TRANS_CHECK_MAX_TIME_TOPIC with an op
  record (DISCARDED) — DefaultTransactionalMessageCheckListener#resolveDiscardMsg;
- one younger than its immunity time (CHECK_IMMUNITY_TIME_IN_SECONDS, at least transaction_timeout_ms) ends the pass
  (later ones are younger still), unless it asked for an immunity longer than the timeout: it is copied to the end
  of the half queue unchecked (putImmunityMsgBackToHalfQueue) and the pass goes on;
- any other is copied to the end of the half queue with TRANSACTION_CHECK_TIMES + 1 (putBackHalfMsgQueue) and the
  copy is handed to the check listener (AbstractTransactionalMessageCheckListener#resolveHalfMsg), which asks a
  producer of its group (mq_broker.transaction.producer_manager; nobody online: the check is counted anyway, as
  RocketMQ). The producer answers with END_TRANSACTION (from_transaction_check) naming the copy.
Then the progress moves past what was handled. Runs on the event loop of a master only (:meth:`start` /
:meth:`stop` follow the role); each pass yields to the loop between batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message, decode_properties
from mq_common.constants import TRANS_HALF_TOPIC, MessageConst, MessageSysFlag
from mq_common.logging import get_logger
from mq_common.message_id import create_offset_msg_id

from mq_broker.store.api import MessageStore
from mq_broker.store.message import MessageExtBrokerInner
from mq_broker.transaction.half_message import (
    DISCARDED,
    HALF_QUEUE_ID,
    PREPARED_QUEUE_OFFSET,
    check_copy,
    discarded_message,
    op_record,
)
from mq_broker.transaction.half_record import HalfRecord, parse_half_record
from mq_broker.transaction.transaction_state import TransactionState, identity_of
from mq_broker.transaction.transactional_message_service import immunity_ms_of, immunity_time_ms

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics
    from mq_broker.store.message import PutMessageResult

log = get_logger("mq_broker.transaction")

_TYPE_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
MAX_PROCESS_TIME_LIMIT_MS: Final = 60_000
"""TransactionalMessageServiceImpl.MAX_PROCESS_TIME_LIMIT: one pass stops after this long."""

Waiting = tuple[MessageExtBrokerInner, int, int, int, MessageExt | None]
"""A half message waiting for its copy in :meth:`TransactionalMessageCheckService._put_checks`: (the copy, the half
message's queue offset, its identity, TRANSACTION_CHECK_TIMES of the copy, the half message when it is checked back;
None for an immunity copy, putImmunityMsgBackToHalfQueue)."""
CheckListener = Callable[[MessageExt], None]
"""Told of every check copy (its topic RMQ_SYS_TRANS_HALF_TOPIC, its own queue and CommitLog offsets, PGROUP,
REAL_TOPIC, UNIQ_KEY): asks a producer of PGROUP for the transaction's state. Must not block."""


@dataclass(slots=True)
class CheckPassResult:
    """What one pass did: ``checked`` copies handed to the listener, ``discarded`` after transactionCheckMax,
    ``immunity_copies`` young messages with a long immunity copied unchecked, ``passed`` ended ones passed over."""

    checked: int = 0
    discarded: int = 0
    immunity_copies: int = 0
    passed: int = 0


class TransactionalMessageCheckService:
    """Checks back the open transactions of one broker (see the module)."""

    def __init__(
        self,
        store: MessageStore,
        state: TransactionState,
        *,
        transaction_timeout_ms: int,
        transaction_check_interval_ms: int,
        transaction_check_max: int,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.state = state
        self.transaction_timeout_ms = transaction_timeout_ms
        self.transaction_check_interval_ms = transaction_check_interval_ms
        self.transaction_check_max = transaction_check_max
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.listeners: list[CheckListener] = []
        self.pass_listeners: list[Callable[[], None]] = []
        """Called after each pass of :meth:`check` (e.g. ProducerManager.log_unreached: one log line per pass)."""
        self.metrics: BrokerMetrics | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Recover the state from the CommitLog and the progress, then check every interval (a master)."""
        if self.running:
            return
        self.state.reset()
        self.state.ensure_loaded()
        self._task = asyncio.create_task(self._run(), name="transaction-check")

    async def stop(self) -> None:
        """Stop checking (a slave, or shutdown); the progress is in the consumer offsets already."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.state.reset()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.transaction_check_interval_ms / 1000)
            try:
                result = await self.check()
            except Exception:
                log.exception("transaction_check_failed")
                continue
            if result.checked or result.discarded:
                log.info(
                    "transaction_check_pass",
                    checked=result.checked,
                    discarded=result.discarded,
                    immunity_copies=result.immunity_copies,
                    passed=result.passed,
                    progress=self.state.half_progress,
                )

    async def check(self) -> CheckPassResult:
        """One pass (see the module). Raises nothing for a bad record (skipped and logged); a failed put ends the
        pass where it was (the next pass retries from there)."""
        state = self.state
        state.ensure_loaded()
        state.catch_up_ops()
        begin_ms = self._clock_ms()
        end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        progress = state.half_progress
        result = CheckPassResult()
        if progress >= end:
            return result
        checks: list[Waiting] = []
        try:
            while progress < end and self._clock_ms() - begin_ms < MAX_PROCESS_TIME_LIMIT_MS:
                batch = list(state.iter_half_raw(progress, min(end, progress + 64)))
                if not batch:
                    break
                for raw in batch:
                    try:  # the fields first (mq_broker.transaction.half_record): most are passed over, undecoded
                        record = parse_half_record(raw)
                        passed = await self._pass_over(record.identity, record.queue_offset, result, checks)
                        if passed is None:
                            passed = self._immunity_copy(record, checks) or await self._handle(
                                decode_message(raw), result, checks
                            )
                    except MessageDecodeError:
                        log.warning("transaction_half_unreadable", offset=progress)
                        continue
                    if not passed:
                        await self._put_checks(checks, result)
                        return result
                    if not checks:  # handled at once (not a check waiting for its copy)
                        state.half_progress = record.queue_offset + 1  # at once: is_open reads it
                if not await self._put_checks(checks, result):
                    return result
                progress = state.half_progress
                state.commit_progress(progress)
                await asyncio.sleep(0)
        finally:
            progress = state.half_progress
            state.commit_progress(progress)
            self._passed()
        return result

    def _passed(self) -> None:
        for listener in self.pass_listeners:
            try:
                listener()
            except Exception:
                log.exception("transaction_check_pass_listener_failed")

    async def _handle(self, half: MessageExt, result: CheckPassResult, checks: list[Waiting]) -> bool:
        """Handle one half message; False ends the pass here (too young, or a put failed). One to check back, or to
        copy unchecked (younger than a CHECK_IMMUNITY_TIME_IN_SECONDS longer than the timeout), is appended to
        ``checks`` and copied with the others by :meth:`_put_checks` (one put, one group commit, for a run of them);
        anything else first puts the checks waiting before it."""
        identity = identity_of(half)
        passed = await self._pass_over(identity, half.queue_offset, result, checks)
        if passed is not None:
            return passed
        check_times = _int(half.properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0"))
        age_ms = self._clock_ms() - half.born_timestamp_ms
        immunity_ms = immunity_time_ms(half, self.transaction_timeout_ms)
        if check_times < self.transaction_check_max:  # open, its newest copy
            if age_ms >= immunity_ms:
                checks.append(
                    (check_copy(half, identity, check_times + 1), half.queue_offset, identity, check_times + 1, half)
                )
                return True
            if immunity_ms > self.transaction_timeout_ms:  # young, a long immunity: copied unchecked
                checks.append((check_copy(half, identity, check_times), half.queue_offset, identity, check_times, None))
                return True
        if not await self._put_checks(checks, result):  # the progress moves past them before anything else
            return False
        if check_times >= self.transaction_check_max:
            return await self._discard(half, identity, result)
        return False  # younger than its immunity time

    def _immunity_copy(self, record: HalfRecord, checks: list[Waiting]) -> bool:
        """:meth:`_handle`'s immunity copy from the record's fields, without decoding it (every open half message of
        a Spark exactly-once job is one, each pass): True when ``record`` (open, its newest copy) is younger than a
        CHECK_IMMUNITY_TIME_IN_SECONDS longer than the timeout and its copy (half_message.check_copy's) is appended
        to ``checks``; False when :meth:`_handle` must decide (also for a compressed body)."""
        if record.sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            return False
        properties = decode_properties(record.properties)
        check_times = _int(properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0"))
        immunity_ms = immunity_ms_of(properties, self.transaction_timeout_ms)
        if (
            check_times >= self.transaction_check_max
            or self._clock_ms() - record.born_timestamp_ms >= immunity_ms
            or immunity_ms <= self.transaction_timeout_ms
        ):
            return False
        properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
        properties[PREPARED_QUEUE_OFFSET] = str(record.identity)
        copy = MessageExtBrokerInner.build(
            topic=TRANS_HALF_TOPIC,
            queue_id=HALF_QUEUE_ID,
            body=record.body,
            properties=properties,
            flag=record.flag,
            sys_flag=record.sys_flag & ~_TYPE_MASK,
            born_timestamp_ms=record.born_timestamp_ms,
            born_host=record.born_host,
            reconsume_times=record.reconsume_times,
        )
        checks.append((copy, record.queue_offset, record.identity, check_times, None))
        return True

    async def _pass_over(
        self, identity: int, queue_offset: int, result: CheckPassResult, checks: list[Waiting]
    ) -> bool | None:
        """The half message (or copy) at ``queue_offset`` of transaction ``identity`` when it needs nothing of this
        pass: False (end the pass) while an END_TRANSACTION is storing its outcome; True once passed over, ended or
        copied further on (the checks waiting before it put first; its last copy: the transaction is forgotten);
        None when it must be looked at (:meth:`_handle`). False too when a put of the waiting checks failed."""
        state = self.state
        if identity in state.ending:  # an END_TRANSACTION is storing its outcome: look again next pass
            return False
        newest = state.latest_copy.get(identity, queue_offset)
        if identity not in state.ended and newest == queue_offset:
            return None
        if not await self._put_checks(checks, result):  # the progress moves past them before anything else
            return False
        if newest == queue_offset:  # its last copy: nothing of it lies ahead any more
            state.forget(identity)
        result.passed += 1
        return True

    async def _put_checks(self, checks: list[Waiting], result: CheckPassResult) -> bool:
        """Copy the half messages of ``checks`` to the end of the half queue in one put (one group commit), move
        the half progress past each original and record its copy as the newest; a checked one's copy is handed to
        the listeners (counted ``checked``), an immunity copy is not (``immunity_copies``); empties ``checks``. False
        when a put failed (the progress stays at the first one not copied)."""
        if not checks:
            return True
        waiting = list(checks)
        checks.clear()
        puts = await self.store.put_messages([inner for inner, *_ in waiting])
        for (inner, queue_offset, identity, check_times, half), put in zip(waiting, puts, strict=True):
            if not put.status.is_stored:
                log.warning("transaction_check_copy_failed", status=put.status.name, identity=identity)
                return False
            self.state.half_progress = queue_offset + 1
            if half is None:
                self.state.latest_copy[identity] = put.queue_offset
                result.immunity_copies += 1
                continue
            copy = self._stored_copy(half, identity, check_times, inner, put)
            result.checked += 1
            if self.metrics is not None:
                self.metrics.on_transaction_check(half.properties.get(MessageConst.REAL_TOPIC, ""))
            for listener in self.listeners:
                try:
                    listener(copy)
                except Exception:
                    log.exception("transaction_check_listener_failed")
        return True

    def _stored_copy(
        self, half: MessageExt, identity: int, check_times: int, inner: MessageExtBrokerInner, put: PutMessageResult
    ) -> MessageExt:
        """Record the stored copy as the transaction's newest; the copy as a MessageExt with its offsets."""
        self.state.latest_copy[identity] = put.queue_offset
        properties = dict(half.properties)
        properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
        properties[PREPARED_QUEUE_OFFSET] = str(identity)
        return MessageExt(
            topic=TRANS_HALF_TOPIC,
            body=half.body,
            flag=half.flag,
            properties=properties,
            queue_id=half.queue_id,
            queue_offset=put.queue_offset,
            commit_log_offset=put.wrote_offset,
            store_size=0,
            sys_flag=inner.sys_flag,
            born_timestamp_ms=half.born_timestamp_ms,
            born_host=half.born_host,
            store_timestamp_ms=self._clock_ms(),
            store_host=half.store_host,
            reconsume_times=half.reconsume_times,
        )

    async def _discard(self, half: MessageExt, identity: int, result: CheckPassResult) -> bool:
        self.state.ending.add(identity)
        try:
            puts = await self.store.put_messages(
                [discarded_message(half), op_record(half.queue_offset, identity, DISCARDED)]
            )
        finally:
            self.state.ending.discard(identity)
        if not all(p.status.is_stored for p in puts):
            log.warning("transaction_discard_failed", identity=identity)
            return False
        log.warning(
            "transaction_check_max_reached",
            identity=identity,
            uniq_key=half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
            producer_group=half.properties.get(MessageConst.PRODUCER_GROUP, ""),
            topic=half.properties.get(MessageConst.REAL_TOPIC, ""),
        )
        state = self.state
        state.mark_ended(identity, DISCARDED, puts[1].queue_offset)
        topic = half.properties.get(MessageConst.REAL_TOPIC, "")
        state.on_ended(topic)
        if self.metrics is not None:
            self.metrics.on_transaction_check(topic, check_max=True)
        state.forget(identity)  # passed right now: this was its newest copy
        result.discarded += 1
        return True


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def offset_msg_id(half: MessageExt) -> str:
    """The offset msg id of a check copy (store host + CommitLog offset), as a producer's END_TRANSACTION decodes."""
    return create_offset_msg_id(half.store_host[0], half.store_host[1], half.commit_log_offset)
