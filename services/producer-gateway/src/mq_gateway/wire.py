"""The SendBatch hot path in C (``mq_gateway._wire``), with its Python types.

A serialized ``SendBatchRequest`` whose messages have the plain shape (one topic; body, tag, keys, flag; no sharding
key, no user property, no field number the C code does not know: :data:`MESSAGE_FIELDS`; no transaction id, or the
same one on every message: half messages of one transaction, whose id and producer group the scan answers, and which
may carry user properties when every message has the same ones, serialized alike) goes straight to one
RocketMQ MessageBatch body, and the stored batch's results straight to a serialized ``SendBatchResponse``: no
protobuf object, no Python object per message. Every other request takes the protobuf path of
:mod:`mq_gateway.grpc_api`, which gives the same bytes (tests/gateway/test_gateway_wire.py).

The extension is compiled when the gateway package is installed (setuptools ``ext-modules``; a C compiler is
needed). Without it, or with ``MQ_NO_EXTENSIONS=1`` (mq_common.extensions), :data:`AVAILABLE` is False and every
SendBatch takes the protobuf path. Event loop only.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from mq_common.extensions import extensions_disabled


class ScannedBatch(NamedTuple):
    """What :func:`scan_send_batch` found: the one ``topic``, ``message_count`` messages, the request's
    ``send_timeout_ms``, the smallest and largest body, all bodies' bytes, and the TAGS / KEYS properties text of
    all messages (``extra_properties_bytes``) and of the message with the longest (``max_extra_properties_bytes``);
    ``transaction_id``: every message's (its half messages' transaction), "" for plain messages; ``producer_group``:
    the request's when ``transaction_id`` is set, else ""; ``shared_properties``: the user properties every half
    message has, as a serialized mq.gateway.v1.Message holding only them (b"" for none), left out of the encoded
    messages (the caller sends them as the batch's properties)."""

    topic: str
    message_count: int
    send_timeout_ms: int
    min_body_bytes: int
    max_body_bytes: int
    body_bytes: int
    extra_properties_bytes: int
    max_extra_properties_bytes: int
    transaction_id: str = ""
    producer_group: str = ""
    shared_properties: bytes = b""


class _Native(Protocol):
    MESSAGE_FIELDS: frozenset[int]
    REQUEST_FIELDS: frozenset[int]

    def scan_send_batch(
        self, raw: bytes, /
    ) -> tuple[str, int, int, int, int, int, int, int, str, str, bytes] | None: ...

    def encode_send_batch(self, raw: bytes, ids: list[str], fixed_properties: bytes, total_bytes: int, /) -> bytes: ...

    def encode_batch_response(
        self,
        send_status: int,
        msg_ids: list[str],
        offset_msg_ids: list[str],
        broker_name: str,
        queue_id: int,
        first_queue_offset: int,
        /,
    ) -> bytes: ...


def _load() -> _Native | None:
    if extensions_disabled():
        return None
    try:
        from mq_gateway import _wire  # type: ignore[attr-defined]
    except ImportError:
        return None
    native: _Native = _wire
    return native


_NATIVE: Final = _load()
AVAILABLE: Final = _NATIVE is not None
# The field numbers of mq.gateway.v1.Message / SendBatchRequest the C path reads (empty without it): a request with
# any other field number takes the protobuf path. tests/gateway/test_gateway_wire.py compares them with the proto.
MESSAGE_FIELDS: Final[frozenset[int]] = _NATIVE.MESSAGE_FIELDS if _NATIVE is not None else frozenset()
REQUEST_FIELDS: Final[frozenset[int]] = _NATIVE.REQUEST_FIELDS if _NATIVE is not None else frozenset()
# batch_codec's item overhead: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (4 each), PROPERTIESLENGTH (2)
ITEM_OVERHEAD_BYTES: Final = 22


def scan_send_batch(raw: bytes) -> ScannedBatch | None:
    """Checks a serialized SendBatchRequest (one pass, no copy). None when it is not the plain shape (or not a
    valid message, or empty): parse it with protobuf then. Requires :data:`AVAILABLE`."""
    assert _NATIVE is not None
    found = _NATIVE.scan_send_batch(raw)
    return None if found is None else ScannedBatch(*found)


def encoded_size(scanned: ScannedBatch, fixed_properties: bytes, uniq_key_bytes: int) -> tuple[int, int]:
    """(MessageBatch body bytes, longest properties text) of ``scanned`` once every message gets
    ``fixed_properties`` and a UNIQ_KEY of ``uniq_key_bytes`` (ASCII) plus its closing \\x02."""
    own = len(fixed_properties) + uniq_key_bytes + 1
    total = scanned.message_count * (ITEM_OVERHEAD_BYTES + own) + scanned.body_bytes + scanned.extra_properties_bytes
    return total, scanned.max_extra_properties_bytes + own


def encode_send_batch(raw: bytes, ids: list[str], fixed_properties: bytes, total_bytes: int) -> bytes:
    """The MessageBatch body of the scanned request ``raw``: per message TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG,
    BODYLEN, body, PROPERTIESLENGTH and properties ``[TAGS\\x01tag\\x02][KEYS\\x01k1 k2\\x02]`` +
    ``fixed_properties`` + ``ids[i]`` + ``\\x02`` (big-endian). ``total_bytes`` from :func:`encoded_size`.
    Raises ValueError when ``raw``, ``ids`` and ``total_bytes`` do not belong together."""
    assert _NATIVE is not None
    return _NATIVE.encode_send_batch(raw, ids, fixed_properties, total_bytes)


def encode_batch_response(
    send_status: int,
    msg_ids: list[str],
    offset_msg_ids: list[str],
    broker_name: str,
    queue_id: int,
    first_queue_offset: int,
) -> bytes:
    """A serialized SendBatchResponse: one SendResult per message ``i`` (code 0, ``send_status`` (the proto enum
    value), ``msg_ids[i]``, ``offset_msg_ids[i]``, ``broker_name``, ``queue_id``, queue offset
    ``first_queue_offset + i``), as SerializeToString writes it. Raises ValueError when the id lists differ in
    length."""
    assert _NATIVE is not None
    return _NATIVE.encode_batch_response(
        send_status, msg_ids, offset_msg_ids, broker_name, queue_id, first_queue_offset
    )
