"""The HA wire format (RocketMQ 4's DefaultHAConnection / DefaultHAClient, big-endian):

- slave -> master, a report: ``[max_offset i64]`` = the slave's CommitLog max offset (the bytes it holds). Sent
  at connect, after every data frame, and when idle every ``ha_send_heartbeat_interval_ms``.
- master -> slave, a frame: ``[phy_offset i64][size i32][size bytes]`` = CommitLog bytes starting at
  ``phy_offset``; ``size`` 0 is a heartbeat (sent when idle every ``ha_send_heartbeat_interval_ms``). A frame never
  crosses a CommitLog file boundary and carries at most ``ha_transfer_batch_size_bytes``.
"""

from __future__ import annotations

import struct
from typing import Final

REPORT: Final = struct.Struct(">q")
FRAME_HEADER: Final = struct.Struct(">qi")
# A frame larger than this is a protocol error (the master's batch setting is far below it).
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
# Reconnect backoff of HAClient: doubles from the first to the max delay.
RECONNECT_FIRST_DELAY_S: Final = 0.1
RECONNECT_MAX_DELAY_S: Final = 5.0
# How long a connect (TCP + TLS handshake) may take.
CONNECT_TIMEOUT_S: Final = 5.0


def split_ha_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port). Raises ValueError for a malformed address."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad HA address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)
