"""END_TRANSACTION: commit or roll back a half message, once.

Mirrors org.apache.rocketmq.broker.processor.EndTransactionProcessor and
org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl#{commitMessage, rollbackMessage,
deletePrepareMessage}: the half message is found by its CommitLog offset and checked (producer group, queue offset,
RocketMQ's SYSTEM_ERROR remarks), a producer's answer after CHECK_IMMUNITY_TIME_IN_SECONDS is refused
(ILLEGAL_OPERATION, rejectCommitOrRollback); a commit stores the real message and the op record in one put (one
group commit), a rollback the op record only. Beyond RocketMQ (which would store a second real message): a
transaction already committed or rolled back, or being ended by a concurrent call, is refused with ILLEGAL_OPERATION
and a remark naming how it ended, and nothing is stored; a transaction is named by its first half message, so an
answer for any of its check copies ends them all (mq_broker.transaction.transaction_state, rebuilt from the CommitLog
and the check progress: a restarted broker and a promoted slave know it too). A transaction id and a topic, when
given, must be the half message's UNIQ_KEY and REAL_TOPIC.

This project's extension (EndTransactionRequestHeader.scope): scope TRANSACTION ends every open half message of
(producer group, ``__transactionId__``) in one call, found through mq_broker.transaction.transaction_index; scope
PRODUCER_GROUP rolls back every open one of a producer group. The records are stored in chunks of
:data:`WHOLE_CHUNK` half messages, each chunk one put: the real messages (built from the raw half records,
mq_broker.transaction.half_record) in runs of :data:`OP_RUN`, each followed by one op record listing the run's half
queue offsets (RocketMQ 5's merged op records, half_message.op_record_many); CommitLog records, so slaves replicate
them and a recovery reads them (half_message.op_record_ends). The last op record of each chunk is the transaction's
summary, so a restarted broker still knows how it ended (TransactionIndex.recall). Half messages of one transaction
with the same UNIQ_KEY (a send the producer core retried after a lost answer) are committed once: the others are
rolled back (their op record marked half_message.DUPLICATE_PROPERTY, so a repeated commit counts them). Event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import TRANS_HALF_TOPIC, MessageConst, MessageSysFlag
from mq_common.errors import MQBrokerError
from mq_common.logging import get_logger
from mq_common.protocol.transaction import EndTransactionRequestHeader, EndTransactionScope, whole_end_remark
from mq_common.response_code import ResponseCode

from mq_broker.store.api import MessageStore
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from mq_broker.transaction.half_message import (
    COMMIT,
    DISCARDED,
    DUPLICATES,
    ROLLBACK,
    HalfMessageError,
    committed_message,
    op_record,
    op_record_many,
    whole_end_summary,
)
from mq_broker.transaction.half_record import HalfRecord, committed_record, parse_half_record
from mq_broker.transaction.transaction_index import Finished, TransactionIndex
from mq_broker.transaction.transaction_state import TransactionState, identity_of

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics

log = get_logger("mq_broker.transaction")

_FIND_FAILED: Final = "Find prepared transaction message failed"
_UNKNOWN_END: Final = "committed, rolled back or discarded"
WHOLE_CHUNK: Final = 256
"""Half messages ended per store put by a whole-transaction end."""
OP_RUN: Final = 32
"""Real messages a whole-transaction commit stores before the op record that lists their half messages."""
_ENDED_WORDS: Final = {
    COMMIT: "committed",
    ROLLBACK: "rolled back",
    DISCARDED: "discarded after transactionCheckMax checks",
}


def immunity_time_ms(half: MessageExt, transaction_timeout_ms: int) -> int:
    """TransactionalMessageUtil#getImmunityTime: CHECK_IMMUNITY_TIME_IN_SECONDS in ms, at least the transaction
    timeout (also when the property is absent or not a number)."""
    return immunity_ms_of(half.properties, transaction_timeout_ms)


def immunity_ms_of(properties: Mapping[str, str], transaction_timeout_ms: int) -> int:
    """:func:`immunity_time_ms` of a half message's properties."""
    text = properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
    try:
        immunity_ms = int(text) * 1000
    except ValueError:
        immunity_ms = 0
    return max(immunity_ms, transaction_timeout_ms)


@dataclass(frozen=True, slots=True)
class WholeEndResult:
    """What a whole-transaction end did: half messages ``ended`` now, ``already_ended`` the same way before,
    ``duplicates`` rolled back because another half message of the transaction had their UNIQ_KEY."""

    ended: int
    already_ended: int
    duplicates: int = 0

    @property
    def remark(self) -> str:
        return whole_end_remark(self.ended, self.already_ended, self.duplicates)


class TransactionalMessageService:
    """Ends transactions on one broker's store. ``transaction_timeout_ms``: BrokerConfig.transactionTimeOut;
    ``clock_ms`` the wall clock (tests pass their own)."""

    def __init__(
        self,
        store: MessageStore,
        state: TransactionState,
        *,
        transaction_timeout_ms: int,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.state = state
        self.transaction_timeout_ms = transaction_timeout_ms
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.metrics: BrokerMetrics | None = None
        self.index = TransactionIndex(store, state)
        self._group_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        """Producer group -> the lock whole ends of it take and how many calls hold or wait for it (a retried end
        waits for the first, then finds it done)."""

    # --- END_TRANSACTION -----------------------------------------------------------------------------------------

    async def end_transaction(self, header: EndTransactionRequestHeader) -> str:
        """Commit or roll back the half message ``header`` names; returns the remark of the SUCCESS answer.

        Raises MQBrokerError: SLAVE_NOT_AVAILABLE 11 on a slave; INVALID_PARAMETER 29 for a ``commit_or_rollback``
        that is not NOT (0), COMMIT (8) or ROLLBACK (12); SYSTEM_ERROR 1 ("Find prepared transaction message
        failed", "The producer group wrong", "The transaction state table offset wrong", "The transaction id
        wrong", "The topic wrong") as checkPrepareMessage; ILLEGAL_OPERATION 604 for a transaction already ended or
        being ended, or a producer's (not a check's) answer after the half message's immunity time; the store's code
        when a put fails.
        An unknown state (NOT, 0) changes nothing and succeeds (the transaction stays open for the check-back).
        """
        if self.store.broker_role is BrokerRole.SLAVE:
            raise MQBrokerError("end transaction is not served by a slave", ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = header.commit_or_rollback
        if kind == MessageSysFlag.TRANSACTION_NOT_TYPE:
            return "transaction state unknown: the transaction stays open until it is checked back"
        if not (header.is_commit or header.is_rollback):
            raise MQBrokerError(
                f"commitOrRollback {kind} is none of TRANSACTION_NOT_TYPE 0, COMMIT 8, ROLLBACK 12",
                ResponseCode.INVALID_PARAMETER,
            )
        half = self._find_half(header)
        state = self.state
        state.ensure_loaded()
        state.catch_up_ops()
        identity = identity_of(half)
        uniq_key = half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        if not state.is_open(half):
            how = _ENDED_WORDS.get(state.ended.get(identity, ""), _UNKNOWN_END)
            raise MQBrokerError(
                f"the transaction {uniq_key} (half offset {identity}) was already {how}, nothing changed",
                ResponseCode.ILLEGAL_OPERATION,
            )
        if identity in state.ending:
            raise MQBrokerError(
                f"the transaction {uniq_key} (half offset {identity}) is being ended by another request, "
                "nothing changed",
                ResponseCode.ILLEGAL_OPERATION,
            )
        self._reject_late(header, half)
        end_type = COMMIT if header.is_commit else ROLLBACK
        state.ending.add(identity)
        try:
            batch = [op_record(half.queue_offset, identity, end_type)]
            if header.is_commit:
                try:
                    batch.insert(0, committed_message(half))
                except HalfMessageError as exc:
                    raise MQBrokerError(str(exc), ResponseCode.SYSTEM_ERROR) from None
            results = await self.store.put_messages(batch)
            if results[-1].status.is_stored:
                state.mark_ended(identity, end_type, results[-1].queue_offset)
            elif results[0].status.is_stored:  # the real message is stored, its op record is not
                state.mark_ended(identity, end_type, state.op_progress())
            if identity in state.ended:
                self._count_end(half, header.is_commit)
            _raise_unless_stored(results)
        finally:
            state.ending.discard(identity)
        return ""

    # --- whole transactions (this project's extension) ------------------------------------------------------------

    async def end_whole(self, header: EndTransactionRequestHeader) -> WholeEndResult:
        """End every open half message of ``header``'s (producer_group, transaction_id) (scope TRANSACTION), or roll
        back every open one of its producer group (scope PRODUCER_GROUP). Idempotent: half messages already ended
        the same way are counted in ``already_ended``; nothing open is SUCCESS with 0.

        Raises MQBrokerError: SLAVE_NOT_AVAILABLE 11 on a slave; INVALID_PARAMETER 29 for an empty producer group,
        an empty transaction id (TRANSACTION), a COMMIT of a whole group, or a type that is not COMMIT or ROLLBACK;
        ILLEGAL_OPERATION 604 when a COMMIT finds half messages of the transaction rolled back or discarded (or
        being ended by another request): nothing of that chunk on is stored; the store's code when a put fails.
        """
        if self.store.broker_role is BrokerRole.SLAVE:
            raise MQBrokerError("end transaction is not served by a slave", ResponseCode.SLAVE_NOT_AVAILABLE)
        group, txid = header.producer_group, header.transaction_id
        whole_group = header.scope == EndTransactionScope.PRODUCER_GROUP
        if not (header.is_commit or header.is_rollback):
            raise MQBrokerError(
                f"commitOrRollback {header.commit_or_rollback} is neither COMMIT 8 nor ROLLBACK 12 for a whole "
                "transaction",
                ResponseCode.INVALID_PARAMETER,
            )
        if not group or (not whole_group and not txid):
            raise MQBrokerError(
                "a whole-transaction end needs a producer group and (scope TRANSACTION) a transaction id",
                ResponseCode.INVALID_PARAMETER,
            )
        if whole_group and header.is_commit:
            raise MQBrokerError("a whole producer group can only be rolled back", ResponseCode.INVALID_PARAMETER)
        # Shielded: a caller that gives up (a deadline) does not cut the end short; its retry waits on the lock.
        return await asyncio.shield(self._end_whole_locked(header))

    async def _end_whole_locked(self, header: EndTransactionRequestHeader) -> WholeEndResult:
        group = header.producer_group
        lock, users = self._group_locks.get(group) or (asyncio.Lock(), 0)
        self._group_locks[group] = (lock, users + 1)
        try:
            async with lock:
                return await self._end_whole(header)
        finally:
            lock, users = self._group_locks[group]
            if users <= 1:
                del self._group_locks[group]
            else:
                self._group_locks[group] = (lock, users - 1)

    async def _end_whole(self, header: EndTransactionRequestHeader) -> WholeEndResult:
        group, txid = header.producer_group, header.transaction_id
        whole_group = header.scope == EndTransactionScope.PRODUCER_GROUP
        state = self.state
        state.ensure_loaded()
        state.catch_up_ops()
        self.index.catch_up()
        end_type = COMMIT if header.is_commit else ROLLBACK
        txids = self.index.transactions_of(group) if whole_group else [txid]
        total = WholeEndResult(0, 0)
        for one in txids:
            result = await self._end_one_whole(group, one, end_type)
            total = WholeEndResult(
                total.ended + result.ended,
                total.already_ended + result.already_ended,
                total.duplicates + result.duplicates,
            )
        log.info(
            "transaction_whole_ended",
            producer_group=group,
            transaction_id=txid or "*",
            end_type=end_type,
            ended=total.ended,
            already_ended=total.already_ended,
            duplicates=total.duplicates,
        )
        return total

    async def _end_one_whole(self, group: str, txid: str, end_type: str) -> WholeEndResult:
        state = self.state
        members = self.index.members(group, txid)
        if not members:
            finished = self.index.recall(group, txid)
            if finished is not None and finished.end_type != end_type and end_type == COMMIT:
                raise MQBrokerError(
                    f"the transaction {txid} of {group} was already {_ENDED_WORDS[finished.end_type]}, nothing changed",
                    ResponseCode.ILLEGAL_OPERATION,
                )
            same = finished.count if finished is not None and finished.end_type == end_type else 0
            return WholeEndResult(0, same)
        already = 0
        candidates: list[tuple[int, int]] = []  # (identity, CommitLog offset) of those not ended
        for identity, offset in sorted(members.items()):
            if self._ended_before(group, txid, identity, end_type):
                already += 1
            elif identity not in state.ended:
                candidates.append((identity, offset))
        ended, duplicates = 0, 0
        seen_keys: set[str] = set()
        for begin in range(0, len(candidates), WHOLE_CHUNK):  # read chunk by chunk: few records held at once
            chunk: list[tuple[int, HalfRecord]] = []
            for identity, offset in candidates[begin : begin + WHOLE_CHUNK]:
                if self._ended_before(group, txid, identity, end_type):  # by another request meanwhile
                    already += 1
                    continue
                half = self._lookup_half(offset)
                if half is not None and state.is_open_at(identity, half.queue_offset):
                    chunk.append((identity, half))
            if not chunk:
                continue
            summary = whole_end_summary(group, txid, end_type, already + ended + len(chunk))
            done, dups = await self._put_chunk(chunk, end_type, seen_keys, summary)
            ended += done
            duplicates += dups
        self.index.drop(group, txid, Finished(end_type, ended + already))
        return WholeEndResult(ended, already, duplicates)

    def _ended_before(self, group: str, txid: str, identity: int, end_type: str) -> bool:
        """Whether the half message ``identity`` of a whole end was ended ``end_type`` already (a duplicate an
        earlier commit rolled back counts as committed). Raises MQBrokerError ILLEGAL_OPERATION 604 when it is being
        ended by another request, or when a COMMIT finds it ended otherwise."""
        state = self.state
        how = state.ended.get(identity)
        if how is None:
            if identity in state.ending:
                raise MQBrokerError(
                    f"a half message (offset {identity}) of the transaction {txid} is being ended by another request",
                    ResponseCode.ILLEGAL_OPERATION,
                )
            return False
        if how == end_type or (end_type == COMMIT and identity in state.duplicates):
            return True
        if end_type == COMMIT:
            raise MQBrokerError(
                f"the transaction {txid} of {group} has a half message (offset {identity}) "
                f"{_ENDED_WORDS.get(how, _UNKNOWN_END)}: it cannot be committed, nothing changed",
                ResponseCode.ILLEGAL_OPERATION,
            )
        return False

    def _lookup_half(self, offset: int) -> HalfRecord | None:
        """The half message whose record starts at CommitLog offset ``offset`` (body CRC checked), read from the raw
        record; None when there is none, it is damaged or not on the half topic."""
        raw = self.store.select_one_message_by_offset(offset)
        if raw is None:
            return None
        try:
            half = parse_half_record(raw)
        except MessageDecodeError:
            return None
        return half if half.topic == TRANS_HALF_TOPIC else None

    async def _put_chunk(
        self, chunk: list[tuple[int, HalfRecord]], end_type: str, seen_keys: set[str], summary: dict[str, str]
    ) -> tuple[int, int]:
        """Store the records ending ``chunk`` in one put and return (ended, duplicates rolled back). A commit stores
        the real messages in runs of :data:`OP_RUN`, each run followed by one op record listing its half messages
        (half_message.op_record_many), so a put that fails part way (a CommitLog file that cannot be created)
        leaves at most a run's real messages without their op record; the duplicates a commit rolls back get one
        op record of their own; a rollback is one op record. The last op record carries ``summary``
        (half_message.whole_end_summary)."""
        state = self.state
        reals: list[tuple[int, HalfRecord, MessageExtBrokerInner]] = []
        others: list[tuple[int, HalfRecord]] = []  # a rollback's, or the duplicates a commit rolls back
        for identity, half in chunk:
            if end_type == COMMIT:
                key = half.uniq_key
                if not key or key not in seen_keys:
                    seen_keys.add(key)
                    try:
                        reals.append((identity, half, _committed(half)))
                    except HalfMessageError as exc:
                        raise MQBrokerError(str(exc), ResponseCode.SYSTEM_ERROR) from None
                    continue
            others.append((identity, half))
        batch: list[MessageExtBrokerInner] = []
        # per half message: identity, record, how it ends, index of its real message (-1: none), of its op record
        plan: list[tuple[int, HalfRecord, str, int, int]] = []
        for begin in range(0, len(reals), OP_RUN):
            run = reals[begin : begin + OP_RUN]
            last = begin + OP_RUN >= len(reals)
            first = len(batch)
            batch.extend(inner for _, _, inner in run)
            if last and others:  # the duplicates' op record goes before the summary
                plan.extend((identity, half, ROLLBACK, -1, first + len(run)) for identity, half in others)
                batch.append(op_record_many([(h.queue_offset, i) for i, h in others], ROLLBACK, DUPLICATES))
                others = []
            op_at = len(batch)
            plan.extend((identity, half, COMMIT, first + at, op_at) for at, (identity, half, _) in enumerate(run))
            batch.append(op_record_many([(h.queue_offset, i) for i, h, _ in run], COMMIT, summary if last else None))
        if others:  # a rollback, or a commit whose half messages were all duplicates
            op_at = len(batch)
            plan.extend((identity, half, ROLLBACK, -1, op_at) for identity, half in others)
            marks = summary if end_type == ROLLBACK else {**summary, **DUPLICATES}
            batch.append(op_record_many([(h.queue_offset, i) for i, h in others], ROLLBACK, marks))
        identities = [identity for identity, _ in chunk]
        state.ending.update(identities)
        try:
            results = await self.store.put_messages(batch)
            ended = duplicates = 0
            ended_by_topic: dict[tuple[str, bool], list[float]] = {}
            now_ms = self._clock_ms()
            for identity, half, one_type, real_at, op_at in plan:
                if results[op_at].status.is_stored:
                    state.mark_ended(identity, one_type, results[op_at].queue_offset)
                    if one_type != end_type:
                        state.duplicates.add(identity)
                elif real_at >= 0 and results[real_at].status.is_stored:
                    state.mark_ended(identity, one_type, state.op_progress())
                if identity in state.ended:
                    topic = half.real_topic
                    ended_by_topic.setdefault((topic, real_at >= 0), []).append(
                        (now_ms - half.born_timestamp_ms) / 1000.0
                    )
                    ended += 1
                    duplicates += one_type != end_type
            self._count_ends(ended_by_topic)
            _raise_unless_stored(results)
        finally:
            state.ending.difference_update(identities)
        return ended, duplicates

    def _count_end(self, half: MessageExt, committed: bool) -> None:
        topic = half.properties.get(MessageConst.REAL_TOPIC, "")
        self._count_ends({(topic, committed): [(self._clock_ms() - half.born_timestamp_ms) / 1000.0]})

    def _count_ends(self, ended: dict[tuple[str, bool], list[float]]) -> None:
        """The open counts and metrics of transactions ended: (real topic, committed) -> their latencies in s."""
        for (topic, committed), latencies_s in ended.items():
            self.state.on_ended(topic, len(latencies_s))
            if self.metrics is not None:
                self.metrics.on_transactions_end(topic, committed, latencies_s)

    def _find_half(self, header: EndTransactionRequestHeader) -> MessageExt:
        """The half message at ``header.commit_log_offset``, checked as checkPrepareMessage. Raises MQBrokerError."""
        half: MessageExt | None = None
        if header.commit_log_offset >= 0:
            try:
                half = self.store.lookup_message_by_offset(header.commit_log_offset)
            except (MessageDecodeError, ValueError, IndexError):
                half = None
        if half is None or half.topic != TRANS_HALF_TOPIC:
            raise MQBrokerError(
                f"{_FIND_FAILED}: no half message at commit log offset {header.commit_log_offset}",
                ResponseCode.SYSTEM_ERROR,
            )
        if half.properties.get(MessageConst.PRODUCER_GROUP, "") != header.producer_group:
            raise MQBrokerError(
                f"The producer group wrong: the half message belongs to another group, not {header.producer_group!r}",
                ResponseCode.SYSTEM_ERROR,
            )
        if half.queue_offset != header.tran_state_table_offset:
            raise MQBrokerError(
                f"The transaction state table offset wrong: {header.tran_state_table_offset}, "
                f"the half message is at {half.queue_offset}",
                ResponseCode.SYSTEM_ERROR,
            )
        if header.topic and header.topic != half.properties.get(MessageConst.REAL_TOPIC):
            raise MQBrokerError(
                f"The topic wrong: the half message is not of topic {header.topic!r}", ResponseCode.SYSTEM_ERROR
            )
        uniq_key = half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        if header.transaction_id and header.transaction_id != uniq_key:
            raise MQBrokerError(
                f"The transaction id wrong: {header.transaction_id!r} is not the half message's",
                ResponseCode.SYSTEM_ERROR,
            )
        return half

    def _reject_late(self, header: EndTransactionRequestHeader, half: MessageExt) -> None:
        """EndTransactionProcessor#rejectCommitOrRollback: ILLEGAL_OPERATION for a producer's answer after the half
        message's CHECK_IMMUNITY_TIME_IN_SECONDS (only when set)."""
        if header.from_transaction_check or MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS not in half.properties:
            return
        age_ms = self._clock_ms() - half.born_timestamp_ms
        limit_ms = immunity_time_ms(half, self.transaction_timeout_ms)
        if age_ms > limit_ms:
            raise MQBrokerError(
                f"the transaction ended {age_ms} ms after it began, after its check immunity time {limit_ms} ms: "
                "only an answer to a check-back may end it now",
                ResponseCode.ILLEGAL_OPERATION,
            )


def _committed(half: HalfRecord) -> MessageExtBrokerInner:
    """The real message of ``half`` (half_record.committed_record; a compressed body through committed_message,
    which stores it inflated). Raises HalfMessageError."""
    if half.sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        try:
            return committed_message(decode_message(half.raw))
        except MessageDecodeError as exc:
            raise HalfMessageError(f"half message at {half.commit_log_offset}: {exc}") from None
    return committed_record(half)


def _raise_unless_stored(results: list[PutMessageResult]) -> None:
    """MQBrokerError with sendFinalMessage's codes for the first record not stored."""
    for result in results:
        status = result.status
        if status.is_stored:
            continue
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            raise MQBrokerError(result.remark or "Service not available now.", ResponseCode.SERVICE_NOT_AVAILABLE)
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            raise MQBrokerError(result.remark or "The message is illegal", ResponseCode.MESSAGE_ILLEGAL)
        raise MQBrokerError(result.remark or "Create mapped file failed.", ResponseCode.SYSTEM_ERROR)
