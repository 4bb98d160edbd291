"""END_TRANSACTION: commit or roll back a half message, once.

Mirrors org.apache.rocketmq.broker.processor.EndTransactionProcessor and
org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl#{commitMessage, rollbackMessage,
deletePrepareMessage}: the half message is found by its CommitLog offset and checked (producer group, queue offset,
RocketMQ's SYSTEM_ERROR remarks), a producer's answer after CHECK_IMMUNITY_TIME_IN_SECONDS is refused
(ILLEGAL_OPERATION, rejectCommitOrRollback); a commit stores the real message and the op record in one put (one
group commit), a rollback the op record only. Beyond RocketMQ (which would store a second real message): a
transaction already committed or rolled back, or being ended by a concurrent call, is refused with ILLEGAL_OPERATION
and a remark naming how it ended, and nothing is stored. The ended offsets are learnt from the op queue itself
(incrementally, before each end), so a restarted broker and a promoted slave (whose op queue is the master's) know
them too. A transaction id and a topic, when given, must be the half message's UNIQ_KEY and REAL_TOPIC. Event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageConst, MessageSysFlag
from mq_common.errors import MQBrokerError
from mq_common.logging import get_logger
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_common.response_code import ResponseCode

from mq_broker.store.api import MessageStore
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus
from mq_broker.transaction.half_message import (
    COMMIT,
    END_TYPE_PROPERTY,
    HALF_QUEUE_ID,
    ROLLBACK,
    HalfMessageError,
    committed_message,
    op_record,
)

log = get_logger("mq_broker.transaction")

_OP_SCAN_BATCH: Final = 256
_FIND_FAILED: Final = "Find prepared transaction message failed"
_UNKNOWN_END: Final = "committed or rolled back"
_ENDED_WORDS: Final = {COMMIT: "committed", ROLLBACK: "rolled back"}


def immunity_time_ms(half: MessageExt, transaction_timeout_ms: int) -> int:
    """TransactionalMessageUtil#getImmunityTime: CHECK_IMMUNITY_TIME_IN_SECONDS in ms, at least the transaction
    timeout (also when the property is absent or not a number)."""
    text = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
    try:
        immunity_ms = int(text) * 1000
    except ValueError:
        immunity_ms = 0
    return max(immunity_ms, transaction_timeout_ms)


class TransactionalMessageService:
    """Ends transactions on one broker's store. ``transaction_timeout_ms``: BrokerConfig.transactionTimeOut;
    ``clock_ms`` the wall clock (tests pass their own)."""

    def __init__(
        self,
        store: MessageStore,
        *,
        transaction_timeout_ms: int,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.transaction_timeout_ms = transaction_timeout_ms
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.ended: dict[int, str] = {}
        """Half queue offset -> COMMIT, ROLLBACK (or "" when an op record does not say), from the op queue."""
        self._op_scanned_to = 0
        self._ending: set[int] = set()

    # --- what the op queue says ----------------------------------------------------------------------------------

    def catch_up_ops(self) -> None:
        """Read op records stored since the last call (RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0) into :attr:`ended`."""
        while True:
            result = self.store.get_messages(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, self._op_scanned_to, _OP_SCAN_BATCH)
            if self._op_scanned_to < result.min_offset:
                self._op_scanned_to = result.min_offset
            if not result.messages:
                if result.next_begin_offset > self._op_scanned_to:
                    self._op_scanned_to = result.next_begin_offset
                    continue
                return
            for record in result.messages:
                self._learn_op(record)
            self._op_scanned_to = result.next_begin_offset

    def _learn_op(self, record: bytes) -> None:
        try:
            op = decode_message(record, check_crc=False)
        except MessageDecodeError:
            log.warning("transaction_op_unreadable")
            return
        end_type = op.properties.get(END_TYPE_PROPERTY, "")
        for text in op.body.decode("utf-8", "replace").split(","):  # RocketMQ 5 may merge offsets with ','
            if text.strip().isdigit():
                self.ended.setdefault(int(text), end_type)

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
        offset = half.queue_offset
        self.catch_up_ops()
        if offset in self.ended:
            how = _ENDED_WORDS.get(self.ended[offset], _UNKNOWN_END)
            raise MQBrokerError(
                f"the transaction {half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, '')} "
                f"(half offset {offset}) was already {how}, nothing changed",
                ResponseCode.ILLEGAL_OPERATION,
            )
        if offset in self._ending:
            raise MQBrokerError(
                f"the transaction at half offset {offset} is being ended by another request, nothing changed",
                ResponseCode.ILLEGAL_OPERATION,
            )
        self._reject_late(header, half)
        end_type = COMMIT if header.is_commit else ROLLBACK
        self._ending.add(offset)
        try:
            batch = [op_record(offset, end_type)]
            if header.is_commit:
                try:
                    batch.insert(0, committed_message(half))
                except HalfMessageError as exc:
                    raise MQBrokerError(str(exc), ResponseCode.SYSTEM_ERROR) from None
            await self._put(batch, lambda: self.ended.__setitem__(offset, end_type))
        finally:
            self._ending.discard(offset)
        return ""

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

    async def _put(self, batch: list[MessageExtBrokerInner], on_first_stored: Callable[[], None]) -> None:
        """Store ``batch`` (one put, one group commit); ``on_first_stored`` runs when its first record (the real
        message of a commit, else the op) is stored, whatever befalls the rest (a commit is never stored twice).
        Raises MQBrokerError with sendFinalMessage's codes."""
        results = await self.store.put_messages(batch)
        if results and results[0].status.is_stored:
            on_first_stored()
        for result in results:
            status = result.status
            if status.is_stored:
                continue
            if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                raise MQBrokerError(result.remark or "Service not available now.", ResponseCode.SERVICE_NOT_AVAILABLE)
            if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
                raise MQBrokerError(result.remark or "The message is illegal", ResponseCode.MESSAGE_ILLEGAL)
            raise MQBrokerError(result.remark or "Create mapped file failed.", ResponseCode.SYSTEM_ERROR)
