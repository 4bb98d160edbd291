"""The store directory's guards: the ``lock`` file (one store per directory) and the ``abort`` marker.

Mirrors DefaultMessageStore#start's FileLock on ``lock`` and #createTempFile of ``abort`` (present while the
store runs: found at start it means the last stop was not clean). Blocking file calls: run them where the store
starts and stops (a worker thread or before serving).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class StoreLockedError(OSError):
    """Another process holds the directory's lock (a broker already runs on it)."""


def acquire_dir_lock(lock_path: Path) -> int:
    """Take an exclusive flock on ``lock_path`` (created when missing); returns its fd, for :func:`release_dir_lock`.
    Raises StoreLockedError when another process holds it, OSError when the file cannot be opened."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreLockedError(exc.errno, exc.strerror) from exc
    return fd


def release_dir_lock(fd: int) -> None:
    """Unlock and close a fd from :func:`acquire_dir_lock` (an unlock error is ignored: closing releases it)."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def create_abort_file(abort_path: Path) -> None:
    """Write ``abort`` (this process id) and fsync it and its directory, so a crash is seen at the next start.
    Raises OSError."""
    fd = os.open(abort_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    dir_fd = os.open(abort_path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
