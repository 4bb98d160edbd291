"""Admin values shared by the broker and its clients (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.admin.TopicOffset. (PullStatus: mq_common.protocol.pull.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicQueueOffset:
    """Min/max logical offsets of one queue (max is one past the last message) and the store time of its last
    message (ms since the epoch, 0 when empty). Mirrors org.apache.rocketmq.remoting.protocol.admin.TopicOffset.
    """

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int
