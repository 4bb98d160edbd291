"""Message ids: the broker's offset msgId and the producer's UNIQ_KEY.

Mirrors org.apache.rocketmq.common.message.MessageDecoder#createMessageId/decodeMessageId and
MessageClientIDSetter. Safe from any thread (the counter is an itertools.count, atomic under the GIL).
"""

from __future__ import annotations

import calendar
import itertools
import os
import random
import socket
import struct
import threading
import time

from mq_common.codec import bytes_to_host, host_to_bytes

_I64 = struct.Struct(">q")
_HEX4 = tuple(f"{i:04X}" for i in range(1 << 16))  # a UNIQ_KEY counter's 2 bytes as hex


def create_offset_msg_id(store_host: str, store_port: int, commit_log_offset: int) -> str:
    """32 (IPv4) or 56 (IPv6) upper-case hex chars: store ip, store port (4), commit log offset (8)."""
    return (host_to_bytes(store_host, store_port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(store host, store port, commit log offset) of an offset msgId. Raises ValueError when malformed."""
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"offset msg id must be 32 or 56 hex chars, got {len(msg_id)}")
    host, port = bytes_to_host(raw[:-8])
    return host, port, _I64.unpack(raw[-8:])[0]


def _local_ipv4() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return bytes((127, 0, 0, 1))


class UniqueIdGenerator:
    """UNIQ_KEY generator in MessageClientIDSetter's layout (32 hex chars for IPv4):

    ip (4) | pid (2) | random instance id (4, in place of the class loader hash) | ms since the start of
    the month (4) | counter (2).
    """

    def __init__(self, ip: bytes | None = None) -> None:
        fixed = (ip or _local_ipv4()) + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))
        self._prefix = fixed.hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self._month_start_ms = 0
        self._next_month_start_ms = 0
        self._set_start(int(time.time() * 1000))

    def _set_start(self, now_ms: int) -> None:
        t = time.gmtime(now_ms / 1000)
        start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0))
        nxt_year, nxt_mon = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        with self._lock:
            self._month_start_ms = start * 1000
            self._next_month_start_ms = calendar.timegm((nxt_year, nxt_mon, 1, 0, 0, 0)) * 1000

    def _time_hex(self) -> str:
        """The ids' prefix and the ms since the start of this month, as hex (24 chars for IPv4)."""
        now_ms = int(time.time() * 1000)
        if now_ms >= self._next_month_start_ms:
            self._set_start(now_ms)
        return f"{self._prefix}{max(0, now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}"

    def create(self) -> str:
        """A new id; unique within this process, and across processes by pid and instance id."""
        return self._time_hex() + _HEX4[next(self._counter) & 0xFFFF]

    def create_many(self, count: int) -> list[str]:
        """``count`` new ids with one clock read (consecutive counter values), unique as :meth:`create`'s: for a
        MessageBatch, whose messages get their UNIQ_KEYs together (MessageBatch.generateFromList)."""
        head = self._time_hex()
        return [head + _HEX4[c & 0xFFFF] for c in itertools.islice(self._counter, count)]


_DEFAULT = UniqueIdGenerator()


def create_uniq_id() -> str:
    """A UNIQ_KEY from the process-wide generator (MessageClientIDSetter#createUniqID)."""
    return _DEFAULT.create()


def create_uniq_ids(count: int) -> list[str]:
    """``count`` UNIQ_KEYs from the process-wide generator, one clock read for all (for a MessageBatch)."""
    return _DEFAULT.create_many(count)
