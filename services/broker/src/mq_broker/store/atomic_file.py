"""Atomic replacement of a small file, keeping the previous version as ``<name>.bak``.

Mirrors org.apache.rocketmq.common.MixAll#string2File (temp file, backup, rename). A write never leaves a
half-written ``path``: the new bytes go to ``path.tmp`` (fsynced), the current file is kept as ``path.bak`` (a
hard link, so ``path`` exists at every instant), ``path.tmp`` is renamed over ``path`` and the directory is
fsynced. Readers take ``path`` and fall back to ``path.bak`` when ``path`` is missing or unusable; a ``path.tmp``
left by a crash is ignored (and replaced by the next write).

Blocking (file I/O, fsync): call at start/stop, from a worker thread or through ``asyncio.to_thread``. Used by
the broker's JSON config files (mq_broker.consumer.config_file) and the store's epoch file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

BAK_SUFFIX: Final = ".bak"
TMP_SUFFIX: Final = ".tmp"


def sibling(path: Path, suffix: str) -> Path:
    """``path`` with ``suffix`` appended to its name (``x.json`` -> ``x.json.bak``)."""
    return path.with_name(path.name + suffix)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data``, keeping the previous file as ``path.bak``. Blocking (fsync of the
    file and of its directory). Raises OSError (disk full, permissions); ``path`` is then unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling(path, TMP_SUFFIX)
    with tmp.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if path.exists():
        bak = sibling(path, BAK_SUFFIX)
        bak_tmp = sibling(bak, TMP_SUFFIX)
        bak_tmp.unlink(missing_ok=True)
        os.link(path, bak_tmp)
        os.replace(bak_tmp, bak)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory (makes a rename or unlink in it durable). Blocking; raises OSError."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
