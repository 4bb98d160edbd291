"""The HA wire format (RocketMQ 4's DefaultHAConnection / DefaultHAClient, big-endian):

- slave -> master, a report: ``[max_offset i64]`` = the slave's CommitLog max offset (the bytes it holds). Sent
  at connect, after every data frame, and when idle every ``ha_send_heartbeat_interval_ms``.
- master -> slave, a frame: ``[phy_offset i64][size i32][size bytes]`` = CommitLog bytes starting at
  ``phy_offset``; ``size`` 0 is a heartbeat (sent when idle every ``ha_send_heartbeat_interval_ms``). A frame never
  crosses a CommitLog file boundary and carries at most ``ha_transfer_batch_size_bytes``.

Controller mode adds a handshake before the first report (RocketMQ 5's AutoSwitchHAClient handshake and
AutoSwitchHAConnection's epoch exchange; static roles never send it):

- slave -> master: ``[-2 i64][broker_id i64][max_offset i64][count i32]`` + ``count`` entries, each
  ``[epoch i32][start_offset i64][end_offset i64]`` (the slave's EpochEntries wire form, oldest first). A report is
  never negative, so the first 8 bytes tell a handshake (:data:`HANDSHAKE_MARKER`) from a static slave's report.
- master -> slave: ``[status i32][master_broker_id i64][count i32]`` + ``count`` entries (the master's history,
  the last one ending at its max offset). Status :data:`HANDSHAKE_ACCEPTED`, or :data:`HANDSHAKE_REFUSED` (the
  slave's last epoch is newer than the master's, or this broker is no master in controller mode) before closing.

Both sides then compute EpochFileCache#find_consistent_point; the slave truncates what it holds past that point
(reconnecting afterwards) and only then sends its first report, which the master checks against the point.
"""

from __future__ import annotations

import struct
from typing import Final

from mq_common.codec import split_host_port

REPORT: Final = struct.Struct(">q")
HANDSHAKE_MARKER: Final = -2
HANDSHAKE_HEADER: Final = struct.Struct(">qqi")  # after the marker: broker id, max offset, entry count
ANSWER_HEADER: Final = struct.Struct(">iqi")  # status, master broker id, entry count
EPOCH_ENTRY: Final = struct.Struct(">iqq")
HANDSHAKE_ACCEPTED: Final = 0
HANDSHAKE_REFUSED: Final = 1
# How long either side waits for the other's half of the handshake.
HANDSHAKE_TIMEOUT_S: Final = 10.0
FRAME_HEADER: Final = struct.Struct(">qi")
# A frame larger than this is a protocol error (the master's batch setting is far below it).
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
# Reconnect backoff of HAClient: doubles from the first to the max delay.
RECONNECT_FIRST_DELAY_S: Final = 0.1
RECONNECT_MAX_DELAY_S: Final = 5.0
# How long a connect (TCP + TLS handshake) may take.
CONNECT_TIMEOUT_S: Final = 5.0


def split_ha_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port): mq_common.codec.split_host_port plus a host and a port
    in 1..65535. Raises ValueError for a malformed address."""
    host, port = split_host_port(addr)
    if not host or not 0 < port < 65536:
        raise ValueError(f"bad HA address {addr!r}: expected host:port")
    return host, port


def encode_entries(entries: tuple[tuple[int, int, int], ...]) -> bytes:
    """``count`` EPOCH_ENTRY records (EpochEntries.entries: (epoch, start, end) tuples)."""
    return b"".join(EPOCH_ENTRY.pack(*entry) for entry in entries)


def decode_entries(raw: bytes | bytearray | memoryview, count: int) -> tuple[tuple[int, int, int], ...]:
    """The (epoch, start, end) tuples of ``count`` records in ``raw`` (exactly count * 20 bytes)."""
    return tuple(EPOCH_ENTRY.unpack_from(raw, i * EPOCH_ENTRY.size) for i in range(count))


def encode_handshake(broker_id: int, max_offset: int, entries: tuple[tuple[int, int, int], ...]) -> bytes:
    """The slave's handshake (marker included)."""
    head = REPORT.pack(HANDSHAKE_MARKER) + HANDSHAKE_HEADER.pack(broker_id, max_offset, len(entries))
    return head + encode_entries(entries)


def encode_answer(status: int, master_broker_id: int, entries: tuple[tuple[int, int, int], ...]) -> bytes:
    """The master's answer to a handshake."""
    return ANSWER_HEADER.pack(status, master_broker_id, len(entries)) + encode_entries(entries)
