"""The recall handle of a delay/timer message: build it on send, decode it on recall.

Mirrors org.apache.rocketmq.common.producer.RecallMessageHandle (HandleV1): the URL-safe Base64 (padded, as Java's
``Base64.getUrlEncoder()``) of ``"v1 <topic> <brokerName> <delivery time ms> <UNIQ_KEY>"``. The broker's
RecallMessage decodes it to find the timer; the gateway and the v1 producer build it into a send result. Pure
functions, safe from any thread or loop.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

RECALL_HANDLE_VERSION_1 = "v1"
_SEPARATOR = " "
INVALID_RECALL_HANDLE = "recall handle is invalid"
_URL_SAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]+={0,2}")


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """A decoded HandleV1: the topic, the broker name that holds the timer, its delivery time (ms since the epoch)
    and the message's UNIQ_KEY (its client message id)."""

    topic: str
    broker_name: str
    deliver_ms: int
    uniq_key: str


def build_recall_handle(topic: str, broker_name: str, deliver_ms: int, uniq_key: str) -> str:
    """The handle string (URL-safe Base64, ``=``-padded) of a timer message. No parameter check, as RocketMQ's
    ``HandleV1.buildHandle``; ``decode_recall_handle`` of the result gives the same four values back."""
    raw = _SEPARATOR.join((RECALL_HANDLE_VERSION_1, topic, broker_name, str(deliver_ms), uniq_key))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode_recall_handle(handle: str) -> RecallHandle:
    """The four values of a handle. Raises ValueError("recall handle is invalid") for an empty handle, bad Base64
    (padding optional, as Java's URL decoder), non-UTF-8 bytes, a version other than v1, fewer than five fields,
    an empty field or a delivery time that is not a non-negative integer (RocketMQ's DecoderException text; the
    broker answers it with ILLEGAL_OPERATION 604, the proxy with INVALID_RECEIPT_HANDLE)."""
    if not handle or _URL_SAFE_BASE64.fullmatch(handle) is None:
        raise ValueError(INVALID_RECALL_HANDLE)
    try:
        padded = handle.rstrip("=")
        padded += "=" * (-len(padded) % 4)
        raw = base64.b64decode(padded, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError):
        raise ValueError(INVALID_RECALL_HANDLE) from None
    items = raw.split(_SEPARATOR)
    if len(items) < 5 or items[0] != RECALL_HANDLE_VERSION_1 or not all(items[1:5]):
        raise ValueError(INVALID_RECALL_HANDLE)
    timestamp = items[3]
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 19:
        raise ValueError(INVALID_RECALL_HANDLE)
    return RecallHandle(topic=items[1], broker_name=items[2], deliver_ms=int(timestamp), uniq_key=items[4])
