"""The message a producer sends. Mirrors org.apache.rocketmq.common.message.Message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from mq_client.producer.batch_transaction import BatchTransaction

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Message:
    """One message to send (immutable; the producer never changes it).

    - ``topic``: checked by :func:`mq_client.producer.validators.check_message` (TopicValidator rules).
    - ``body``: 1 .. max_message_size_bytes (4 MiB) bytes; None or empty is refused (MESSAGE_ILLEGAL, 13).
    - ``tags`` -> property TAGS; ``keys`` -> property KEYS joined with one space (MessageConst.KEY_SEPARATOR).
    - ``properties``: user properties; the producer adds UNIQ_KEY (unless present), WAIT and the above.
    - ``flag``: int32 stored with the message, untouched by RocketMQ.
    - ``sharding_key``: non-empty -> property __SHARDINGKEY, and the queue is chosen by the key's hash
      (same key, same queue), see :mod:`mq_client.producer.selectors`.
    - When it is delivered (at most one of these, 0 = not set; checked by :func:`mq_client.producer.delay.
      delay_properties` when the message is prepared): ``delay_time_level`` 1.. (Message#setDelayTimeLevel ->
      property DELAY: the broker's messageDelayLevel, "1s 5s 10s 30s 1m ..."); ``deliver_time_ms`` ms since the
      epoch (Message#setDeliverTimeMs -> TIMER_DELIVER_MS); ``delay_time_sec`` / ``delay_time_ms`` from now
      (Message#setDelayTimeSec / #setDelayTimeMs; the producer turns them into TIMER_DELIVER_MS when it prepares
      the message, so the send result's recall handle names the time the broker holds the message to). A timer
      message's SendResult carries its ``recall_handle`` (DefaultMQProducer.recall_message cancels it).
    """

    topic: str
    body: bytes | None
    tags: str = ""
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    sharding_key: str = ""
    delay_time_level: int = 0
    deliver_time_ms: int = 0
    delay_time_sec: int = 0
    delay_time_ms: int = 0

    def is_delayed(self) -> bool:
        """True when a delay level or a delivery time is set (such a message never goes in a MessageBatch)."""
        return bool(self.delay_time_level or self.deliver_time_ms or self.delay_time_sec or self.delay_time_ms)


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """Messages of ONE topic, kept by column (no object per message): RocketMQ's MessageBatch before it is encoded.

    Message ``i`` is ``bodies[i]`` with ``tags[i]``, ``keys[i]``, ``properties[i]``, ``flags[i]`` and
    ``sharding_keys[i]``; each of those columns is either empty (no tags / keys / properties / own sharding key,
    flag 0 for every message) or as long as ``bodies``. ``sharding_key`` is every message's key when the batch has
    one (it then goes to that key's queue); ``sharding_keys`` gives each message its own (the sender then cuts the
    batch into one MessageBatch per queue: a RocketMQ MessageBatch always goes to one queue). Raises ValueError when
    a column's length is neither 0 nor ``len(bodies)``, or when both ``sharding_key`` and ``sharding_keys`` are
    given. ``transaction``: every message is a half message of that transaction (this project's extension,
    mq_client.producer.batch_transaction), None for plain messages. Mirrors
    org.apache.rocketmq.common.message.MessageBatch.
    """

    topic: str
    bodies: Sequence[bytes]
    tags: Sequence[str] = ()
    keys: Sequence[Sequence[str]] = ()
    properties: Sequence[Mapping[str, str]] = ()
    flags: Sequence[int] = ()
    sharding_key: str = ""
    sharding_keys: Sequence[str] = ()
    transaction: BatchTransaction | None = None

    def __post_init__(self) -> None:
        count = len(self.bodies)
        for name in ("tags", "keys", "properties", "flags", "sharding_keys"):
            if len(getattr(self, name)) not in (0, count):
                raise ValueError(f"MessageBatch.{name} has {len(getattr(self, name))} entries for {count} bodies")
        if self.sharding_key and self.sharding_keys:
            raise ValueError("MessageBatch takes sharding_key (one for all) or sharding_keys (one each), not both")

    def __len__(self) -> int:
        return len(self.bodies)

    def message(self, i: int) -> Message:
        """Message ``i`` as a :class:`Message` (for hooks and for the message-by-message path; a half message's
        properties include its transaction's)."""
        properties = self.properties[i] if self.properties else {}
        if self.transaction is not None:
            properties = {**properties, **self.transaction.properties()}
        return Message(
            self.topic,
            self.bodies[i],
            self.tags[i] if self.tags else "",
            tuple(self.keys[i]) if self.keys else (),
            properties,
            self.flags[i] if self.flags else 0,
            self.sharding_keys[i] if self.sharding_keys else self.sharding_key,
        )

    def select(self, positions: Sequence[int]) -> MessageBatch:
        """The messages at ``positions`` (in that order) as a MessageBatch of the same topic."""

        def take(column: Sequence[_T]) -> list[_T]:
            return [column[i] for i in positions] if column else []

        return MessageBatch(
            self.topic,
            take(self.bodies),
            take(self.tags),
            take(self.keys),
            take(self.properties),
            take(self.flags),
            self.sharding_key,
            take(self.sharding_keys),
            self.transaction,
        )

    @classmethod
    def from_messages(cls, msgs: Sequence[Message]) -> MessageBatch:
        """The columns of ``msgs`` (at least one, all of the first one's topic, bodies not None); one
        ``sharding_key`` when they share it, else the ``sharding_keys`` column."""
        first = msgs[0]
        assert all(m.topic == first.topic for m in msgs)
        one_key = all(m.sharding_key == first.sharding_key for m in msgs)
        return cls(
            first.topic,
            [m.body for m in msgs if m.body is not None],
            [m.tags for m in msgs] if any(m.tags for m in msgs) else (),
            [m.keys for m in msgs] if any(m.keys for m in msgs) else (),
            [m.properties for m in msgs] if any(m.properties for m in msgs) else (),
            [m.flag for m in msgs] if any(m.flag for m in msgs) else (),
            first.sharding_key if one_key else "",
            () if one_key else [m.sharding_key for m in msgs],
        )
