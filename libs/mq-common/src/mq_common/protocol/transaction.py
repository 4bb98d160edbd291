"""The transaction headers: END_TRANSACTION's request (the v1 producer and the gateway send it, the broker serves it),
and QueryOpenTransactions' :class:`OpenTransaction` (the broker answers it, mqadmin reads it).

Mirrors org.apache.rocketmq.remoting.protocol.header.EndTransactionRequestHeader. Proto converters in
:mod:`mq_common.protocol.transaction_convert`. Pure values; any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from mq_common.constants import MessageSysFlag


class EndTransactionScope(IntEnum):
    """How many half messages one END_TRANSACTION ends (this project's extension of RocketMQ's protocol; the values of
    mq.broker.v1.EndTransactionScope). UNSPECIFIED and HALF_MESSAGE: the one half message the offsets name
    (RocketMQ); TRANSACTION: every open half message of (producer group, ``__transactionId__``) on the broker;
    PRODUCER_GROUP: every open half message of the producer group (ROLLBACK only)."""

    UNSPECIFIED = 0
    HALF_MESSAGE = 1
    TRANSACTION = 2
    PRODUCER_GROUP = 3


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader:
    """Commit or roll back one half message.

    ``tran_state_table_offset``: the half message's queue offset on RMQ_SYS_TRANS_HALF_TOPIC; ``commit_log_offset``:
    its CommitLog offset; ``commit_or_rollback``: a MessageSysFlag transaction type (NOT 0 = unknown, COMMIT 8,
    ROLLBACK 12); ``from_transaction_check``: the producer answers a check-back; ``msg_id`` and ``transaction_id``:
    the producer's UNIQ_KEY (``transaction_id`` may be empty); ``topic``: the real topic (may be empty); ``scope``:
    an :class:`EndTransactionScope` value (with TRANSACTION, ``transaction_id`` is the half messages'
    ``__transactionId__`` and the offsets are ignored).
    """

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str = ""
    transaction_id: str = ""
    topic: str = ""
    scope: int = EndTransactionScope.UNSPECIFIED

    @property
    def is_batch(self) -> bool:
        """Whether this ends a whole transaction or group (scope TRANSACTION or PRODUCER_GROUP)."""
        return self.scope in (EndTransactionScope.TRANSACTION, EndTransactionScope.PRODUCER_GROUP)

    @property
    def is_commit(self) -> bool:
        return self.commit_or_rollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE

    @property
    def is_rollback(self) -> bool:
        return self.commit_or_rollback == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


_WHOLE_END_REMARK = re.compile(r"^ended (\d+) half messages \((\d+) already ended, (\d+) duplicates\)")


def whole_end_remark(ended: int, already_ended: int, duplicates: int) -> str:
    """The remark of a whole-transaction END_TRANSACTION's SUCCESS answer (the broker writes it; clients that only
    keep the remark read the counts back with :func:`whole_end_counts`)."""
    return f"ended {ended} half messages ({already_ended} already ended, {duplicates} duplicates)"


def whole_end_counts(remark: str) -> tuple[int, int]:
    """(ended, already_ended) of a :func:`whole_end_remark`; (0, 0) for any other text."""
    match = _WHOLE_END_REMARK.match(remark)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """One open transaction as its newest half message copy shows it (proto mq.broker.v1.OpenTransaction):
    ``msg_id`` (UNIQ_KEY), ``producer_group`` (PGROUP), ``transaction_id`` (__transactionId__, else UNIQ_KEY),
    ``born_timestamp_ms`` (ms since the epoch), ``age_ms`` (now - born, when the broker answered), ``check_times``
    (TRANSACTION_CHECK_TIMES), ``keys`` (KEYS, space separated), ``tags``, ``prepared_queue_offset`` (its first half
    message's queue offset: the identity) and the newest copy's ``queue_offset`` / ``commit_log_offset`` on
    RMQ_SYS_TRANS_HALF_TOPIC. No RocketMQ counterpart (its tools list no open transactions)."""

    msg_id: str
    producer_group: str
    transaction_id: str
    born_timestamp_ms: int
    age_ms: int
    check_times: int
    keys: str
    tags: str
    prepared_queue_offset: int
    queue_offset: int
    commit_log_offset: int
