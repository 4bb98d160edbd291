"""The transaction every message of a MessageBatch is a half message of: this project's extension of RocketMQ.

RocketMQ's client and broker refuse a MessageBatch of transactional messages (one half message per send). Here a
batch of messages of ONE transaction (one producer group and one ``__transactionId__``; the Spark connector's task
attempts, through the gateway's SendBatch with Message.transaction_id) goes as one SEND_BATCH_MESSAGE per queue: the
request's sysflag says TRANSACTION_PREPARED_TYPE and its batch properties (appended by the broker to every message's)
carry TRAN_MSG, PGROUP and __transactionId__, so each message is stored as the half message a single send of it would
have stored (mq_broker.transaction.half_batch). User properties every message of the batch has (the Spark
connector's CHECK_IMMUNITY_TIME_IN_SECONDS) can travel the same way, once per batch (``shared_properties``), instead of
once per message. Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from mq_common.codec import encode_properties
from mq_common.constants import MessageConst, MessageSysFlag

_SEPARATORS: Final = ("\x01", "\x02")


@dataclass(frozen=True, slots=True)
class BatchTransaction:
    """``producer_group`` (PGROUP of every half message) and ``transaction_id`` (its __transactionId__), both
    non-empty (see :meth:`refusal`); ``shared_properties``: user properties of every message of the batch (checked
    by the caller with validators.check_user_properties), sent once as the batch's."""

    producer_group: str
    transaction_id: str
    shared_properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def sys_flag(self) -> int:
        """The batch request's sysflag: MessageSysFlag.TRANSACTION_PREPARED_TYPE."""
        return MessageSysFlag.TRANSACTION_PREPARED_TYPE

    def properties(self) -> dict[str, str]:
        """The properties of every message: the shared user properties, then TRAN_MSG = "true", PGROUP,
        __transactionId__."""
        return {
            **self.shared_properties,
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: self.producer_group,
            MessageConst.TRANSACTION_ID: self.transaction_id,
        }

    def properties_text(self) -> str:
        """:meth:`properties` as RocketMQ's property text (``name\\x01value\\x02``...): the batch's properties."""
        return encode_properties(self.properties())

    def refusal(self) -> str | None:
        """Why these cannot be a batch's half-message properties (an empty group or id, or RocketMQ's separators
        \\x01 / \\x02 in one or in a shared property), or None."""
        if not self.producer_group or not self.transaction_id:
            return "a transaction (half) message needs a producer group and a transaction id"
        shared = self.shared_properties
        text = "".join((self.producer_group, self.transaction_id, *shared, *shared.values()))
        if _SEPARATORS[0] in text or _SEPARATORS[1] in text:
            return "the producer group, transaction id or a shared property holds \\x01 or \\x02"
        return None
