"""Service processes of a local cluster: spawn in their own process group, stop by PID, never by name.

A process is identified by its PID *and* its start time (field 22 of ``/proc/<pid>/stat``, clock ticks
since boot), so a PID reused by an unrelated process after the service died is never signalled.
Runs on the caller's thread; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

STOP_GRACE_S: Final = 10.0
KILL_WAIT_S: Final = 5.0
_POLL_S: Final = 0.05


class ProcessStartError(RuntimeError):
    """A service did not come up; the message names its log file."""


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None when no such (non-zombie) process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):  # zombie or dead: already exited
        return None
    return int(fields[19])


def pid_matches(pid: int, start_ticks: int) -> bool:
    """True when ``pid`` is alive and is the process that started at ``start_ticks``."""
    return process_start_ticks(pid) == start_ticks


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What the state file keeps about one service process."""

    name: str
    pid: int
    start_ticks: int
    port: int
    log_path: str

    def alive(self) -> bool:
        return pid_matches(self.pid, self.start_ticks)


class ManagedProcess:
    """One service process started by this Python process (``python -m <module>``, or ``argv`` when given:
    etcd).

    stdout and stderr go to ``log_path`` (appended, so a restart keeps the earlier lines).
    """

    def __init__(
        self,
        name: str,
        module: str,
        env: Mapping[str, str],
        port: int,
        log_path: Path,
        argv: Sequence[str] | None = None,
    ) -> None:
        self.name = name
        self.module = module
        self.argv = list(argv) if argv is not None else [sys.executable, "-m", module]
        self.env = dict(env)
        self.port = port
        self.log_path = log_path
        self._popen: subprocess.Popen[bytes] | None = None
        self._start_ticks = 0

    def start(self) -> None:
        """Spawn ``argv`` (default ``sys.executable -m <module>``) in a new session (own process group).
        Not idempotent."""
        assert self._popen is None or self._popen.poll() is not None, f"{self.name} is already running"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                close_fds=True,
            )
        ticks = process_start_ticks(self._popen.pid)
        self._start_ticks = ticks if ticks is not None else 0

    @property
    def pid(self) -> int:
        assert self._popen is not None, f"{self.name} was never started"
        return self._popen.pid

    def record(self) -> ProcessRecord:
        return ProcessRecord(self.name, self.pid, self._start_ticks, self.port, str(self.log_path))

    def exit_code(self) -> int | None:
        """None while running (or never started); the exit status once it exited (negative: signal)."""
        return None if self._popen is None else self._popen.poll()

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def send_signal(self, sig: int) -> None:
        """Signal the process by PID when it is still running."""
        if self.running():
            assert self._popen is not None
            self._popen.send_signal(sig)

    def wait_exit(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds for the exit; True when it exited."""
        if self._popen is None:
            return True
        try:
            self._popen.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL and wait up to KILL_WAIT_S. Returns the exit status."""
        if self._popen is None:
            return None
        if self.running():
            self.send_signal(signal.SIGTERM)
            if not self.wait_exit(grace_s):
                self.send_signal(signal.SIGKILL)
                self.wait_exit(KILL_WAIT_S)
        return self._popen.poll()

    def detach(self) -> None:
        """Let the process outlive this one (``mqlocal up``): forget the handle without waiting or warning."""
        if self._popen is not None:
            self._popen.returncode = 0  # Popen.__del__ then neither warns nor tracks it
            self._popen = None

    def log_tail(self, max_lines: int = 20) -> str:
        """The last ``max_lines`` lines of the log (for error messages)."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-max_lines:])


def stop_record(record: ProcessRecord, grace_s: float = STOP_GRACE_S) -> bool:
    """Stop a process this Python process did not spawn (``mqlocal down``): SIGTERM by PID, then SIGKILL.

    Only signals the PID while it is still the process recorded (same start time). Returns True when the
    process is gone at the end. Polls every 50 ms; waits at most ``grace_s + KILL_WAIT_S`` seconds.
    """
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        if not record.alive():
            return True
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and record.alive():
            time.sleep(_POLL_S)
    return not record.alive()


def descendants(pid: int, role: str) -> list[ProcessRecord]:
    """Every live descendant of ``pid`` (one scan of ``/proc/*/stat``), each a ProcessRecord named ``role`` with its
    start time, so :func:`stop_record` stops it by PID only while that PID is still the same process. Linux."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # exited during the scan
        parent_of[int(stat.parent.name)] = int(raw[raw.rfind(")") + 2 :].split()[1])
    found: list[ProcessRecord] = []
    parents = {pid}
    while parents:
        children = {child for child, parent in parent_of.items() if parent in parents}
        for child in children:
            ticks = process_start_ticks(child)
            if ticks is not None:
                found.append(ProcessRecord(role, child, ticks, 0, ""))
        parents = children
    return found
