"""The transaction every message of a MessageBatch is a half message of: this project's extension of RocketMQ.

RocketMQ's client and broker refuse a MessageBatch of transactional messages (one half message per send). Here a
batch of messages of ONE transaction (one producer group and one ``__transactionId__``; the Spark connector's task
attempts, through the gateway's SendBatch with Message.transaction_id) goes as one SEND_BATCH_MESSAGE per queue: the
request's sysflag says TRANSACTION_PREPARED_TYPE and its batch properties (appended by the broker to every message's)
carry TRAN_MSG, PGROUP and __transactionId__, so each message is stored as the half message a single send of it would
have stored (mq_broker.transaction.half_batch). Pure; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mq_common.codec import encode_properties
from mq_common.constants import MessageConst, MessageSysFlag

_SEPARATORS: Final = ("\x01", "\x02")


@dataclass(frozen=True, slots=True)
class BatchTransaction:
    """``producer_group`` (PGROUP of every half message) and ``transaction_id`` (its __transactionId__), both
    non-empty (see :meth:`refusal`)."""

    producer_group: str
    transaction_id: str

    @property
    def sys_flag(self) -> int:
        """The batch request's sysflag: MessageSysFlag.TRANSACTION_PREPARED_TYPE."""
        return MessageSysFlag.TRANSACTION_PREPARED_TYPE

    def properties(self) -> dict[str, str]:
        """The half-message properties of every message: TRAN_MSG = "true", PGROUP, __transactionId__."""
        return {
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: self.producer_group,
            MessageConst.TRANSACTION_ID: self.transaction_id,
        }

    def properties_text(self) -> str:
        """:meth:`properties` as RocketMQ's property text (``name\\x01value\\x02``...): the batch's properties."""
        return encode_properties(self.properties())

    def refusal(self) -> str | None:
        """Why these cannot be a batch's half-message properties (an empty group or id, or RocketMQ's separators
        \\x01 / \\x02 in one), or None."""
        if not self.producer_group or not self.transaction_id:
            return "a transaction (half) message needs a producer group and a transaction id"
        text = self.producer_group + self.transaction_id
        if _SEPARATORS[0] in text or _SEPARATORS[1] in text:
            return "the producer group or transaction id holds \\x01 or \\x02"
        return None
