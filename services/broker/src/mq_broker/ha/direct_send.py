"""DirectFrameSender: the master's HA frames of page-cache-hot CommitLog bytes without a copy through user space.

On a plain TCP connection whose transport holds nothing unsent, a frame goes straight to the socket: its 12-byte
header with write(2), its body with sendfile(2) from the CommitLog file (the page-cache pages the mapped file wrote
are handed to the socket; RocketMQ's HA writer does the same with FileChannel#transferTo). What the socket does not
take at once is returned to the caller, which queues it on the transport after it (so the byte order on the wire
is kept). Under TLS (the bytes must pass the cipher) or while the transport has bytes queued, :meth:`usable` is
False and the caller copies the frame as before. Only bytes in the page cache are sent this way: sendfile on cold
bytes would read the disk on the event loop.

The sender keeps one read-only descriptor, on the CommitLog file it last sent from (a file the clean service
deletes meanwhile stays readable through it until the next file is opened or :meth:`close`). Event loop only.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


class DirectFrameSender:
    """Direct writes to ``transport``'s socket (plain TCP only; see the module docstring)."""

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        plain = transport.get_extra_info("sslcontext") is None and sock is not None
        self._socket_fd = sock.fileno() if plain else -1
        self._file_path: Path | None = None
        self._file_fd = -1

    def usable(self) -> bool:
        """Plain TCP, open, with nothing queued on the transport (a direct write would overtake it otherwise)."""
        transport = self._transport
        return (
            self._socket_fd >= 0
            and isinstance(transport, asyncio.WriteTransport)
            and not transport.is_closing()
            and transport.get_write_buffer_size() == 0
        )

    def send(self, header: bytes, file_path: Path, position: int, size: int) -> tuple[int, int]:
        """Write ``header`` then ``size`` bytes of ``file_path`` from byte ``position``; returns (header bytes
        sent, body bytes sent): the body is sent only after the whole header, and either may fall short when the
        socket buffer fills. Raises OSError for a broken connection or an unreadable file."""
        header_sent = self._write(header)
        if header_sent < len(header):
            return header_sent, 0
        body_sent = 0
        fd = self._file(file_path)
        while body_sent < size:
            try:
                n = os.sendfile(self._socket_fd, fd, position + body_sent, size - body_sent)
            except BlockingIOError:
                break
            if n == 0:
                break
            body_sent += n
        return header_sent, body_sent

    def close(self) -> None:
        """Close the file descriptor (not the socket: the transport owns it)."""
        if self._file_fd >= 0:
            os.close(self._file_fd)
        self._file_fd, self._file_path = -1, None

    def _write(self, data: bytes) -> int:
        try:
            return os.write(self._socket_fd, data)
        except BlockingIOError:
            return 0

    def _file(self, file_path: Path) -> int:
        if file_path != self._file_path:
            self.close()
            self._file_fd = os.open(file_path, os.O_RDONLY | os.O_CLOEXEC)
            self._file_path = file_path
        return self._file_fd
