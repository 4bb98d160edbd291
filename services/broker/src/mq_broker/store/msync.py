"""msync (and madvise: populate, unmap) of a shared mapping with the GIL released.

``mmap.mmap.flush`` holds the GIL for the whole msync (a 256 MiB flush stalled the event loop 0.33 s), so the
store calls libc ``msync`` through ctypes, which releases it. Falls back to ``mmap.flush`` where libc or
MS_SYNC is not known. Called on the flusher thread (and at recovery); never on the event loop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from collections.abc import Callable
from typing import Final

_MS_SYNC: Final = {"linux": 4, "darwin": 0x10}.get(sys.platform, 0)


def _load_libc_call(name: str, wanted: bool) -> Callable[[int, int, int], int] | None:
    """libc ``name(void *addr, size_t length, int flags) -> int`` through ctypes (GIL released), or None."""
    if not wanted:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return None
    fn = getattr(libc, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    call: Callable[[int, int, int], int] = fn
    return call


_LIBC_MSYNC: Final = _load_libc_call("msync", bool(_MS_SYNC))
# madvise(MADV_POPULATE_WRITE) (Linux 5.14+): map pages writable ahead of the writes, without changing a byte.
_MADV_POPULATE_WRITE: Final = 23
_LIBC_MADVISE: Final = _load_libc_call("madvise", sys.platform == "linux")


def _madvise(address: int, start: int, length: int, advice: int) -> bool:
    """libc madvise on bytes [start, start + length) of the mapping at ``address`` (GIL released); False when
    madvise is unknown, the address is 0 (no libc mapping address) or the call fails."""
    if _LIBC_MADVISE is None or not address:
        return False
    return _LIBC_MADVISE(address + start, length, advice) == 0


def populate_write(address: int, start: int, length: int) -> bool:
    """Prefault bytes [start, start + length) of the mapping at ``address`` writable (MADV_POPULATE_WRITE) with
    the GIL released. ``start`` must be page aligned. False when the call is unknown or fails (older kernel:
    EINVAL; the writes then fault as usual). Blocking: a worker thread only.
    """
    return _madvise(address, start, length, _MADV_POPULATE_WRITE)


# madvise(MADV_DONTNEED) (Linux): unmap pages of a mapping.
_MADV_DONTNEED: Final = 4


def unmap_pages(address: int, start: int, length: int) -> bool:
    """madvise(MADV_DONTNEED) on bytes [start, start + length) of the shared file mapping at ``address``: the
    pages leave this process's page tables (the file's bytes are unchanged; a later access maps them again from
    the page cache or the disk), so ``posix_fadvise(POSIX_FADV_DONTNEED)`` can drop them from the page cache.
    ``start`` must be page aligned. False when the call is unknown or fails. GIL released; a worker thread.
    """
    return _madvise(address, start, length, _MADV_DONTNEED)


def mapping_address(mm: mmap.mmap) -> int:
    """Start address of ``mm`` for :func:`msync`; 0 when libc msync is not available (then mmap.flush is used)."""
    if _LIBC_MSYNC is None:
        return 0
    view = ctypes.c_char.from_buffer(mm)
    address = ctypes.addressof(view)
    del view  # release the buffer export so the mmap can be closed later
    return address


def msync(mm: mmap.mmap, address: int, start: int, length: int, path: object) -> None:
    """Write bytes [start, start + length) of ``mm`` to disk (MS_SYNC). ``start`` must be page aligned.

    Raises OSError (with errno) when msync fails; the caller must not retry it (the store turns read-only).
    """
    if _LIBC_MSYNC is not None and address:
        if _LIBC_MSYNC(address + start, length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"msync {path}: {os.strerror(err)}")
        return
    mm.flush(start, length)


def _load_mincore() -> Callable[[int, int, ctypes.Array[ctypes.c_ubyte]], int] | None:
    """libc ``mincore(void *addr, size_t length, unsigned char *vec)`` through ctypes, or None (not Linux)."""
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return None
    fn = libc.mincore
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    fn.restype = ctypes.c_int
    call: Callable[[int, int, ctypes.Array[ctypes.c_ubyte]], int] = fn
    return call


_LIBC_MINCORE: Final = _load_mincore()
MINCORE_MAX_PAGES: Final = 1024
"""At most this many pages are asked about in one call (4 MiB of 4 KiB pages: a message's worth)."""


# mincore's vector: bit 0 of each byte says the page is resident (the other bits are reserved).
_RESIDENT_BIT: Final = bytes(b & 1 for b in range(256))
_NOT_RESIDENT: Final = b"\x00"


def is_resident(address: int, start: int, length: int) -> bool | None:
    """Whether every page of bytes [start, start + length) of the mapping at ``address`` is in the page cache
    (mincore(2), a page-table lookup, no I/O: fine on the event loop); the first MINCORE_MAX_PAGES pages only.
    None when mincore is not available or fails (then the caller cannot tell)."""
    if _LIBC_MINCORE is None or not address or length <= 0:
        return None
    first = start - start % mmap.PAGESIZE
    pages = min(MINCORE_MAX_PAGES, (start + length - first + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    if _LIBC_MINCORE(address + first, pages * mmap.PAGESIZE, vec) != 0:
        return None
    return _NOT_RESIDENT not in bytes(vec).translate(_RESIDENT_BIT)
