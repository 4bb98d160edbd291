"""A topic's configuration on one broker, and RocketMQ's permission bits on it (no protobuf here).

Mirrors org.apache.rocketmq.common.TopicConfig and org.apache.rocketmq.common.constant.PermName.

``perm`` is one meaning everywhere (broker, name server, clients, wire): the PermName bit set, taken as is.
PERM_READ 4, PERM_WRITE 2, PERM_INHERIT 1 (PERM_PRIORITY 8); RocketMQ's default 6 = read + write. 0 means
neither read nor write (RocketMQ's wipeWritePermOfBroker can leave it); it is never read as "unset".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mq_common.constants import PermName

DEFAULT_READ_QUEUE_NUMS: Final = 16
"""TopicConfig.defaultReadQueueNums."""
DEFAULT_WRITE_QUEUE_NUMS: Final = 16
"""TopicConfig.defaultWriteQueueNums."""
DEFAULT_TOPIC_PERM: Final = PermName.PERM_READ | PermName.PERM_WRITE
"""RocketMQ's default topic permission: 6 = read + write."""
MAX_PERM: Final = 0xF
"""Every PermName bit set (priority | read | write | inherit)."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Queues and permission of one topic on one broker. Mirrors org.apache.rocketmq.common.TopicConfig.

    ``perm``: PermName bits (see the module docstring; default 6 = read + write). ``attributes``: RocketMQ 5's
    topic attributes (``"+message.type": "FIFO"``, ...).
    """

    topic_name: str
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = DEFAULT_TOPIC_PERM
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        """TopicConfig#toString (quoted in RocketMQ's remarks)."""
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={PermName.to_string(self.perm)}, "
            f"topicFilterType=SINGLE_TAG, topicSysFlag={self.topic_sys_flag}, order={str(self.order).lower()}, "
            f"attributes={dict(self.attributes)}]"
        )

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON shape (TopicConfigSerializeWrapper's topicConfigTable entry)."""
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicConfig:
        """The inverse of :meth:`to_json`; missing fields take RocketMQ's defaults. Raises KeyError without
        ``topicName``, ValueError/TypeError for a field of the wrong type."""
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", DEFAULT_READ_QUEUE_NUMS)),
            write_queue_nums=int(data.get("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS)),
            perm=int(data.get("perm", DEFAULT_TOPIC_PERM)),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
            attributes={str(k): str(v) for k, v in dict(data.get("attributes") or {}).items()},
        )
