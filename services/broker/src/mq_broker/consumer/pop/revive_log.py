"""Records of the revive log ``rmq_sys_REVIVE_LOG_<cluster>``: checkpoints of popped messages and acks of them.

Mirrors org.apache.rocketmq.store.pop.{PopCheckPoint, AckMsg, BatchAckMsg}, PopAckConstants and
PopMessageProcessor#buildCkMsg / #genCkUniqueId / #genAckUniqueId / #genBatchAckUniqueId. Each record is a message
of the revive topic on the revive queue its pop chose, with RocketMQ's tag and its JSON body (RocketMQ's short
field names, so its tools read them)::

    tag "ck"   {"so": startOffset, "pt": popTime ms, "it": invisibleTime ms, "bm": bitMap, "n": num,
                "q": queueId, "t": topic, "c": group, "ro": reviveOffset, "d": [queueOffset - startOffset, ...],
                "bn": brokerName}
    tag "ack"  {"ao": ackOffset, "so": startOffset, "c": group, "t": topic, "q": queueId, "pt": popTime,
                "bn": brokerName}
    tag "bAck" the same plus "aol": [ackOffset, ...] (and "ao": -1)

An ack names its checkpoint by (topic, group, queue id, start offset, pop time). A checkpoint is the in-flight
state of up to 32 messages of one queue; it is resolved once every one of them is acked: by a consumer, by a
change of invisible time, or by the revive service (which acks what it gave back with a ``bAck``, so a restart
does not revive it twice). RocketMQ delays its records with the timer wheel (deliverTimeMs); here the broker keeps
the checkpoints in memory and rebuilds them from the log at start (mq_broker.consumer.pop.recovery).

Pure values and functions; any thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mq_common.constants import SYSTEM_TOPIC_PREFIX, MessageConst, MixAll

from mq_broker.store.message import MessageExtBrokerInner

REVIVE_TOPIC_PREFIX: Final = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
"""PopAckConstants.REVIVE_TOPIC."""
REVIVE_GROUP: Final = MixAll.CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
"""PopAckConstants.REVIVE_GROUP: the revive log's consumer offsets are this group's."""
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
BATCH_ACK_TAG: Final = "bAck"
SPLIT: Final = "@"
MAX_CHECKPOINT_MESSAGES: Final = 32
"""A checkpoint holds at most this many messages (PopCheckPoint.num is a byte; pops read at most 32)."""

CkKey = tuple[str, str, int, int, int]
"""(topic, group, queue id, start offset, pop time ms): what names a checkpoint."""


def revive_topic(cluster_name: str) -> str:
    """PopAckConstants#buildClusterReviveTopic."""
    return REVIVE_TOPIC_PREFIX + cluster_name


class ReviveRecordError(ValueError):
    """A revive-log record whose tag or body is not a checkpoint or an ack."""


@dataclass(frozen=True, slots=True)
class CheckPoint:
    """Up to 32 popped messages of ``topic``/``queue_id`` for ``group``, invisible until
    ``pop_time_ms + invisible_time_ms``. The messages are at queue offsets ``start_offset + d`` for each ``d`` of
    ``queue_offset_diff`` (filtered pops skip offsets). Mirrors PopCheckPoint (the bit map is always 0 on the log)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time_ms: int
    invisible_time_ms: int
    queue_offset_diff: tuple[int, ...]
    broker_name: str
    re_put_times: int = 0

    @property
    def key(self) -> CkKey:
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time_ms)

    @property
    def revive_time_ms(self) -> int:
        """PopCheckPoint#getReviveTime: when un-acked messages become visible again."""
        return self.pop_time_ms + self.invisible_time_ms

    def to_json(self) -> dict[str, Any]:
        body = _name_to_json(self) | {
            "it": self.invisible_time_ms,
            "bm": 0,
            "n": len(self.queue_offset_diff),
            "ro": 0,
            "d": list(self.queue_offset_diff),
        }
        if self.re_put_times:
            body["rp"] = str(self.re_put_times)
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckPoint:
        """Raises KeyError/ValueError/TypeError for a malformed body. An old checkpoint without ``d`` covers
        ``n`` consecutive offsets (PopCheckPoint#ackOffsetByIndex)."""
        diff = data.get("d")
        offsets = tuple(int(d) for d in diff) if diff else tuple(range(int(data["n"])))
        if not 0 < len(offsets) <= MAX_CHECKPOINT_MESSAGES:
            raise ValueError(f"checkpoint of {len(offsets)} messages")
        return cls(
            **_name_from_json(data),
            invisible_time_ms=int(data["it"]),
            queue_offset_diff=offsets,
            re_put_times=int(data.get("rp") or 0),
        )


@dataclass(frozen=True, slots=True)
class AckMsg:
    """Acks of ``ack_offsets`` (queue offsets) of the checkpoint named by (topic, group, queue id, start offset,
    pop time). One offset: RocketMQ's AckMsg (tag ``ack``); more: BatchAckMsg (tag ``bAck``)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time_ms: int
    ack_offsets: tuple[int, ...]
    broker_name: str

    @property
    def key(self) -> CkKey:
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time_ms)

    @property
    def tag(self) -> str:
        return ACK_TAG if len(self.ack_offsets) == 1 else BATCH_ACK_TAG

    def to_json(self) -> dict[str, Any]:
        body = {"ao": self.ack_offsets[0] if len(self.ack_offsets) == 1 else -1} | _name_to_json(self)
        if len(self.ack_offsets) != 1:
            body["aol"] = list(self.ack_offsets)
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any], batch: bool) -> AckMsg:
        """Raises KeyError/ValueError/TypeError for a malformed body."""
        offsets = tuple(int(o) for o in data["aol"]) if batch else (int(data["ao"]),)
        return cls(**_name_from_json(data), ack_offsets=offsets)


def _name_to_json(record: CheckPoint | AckMsg) -> dict[str, Any]:
    """The JSON fields that name a checkpoint (shared by checkpoints and acks)."""
    return {
        "so": record.start_offset,
        "pt": record.pop_time_ms,
        "q": record.queue_id,
        "t": record.topic,
        "c": record.group,
        "bn": record.broker_name,
    }


def _name_from_json(data: Mapping[str, Any]) -> dict[str, Any]:
    """The dataclass fields of :func:`_name_to_json`'s. Raises KeyError/ValueError/TypeError."""
    return {
        "topic": str(data["t"]),
        "group": str(data["c"]),
        "queue_id": int(data["q"]),
        "start_offset": int(data["so"]),
        "pop_time_ms": int(data["pt"]),
        "broker_name": str(data.get("bn") or ""),
    }


def _uniq_id(parts: Sequence[object]) -> str:
    return SPLIT.join(str(p) for p in parts)


def checkpoint_uniq_id(ck: CheckPoint) -> str:
    """PopMessageProcessor#genCkUniqueId: topic@queueId@startOffset@group@popTime@brokerName@ck."""
    return _uniq_id((ck.topic, ck.queue_id, ck.start_offset, ck.group, ck.pop_time_ms, ck.broker_name, CK_TAG))


def ack_uniq_id(ack: AckMsg) -> str:
    """PopMessageProcessor#genAckUniqueId / #genBatchAckUniqueId (the offsets as a list)."""
    offsets: object = ack.ack_offsets[0] if len(ack.ack_offsets) == 1 else list(ack.ack_offsets)
    parts = (ack.topic, ack.queue_id, offsets, ack.group, ack.pop_time_ms, ack.broker_name, ack.tag)
    return _uniq_id(parts)


def build_record(
    record: CheckPoint | AckMsg, *, revive_topic_name: str, revive_queue_id: int, store_host: bytes, wait: bool = True
) -> MessageExtBrokerInner:
    """The revive-topic message of ``record`` on ``revive_queue_id`` (tag, JSON body, UNIQ_KEY). ``wait``: the
    put waits for the store's flush like any send; False adds ``WAIT=false`` (stored, not waited for: see
    ReviveLogWriter#append). Mirrors PopMessageProcessor#buildCkMsg and AckMessageProcessor's ack message."""
    if isinstance(record, CheckPoint):
        tag, uniq = CK_TAG, checkpoint_uniq_id(record)
    else:
        tag, uniq = record.tag, ack_uniq_id(record)
    body = json.dumps(record.to_json(), separators=(",", ":")).encode()
    properties = {MessageConst.TAGS: tag, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
    if not wait:
        properties[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return MessageExtBrokerInner.build(
        topic=revive_topic_name,
        queue_id=revive_queue_id,
        body=body,
        properties=properties,
        born_timestamp_ms=int(time.time() * 1000),
        born_host=store_host,
    )


def parse_record(tag: str | None, body: bytes) -> CheckPoint | AckMsg:
    """The checkpoint or ack a revive-log message carries. Raises ReviveRecordError for another tag or a
    malformed body."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise TypeError("body is not a JSON object")
        if tag == CK_TAG:
            return CheckPoint.from_json(data)
        if tag in (ACK_TAG, BATCH_ACK_TAG):
            return AckMsg.from_json(data, batch=tag == BATCH_ACK_TAG)
    except (KeyError, ValueError, TypeError) as exc:
        raise ReviveRecordError(f"malformed revive record ({tag}): {exc}") from exc
    raise ReviveRecordError(f"revive record with tag {tag!r}")
