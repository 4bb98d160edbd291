"""The message a producer sends. Mirrors org.apache.rocketmq.common.message.Message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
    """

    topic: str
    body: bytes | None
    tags: str = ""
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    sharding_key: str = ""
