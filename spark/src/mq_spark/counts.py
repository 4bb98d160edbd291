"""Publish counters of one Spark task, and their sum over a job (no protobuf, no Spark here)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class PublishCounts:
    """Mutable counters a task fills while it sends (one task thread).

    ``rows``: rows read; ``published``: messages with a SUCCESS result (SEND_OK or a stored-but-not-durable
    status, counted again in ``not_durable``); ``failed``: messages still failing after every retry;
    ``retried``: messages re-sent (a message re-sent twice counts twice); ``per_broker``: published per
    broker name; ``first_error``: the first final failure's ``CODE n (NAME) DESC remark``.
    """

    rows: int = 0
    published: int = 0
    failed: int = 0
    retried: int = 0
    not_durable: int = 0
    per_broker: Counter[str] = field(default_factory=Counter)
    first_error: str = ""

    def add(self, other: PublishCounts) -> None:
        self.rows += other.rows
        self.published += other.published
        self.failed += other.failed
        self.retried += other.retried
        self.not_durable += other.not_durable
        self.per_broker.update(other.per_broker)
        if not self.first_error:
            self.first_error = other.first_error

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "published": self.published,
            "failed": self.failed,
            "retried": self.retried,
            "not_durable": self.not_durable,
            "per_broker": dict(sorted(self.per_broker.items())),
            "first_error": self.first_error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PublishCounts:
        return cls(
            rows=int(data["rows"]),
            published=int(data["published"]),
            failed=int(data["failed"]),
            retried=int(data.get("retried", 0)),
            not_durable=int(data.get("not_durable", 0)),
            per_broker=Counter({str(k): int(v) for k, v in data.get("per_broker", {}).items()}),
            first_error=str(data.get("first_error", "")),
        )

    @classmethod
    def total(cls, parts: Iterable[PublishCounts]) -> PublishCounts:
        out = cls()
        for part in parts:
            out.add(part)
        return out
