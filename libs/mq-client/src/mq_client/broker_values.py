"""What the clients get from a broker's queries (no protobuf here).

Mirrors org.apache.rocketmq.client.QueryResult. The send and pull headers (SendMessageRequestHeader, PullResult,
...) are the broker's too: they live in mq_common.protocol. mq_client.broker_client builds these values from
mq.broker.v1. Frozen and slotted: safe to share between tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq_common.codec import MessageExt


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Messages found by key. Mirrors org.apache.rocketmq.client.QueryResult (plus the broker's index end)."""

    messages: tuple[MessageExt, ...]
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0
