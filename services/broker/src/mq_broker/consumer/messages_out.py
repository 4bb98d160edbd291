"""What the pull and POP processors tell the metrics about the messages they hand out.

Mirrors the messages-out part of org.apache.rocketmq.broker.metrics.BrokerMetricsManager (incMessagesOut /
incThroughputOut, called from the pull and pop result handlers). mq_broker.metrics.BrokerMetrics implements it.
"""

from __future__ import annotations

from typing import Protocol


class MessagesOutObserver(Protocol):
    """``on_messages_out`` runs on the event loop once per answer that carries messages: ``count`` messages of
    ``size_bytes`` in all, read by ``group`` from ``topic`` (``is_retry``: from the group's retry topic)."""

    def on_messages_out(self, topic: str, group: str, count: int, size_bytes: int, *, is_retry: bool) -> None: ...
