"""Replication transport measurement (issue 20, item 1; not a pytest module): CommitLog-sized byte pushes over
(a) a plain asyncio TCP stream of length-prefixed frames and (b) a long-lived grpc.aio stream of bytes messages,
both on loopback, both in this one process (sender and receiver share the loop, as a master's HAConnection and a
slave's HAClient each share their broker's loop). Reports MB/s and CPU seconds per GiB (process time over wall time
of the run, both ends counted) for a few frame sizes, prints a table and writes JSON (``--out``).

The choice written in docs/performance.md ("Replication transport") follows from these figures.
Run: ``uv run --frozen python tests/bench/bench_ha_transport.py [--mib 512] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

import grpc
from rich.console import Console
from rich.table import Table

FRAME_SIZES_BYTES: Final = (32 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
_HEADER: Final = struct.Struct(">qi")  # [phy_offset i64][size i32], as the HA frames
_METHOD: Final = "/bench.Ha/Push"
_GRPC_MAX_MESSAGE_BYTES: Final = 8 * 1024 * 1024
_DEFAULT_STREAM_LIMIT_BYTES: Final = 64 * 1024
_BIG_STREAM_LIMIT_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    transport: str
    frame_bytes: int
    total_bytes: int
    seconds: float
    mb_per_s: float
    cpu_s_per_gib: float


def _row(transport: str, frame: int, total: int, wall_s: float, cpu_s: float) -> Row:
    gib = total / (1024**3)
    return Row(transport, frame, total, wall_s, total / wall_s / 1e6, cpu_s / gib)


async def _tcp(frame: int, total: int, limit_bytes: int = _DEFAULT_STREAM_LIMIT_BYTES) -> Row:
    payload = bytes(frame)
    received = 0
    done = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        while received < total:
            _phy, size = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            await reader.readexactly(size)
            received += size
        done.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, limit=limit_bytes)
    port = server.sockets[0].getsockname()[1]
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wall, cpu = time.perf_counter(), time.process_time()
    await _send_frames(writer, payload, total)
    await done.wait()
    name = "asyncio TCP streams" + (" (limit 8 MiB)" if limit_bytes != _DEFAULT_STREAM_LIMIT_BYTES else "")
    row = _row(name, frame, total, time.perf_counter() - wall, time.process_time() - cpu)
    writer.close()
    server.close()
    await server.wait_closed()
    return row


async def _send_frames(writer: asyncio.StreamWriter, payload: bytes, total: int) -> None:
    sent = 0
    while sent < total:
        writer.writelines((_HEADER.pack(sent, len(payload)), payload))
        await writer.drain()
        sent += len(payload)


class _FrameReceiver(asyncio.BufferedProtocol):
    """Receives frames straight into one preallocated buffer (recv_into), as HAClient does."""

    def __init__(self, frame: int, total: int, done: asyncio.Future[int]) -> None:
        self.buffer = bytearray(_HEADER.size + frame)
        self.view = memoryview(self.buffer)
        self.filled = 0
        self.received = 0
        self.total = total
        self.done = done

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        if self.filled == len(self.buffer):
            _phy, size = _HEADER.unpack_from(self.buffer, 0)
            self.received += size
            self.filled = 0
            if self.received >= self.total and not self.done.done():
                self.done.set_result(self.received)


async def _tcp_buffered(frame: int, total: int) -> Row:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    server = await loop.create_server(lambda: _FrameReceiver(frame, total, done), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wall, cpu = time.perf_counter(), time.process_time()
    await _send_frames(writer, bytes(frame), total)
    await done
    row = _row("asyncio TCP BufferedProtocol", frame, total, time.perf_counter() - wall, time.process_time() - cpu)
    writer.close()
    server.close()
    await server.wait_closed()
    return row


async def _grpc(frame: int, total: int) -> Row:
    payload = bytes(frame)

    async def push(requests: AsyncIterator[bytes], _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        received = 0
        async for chunk in requests:
            received += len(chunk)
        return struct.pack(">q", received)

    options = [
        ("grpc.max_receive_message_length", _GRPC_MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", _GRPC_MAX_MESSAGE_BYTES),
    ]
    server = grpc.aio.server(options=options)
    handler = grpc.method_handlers_generic_handler("bench.Ha", {"Push": grpc.stream_unary_rpc_method_handler(push)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.stream_unary(_METHOD)

        async def frames() -> AsyncIterator[bytes]:
            sent = 0
            while sent < total:
                yield payload
                sent += frame

        wall, cpu = time.perf_counter(), time.process_time()
        answer = await call(frames())
        row = _row("grpc.aio stream", frame, total, time.perf_counter() - wall, time.process_time() - cpu)
        assert struct.unpack(">q", answer)[0] >= total
    await server.stop(0)
    return row


async def run(total_mib: int) -> list[Row]:
    total = total_mib * 1024 * 1024
    rows: list[Row] = []
    for frame in FRAME_SIZES_BYTES:
        rows.append(await _tcp(frame, total))
        rows.append(await _tcp(frame, total, _BIG_STREAM_LIMIT_BYTES))
        rows.append(await _tcp_buffered(frame, total))
        rows.append(await _grpc(frame, total))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=512, help="MiB pushed per cell")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = asyncio.run(run(args.mib))
    table = Table(title=f"Replication transport, {args.mib} MiB per cell, loopback")
    for column in ("transport", "frame", "MB/s", "CPU s/GiB"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.transport, f"{r.frame_bytes // 1024} KiB", f"{r.mb_per_s:,.0f}", f"{r.cpu_s_per_gib:.2f}")
    Console().print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
