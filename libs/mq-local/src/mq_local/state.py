"""The data folder of a local cluster and its state file (PIDs, ports), so another process can stop it.

Layout of a data folder::

    <data>/.mq-local            marker: this folder belongs to mq_local (only such folders are ever deleted)
    <data>/cluster.json         state file (below), present while the cluster runs
    <data>/namesrv.log          stdout+stderr of the name server
    <data>/broker-a.log         ... of each broker group
    <data>/broker-a/store/      the broker's storePathRootDir
    <data>/gateway.log          ... of the gateway

cluster.json: ``{"version": 1, "namesrv_addr": "127.0.0.1:9876", "gateway_addr": ..., "brokers": {name: addr},
"processes": [{"name", "pid", "start_ticks", "port", "log_path"}], "started_at_ms": ...}``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from mq_local.processes import ProcessRecord

MARKER_FILE: Final = ".mq-local"
STATE_FILE: Final = "cluster.json"
STATE_VERSION: Final = 1
DEFAULT_DATA_DIR: Final = Path(".run") / "local"


class DataDirError(RuntimeError):
    """The data folder cannot be used (foreign content, or a cluster still runs from it)."""


def repo_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: cwd) holding ``uv.lock``; else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "uv.lock").is_file():
            return folder
    return here


def default_data_dir(name: str = "local") -> Path:
    """``<repo>/.run/<name>`` (``.run/local`` is the data folder of ``mqlocal up``)."""
    return repo_root() / ".run" / name


@dataclass(frozen=True, slots=True)
class ClusterState:
    """What ``cluster.json`` holds."""

    namesrv_addr: str
    gateway_addr: str
    brokers: dict[str, str]
    processes: tuple[ProcessRecord, ...]
    started_at_ms: int
    tls: bool = False
    auth: bool = False

    def to_json(self) -> str:
        data = {
            "version": STATE_VERSION,
            "namesrv_addr": self.namesrv_addr,
            "gateway_addr": self.gateway_addr,
            "brokers": self.brokers,
            "processes": [asdict(p) for p in self.processes],
            "started_at_ms": self.started_at_ms,
            "tls": self.tls,
            "auth": self.auth,
        }
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        """Parse cluster.json. Raises ValueError on another version or a malformed file."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported state file (want version {STATE_VERSION})")
        processes = tuple(ProcessRecord(**p) for p in data["processes"])
        return cls(
            str(data["namesrv_addr"]),
            str(data["gateway_addr"]),
            {str(k): str(v) for k, v in data["brokers"].items()},
            processes,
            int(data["started_at_ms"]),
            bool(data.get("tls", False)),
            bool(data.get("auth", False)),
        )

    def alive(self) -> list[ProcessRecord]:
        return [p for p in self.processes if p.alive()]


def read_state(data_dir: Path) -> ClusterState | None:
    """The state in ``data_dir`` or None when there is none. Raises ValueError when it is malformed."""
    path = data_dir / STATE_FILE
    if not path.is_file():
        return None
    return ClusterState.from_json(path.read_text(encoding="utf-8"))


def write_state(data_dir: Path, state: ClusterState) -> None:
    """Write cluster.json atomically (temp file + rename)."""
    tmp = data_dir / f".{STATE_FILE}.tmp"
    tmp.write_text(state.to_json(), encoding="utf-8")
    os.replace(tmp, data_dir / STATE_FILE)


def remove_state(data_dir: Path) -> None:
    (data_dir / STATE_FILE).unlink(missing_ok=True)


def prepare_data_dir(data_dir: Path, *, fresh: bool) -> None:
    """Create ``data_dir`` (with its marker); with ``fresh``, first delete the previous run's folder.

    A folder is only deleted when it carries the mq_local marker. Raises DataDirError when the folder
    holds other content, or when a state file lists processes that still run.
    """
    try:
        state = read_state(data_dir) if data_dir.is_dir() else None
    except ValueError as exc:
        raise DataDirError(f"{data_dir / STATE_FILE}: {exc}") from exc
    if state is not None and state.alive():
        pids = ", ".join(f"{p.name}={p.pid}" for p in state.alive())
        raise DataDirError(
            f"a cluster still runs from {data_dir} ({pids}); stop it first: mqlocal down --data-dir {data_dir}"
        )
    if fresh and data_dir.exists():
        if any(data_dir.iterdir()) and not (data_dir / MARKER_FILE).is_file():
            raise DataDirError(f"{data_dir} is not empty and not an mq_local data folder; refusing to delete it")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER_FILE).write_text("mq_local data folder; deleted by the next fresh start\n", encoding="utf-8")
