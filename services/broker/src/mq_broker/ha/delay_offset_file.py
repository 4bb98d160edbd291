"""The delay-level offsets file ``<store root>/config/delayOffset.json`` and the timer checkpoint
``config/timerCheckpoint.json``, as the slave copies them from its master.

Mirrors StorePathConfigHelper#getDelayOffsetStorePath and the file ScheduleMessageService#encode writes
(``{"offsetTable": {"<delay level>": <queue offset>}, ...}``; mq_broker.schedule.schedule_message_service), and
SlaveSynchronize#syncTimerCheckPoint (mq_broker.timer.timer_message_store). Both are carried as opaque JSON objects:
a master serves what it holds (GET_ALL_DELAY_OFFSET) and a slave stores them atomically (temp + fsync + rename,
``.bak`` kept); a slave promoted later starts its schedule service and timer store from them. Blocking file I/O:
call through ``asyncio.to_thread``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from mq_broker.consumer.config_file import load_json, persist_json

DELAY_OFFSET_FILE_NAME: Final = "delayOffset.json"
MAX_DELAY_OFFSET_JSON_BYTES: Final = 1024 * 1024
"""Bound of the text a slave accepts (18 delay levels take well under 1 KiB)."""


def delay_offset_path(config_dir: Path) -> Path:
    return config_dir / DELAY_OFFSET_FILE_NAME


def read_delay_offset_json(config_dir: Path, name: str = DELAY_OFFSET_FILE_NAME) -> str:
    """The JSON text of ``config_dir/name`` ('' when there is none). Raises ValueError when neither it nor its .bak
    is usable."""
    data = load_json(config_dir / name)
    return "" if data is None else json.dumps(data, sort_keys=True)


def write_delay_offset_json(config_dir: Path, text: str, name: str = DELAY_OFFSET_FILE_NAME) -> bool:
    """Store the master's ``text`` (nothing when it is '' or equal to what is stored); returns whether it wrote.
    Raises ValueError for text that is too long or not a JSON object, OSError when the write fails."""
    if not text:
        return False
    if len(text) > MAX_DELAY_OFFSET_JSON_BYTES:
        raise ValueError(f"delay offsets of {len(text)} bytes, at most {MAX_DELAY_OFFSET_JSON_BYTES}")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("delay offsets are not a JSON object")
    path = config_dir / name
    if load_json(path) == data:
        return False
    persist_json(path, data)
    return True
