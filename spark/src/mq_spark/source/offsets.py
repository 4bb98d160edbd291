"""Queue offsets of the ``rocketmq`` source, as options and as streaming checkpoint offsets.

One form, Kafka's per-partition JSON with RocketMQ's queue names: ``{"<topic>": {"<brokerName>:<queueId>":
<offset>}}``, e.g. ``{"flights": {"broker-a:0": 120, "broker-b:3": -2}}``. An offset is a queue offset
(ConsumeQueue index, the ``queue_offset`` column); ``-2`` means the queue's earliest offset and ``-1`` its latest
(one past its last message), as Kafka's JSON does. In ``startingOffsets`` a queue the JSON does not name starts at
its earliest offset; in ``endingOffsets`` it ends at its latest. The streaming checkpoint stores the same form,
always with concrete offsets. Pure functions (no I/O).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from mq_common.errors import InvalidParameterError
from mq_common.protocol import MessageQueue

EARLIEST: Final = -2
"""An offset in the JSON that means the queue's first stored offset (ConsumeFromWhere CONSUME_FROM_FIRST_OFFSET)."""
LATEST: Final = -1
"""An offset in the JSON that means one past the queue's last message (CONSUME_FROM_LAST_OFFSET)."""

QueueOffsets = dict[MessageQueue, int]


def queue_key(mq: MessageQueue) -> str:
    """``"<brokerName>:<queueId>"``: the queue's name inside the offsets JSON."""
    return f"{mq.broker_name}:{mq.queue_id}"


def parse_queue_key(topic: str, key: str) -> MessageQueue:
    """The queue named ``key`` (``"broker-a:3"``; the broker name may itself hold colons, the queue id is after the
    last one). Raises InvalidParameterError (29) for another form."""
    broker_name, sep, queue_id = key.rpartition(":")
    if not sep or not broker_name or not queue_id.isdigit():
        raise InvalidParameterError(f'queue {key!r} of topic {topic!r}: expected "<brokerName>:<queueId>"')
    return MessageQueue(topic, broker_name, int(queue_id))


def parse_offsets_json(text: str, topic: str, option: str) -> QueueOffsets:
    """``{"<topic>": {"<brokerName>:<queueId>": offset}}`` -> {MessageQueue: offset} (offset >= 0, or EARLIEST /
    LATEST). Raises InvalidParameterError (29), naming ``option``, for bad JSON, another topic, a bad queue name or
    offset."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"option {option}: not JSON ({exc.msg}): {text!r}") from None
    if not isinstance(data, dict) or any(not isinstance(v, dict) for v in data.values()):
        raise InvalidParameterError(f'option {option}: expected {{"{topic}": {{"<brokerName>:<queueId>": offset}}}}')
    others = sorted(set(data) - {topic})
    if others:
        raise InvalidParameterError(f"option {option}: topics {others} are not the source's topic {topic!r}")
    found: QueueOffsets = {}
    for key, offset in data.get(topic, {}).items():
        try:
            mq = parse_queue_key(topic, key)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"option {option}: {exc.remark}") from None
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
            raise InvalidParameterError(
                f"option {option}: offset of {key!r} must be an integer >= 0, -2 (earliest) or -1 (latest), "
                f"got {offset!r}"
            )
        found[mq] = offset
    return found


def to_json_dict(topic: str, offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """The JSON form (a dict Spark can keep in the checkpoint), queues sorted."""
    return {topic: {queue_key(mq): offsets[mq] for mq in sorted(offsets)}}


def from_json_dict(topic: str, data: Mapping[str, object]) -> QueueOffsets:
    """The inverse of :func:`to_json_dict` (a checkpointed offset). Raises InvalidParameterError (29) when ``data``
    holds another topic or a bad entry (a checkpoint of another query)."""
    return parse_offsets_json(json.dumps(data), topic, "checkpoint offset")
