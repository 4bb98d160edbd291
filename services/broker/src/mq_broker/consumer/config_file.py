"""Atomic persistence of the broker's JSON config files, with a ``.bak`` copy of the previous version.

Mirrors org.apache.rocketmq.common.ConfigManager (#load, #loadBak, #persist) and MixAll#string2File. A write
never leaves a half-written ``path``: the new text goes to ``path.tmp`` (fsynced), the current file is kept as
``path.bak`` (a hard link, so ``path`` exists at every instant), ``path.tmp`` is renamed over ``path`` and the
directory is fsynced. A reader takes ``path`` and falls back to ``path.bak`` when ``path`` is missing, empty or
not a JSON object; a ``path.tmp`` left by a crash is ignored (and replaced by the next write).

:func:`load_json` and :func:`persist_json` block (file I/O and fsync): call them at start/stop or through
``asyncio.to_thread``; :class:`BackgroundPersister` does the latter for a table changed on the event loop. Used by
the subscription group, consumer offset and topic tables.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from mq_common.logging import get_logger
from mq_common.protocol import DataVersion

from mq_broker.store.atomic_file import BAK_SUFFIX, sibling, write_atomically

log = get_logger("mq_broker.consumer.config_file")


def _read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file does not exist. Raises ValueError when it is empty, not
    UTF-8, not JSON or not an object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON document: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object of ``path``, else of ``path.bak``; None when neither exists. Blocking.

    Raises ValueError when no file holds a usable object (``path`` corrupt and ``path.bak`` missing or corrupt,
    or ``path`` missing and ``path.bak`` corrupt): the broker then refuses to start rather than lose state.
    """
    primary_error: ValueError | None = None
    try:
        data = _read_object(path)
    except ValueError as exc:
        log.error("config_file_corrupt_trying_bak", path=str(path), error=str(exc))
        data, primary_error = None, exc
    if data is not None:
        return data
    bak = sibling(path, BAK_SUFFIX)
    backup = _read_object(bak)  # ValueError when the backup is corrupt too
    if backup is None and primary_error is not None:
        raise ValueError(f"{primary_error}; and no {bak.name}") from primary_error
    if backup is not None:
        log.warning("config_file_loaded_from_bak", path=str(bak))
    return backup


def persist_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically, keeping the previous file as ``path.bak``
    (mq_broker.store.atomic_file). Blocking (fsync of the file and of its directory). Raises OSError (disk full,
    permissions); ``path`` is then unchanged."""
    write_atomically(path, json.dumps(data, indent=2, sort_keys=False).encode("utf-8"))


class BackgroundPersister:
    """Writes a config file off the event loop whenever its owner changed, in the order of the changes.

    ``snapshot`` (called on the event loop, so it sees a consistent table) gives the JSON object to write.
    :meth:`schedule` marks the file stale; one task at a time takes a fresh snapshot and writes it through
    ``asyncio.to_thread`` until nothing is stale, so any number of changes cost at most one pending write (the
    bound). Without a running loop (start-up, tests) :meth:`schedule` writes at once. A failed write is logged (the
    next change writes the whole table again, and the broker persists once more when it stops); nothing raises into
    the caller.
    """

    def __init__(self, path: Path, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.path = path
        self._snapshot = snapshot
        self._stale = False
        self._task: asyncio.Task[None] | None = None

    def schedule(self) -> None:
        """Persist soon (event loop) or now (no running loop; blocking)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            persist_json(self.path, self._snapshot())
            return
        self._stale = True
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._write_while_stale())

    async def wait_persisted(self) -> None:
        """Wait until the changes scheduled so far are written (or their write failed and was logged)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _write_while_stale(self) -> None:
        while self._stale:
            self._stale = False
            data = self._snapshot()
            try:
                await asyncio.to_thread(persist_json, self.path, data)
            except OSError as exc:
                log.error("config_file_persist_failed", path=str(self.path), error=str(exc))


class ConfigManager:
    """A table persisted as one JSON file with a ``dataVersion``: :meth:`load` / :meth:`persist` (blocking) over
    the subclass's :meth:`encode` / :meth:`decode`, and :meth:`persist_soon` / :meth:`wait_persisted` (event loop)
    for changes while serving. Mirrors org.apache.rocketmq.common.ConfigManager.

    ``table_name`` names the table in a load error's text.
    """

    table_name: ClassVar[str] = "config"

    def __init__(self, config_path: Path) -> None:
        self.config_path = config_path
        self.data_version = DataVersion()
        self._persister = BackgroundPersister(config_path, self.encode)

    def encode(self) -> dict[str, Any]:
        """The JSON object of the file (with ``"dataVersion"``). Event loop."""
        raise NotImplementedError

    def decode(self, data: Mapping[str, Any]) -> None:
        """Take the table of a loaded JSON object (its ``dataVersion`` is read already). Raises ValueError,
        TypeError, KeyError or AttributeError for a malformed one."""
        raise NotImplementedError

    def load(self) -> None:
        """Read the file (or its ``.bak``); nothing when neither exists. Blocking. Raises ValueError when neither
        file is usable or the table is malformed."""
        data = load_json(self.config_path)
        if data is None:
            return
        try:
            self.data_version = DataVersion.from_json(data.get("dataVersion"))
            self.decode(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{self.config_path}: malformed {self.table_name}: {exc}") from exc

    def persist(self) -> None:
        """Write the table atomically (:func:`persist_json`). Blocking; raises OSError."""
        persist_json(self.config_path, self.encode())

    def persist_soon(self) -> None:
        """Write the table in the background (:class:`BackgroundPersister`). Event loop."""
        self._persister.schedule()

    async def wait_persisted(self) -> None:
        """Wait for the background writes of the changes made so far."""
        await self._persister.wait_persisted()
