"""PrefaultService: keeps the pages just past each write position mapped, on its own thread.

The first write to a page of a preallocated file is a page fault in which the kernel maps the page and converts
the file's unwritten extent; on the event loop that is most of a raw mmap append's cost (~1 us per KiB here,
far more when several files are written in turn). RocketMQ's AllocateMappedFileService warms a whole new file
ahead of use (warmMapedFileEnable); this service does the same a few MiB at a time: when a MappedFileQueue's
write position passes its watermark (:meth:`MappedFileQueue.after_write`, event loop), the queue asks for its
last file to be prefaulted up to ``prefault_ahead_bytes`` past the position, and this thread does it with
madvise(MADV_POPULATE_WRITE) through ctypes (GIL released, so the faults run on another core, bytes unchanged).
Where that call is unknown (not Linux 5.14+) the service does nothing and the writes fault as before.

Threads: :meth:`request` on the event loop; the work on the ``PrefaultService`` thread. A file being closed
waits for the chunk in progress (MappedFile.populate holds the file's close lock), so a closed mapping is never
touched.
"""

from __future__ import annotations

import threading
from typing import Final

from mq_common.logging import get_logger

from mq_broker.store.mapped_file import MappedFile

log = get_logger("mq_broker.store.prefault")

PREFAULT_CHUNK_BYTES: Final = 1024 * 1024
SHUTDOWN_JOIN_TIMEOUT_S: Final = 30.0


class PrefaultService:
    """One thread prefaulting the files it is asked for, in chunks of PREFAULT_CHUNK_BYTES."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[MappedFile, int]] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="PrefaultService", daemon=True)
        self.populated_bytes = 0  # benchmark/test instrumentation (this thread only writes it)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        """Stop after the chunk in progress; pending requests are dropped. Blocking (bounded)."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(SHUTDOWN_JOIN_TIMEOUT_S)

    def request(self, mapped: MappedFile, until_position: int) -> None:
        """Prefault ``mapped`` up to ``until_position`` (bytes into the file). Event loop; returns at once."""
        with self._cond:
            current = self._pending.get(id(mapped))
            if current is None or current[1] < until_position:
                self._pending[id(mapped)] = (mapped, until_position)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                work, self._pending = list(self._pending.values()), {}
            for mapped, until in work:
                self._populate(mapped, until)

    def _populate(self, mapped: MappedFile, until: int) -> None:
        until = min(until, mapped.file_size_bytes)
        while not self._stopped:
            before = mapped.populated_until
            target = min(until, before + PREFAULT_CHUNK_BYTES)
            if target <= before or not mapped.populate(target):
                return
            self.populated_bytes += mapped.populated_until - before
