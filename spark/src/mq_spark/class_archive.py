"""A class data sharing (CDS) archive for the local Spark driver JVM: its classes mapped from one file instead of
read, parsed and verified from Spark's jars by every new JVM.

A local session's JVM (``make run``, the tests, the benchmarks; never one started by ``spark-submit``, whose JVM
options belong to the submission) loads about 15,000 classes from ``pyspark/jars`` while it starts and plans its
first job. JDK 13+ can write the classes a JVM loaded into a dynamic archive when it exits
(``-XX:ArchiveClassesAtExit``) and map them in a later JVM (``-XX:SharedArchiveFile``). Measured on this project's
2-core machine (JDK 17, pyspark 4.3, a session then one write of 336,776 rows): JVM CPU of the session start 9.8-11.5
-> 4.7-6.5 s and of the first job 12.0-12.9 -> 9.2-9.3 s. The dump costs the JVM's exit about 15 s, once.

The archive lives in ``$XDG_CACHE_HOME/pyrocketmq/spark-cds/`` (else ``~/.cache/...``), about 150 MiB, named by a
key of the java binary and the pyspark install (path, version, the jars folder's mtime), so a new JDK or pyspark
gets a new archive; a stale or foreign one is refused by the JVM itself, which then starts without it (its CDS log
is off: no warning on stdout). A JVM writes to a file of its own (``<key>.<pid>.pending``), renamed into place only
after it exited with status 0 (:func:`finish`), so a killed dump never leaves a broken archive. ``MQ_SPARK_CDS=off``
turns all of it off. Pure file work; the caller's thread. Mirrors nothing in RocketMQ (a JVM feature Spark leaves to
its users).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyspark

ENV_SWITCH: Final = "MQ_SPARK_CDS"
"""``off`` (or ``0``, ``false``): no archive used or written."""
ARCHIVE_SUFFIX: Final = ".jsa"
PENDING_SUFFIX: Final = ".pending"
DUMP_EXIT_WAIT_S: Final = 180.0
"""How long stop_spark_session waits for a JVM that writes the archive at exit (about 15 s on a loaded 2-core
machine) before it kills it."""
_QUIET: Final = "-XX:+IgnoreUnrecognizedVMOptions -Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True, slots=True)
class ArchivePlan:
    """What a new driver JVM does: ``java_options`` (for ``spark.driver.extraJavaOptions``) map ``archive`` when
    ``pending`` is None, else write the classes to ``pending`` at exit, to become ``archive``."""

    java_options: str
    archive: Path
    pending: Path | None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pyrocketmq/spark-cds`` (``~/.cache/pyrocketmq/spark-cds`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pyrocketmq" / "spark-cds"


def _java_binary() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else ``java`` on PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_key() -> str | None:
    """16 hex digits naming the java binary and the pyspark install; None without a java binary."""
    java = _java_binary()
    if java is None:
        return None
    spark_home = Path(pyspark.__file__).resolve().parent
    jars = spark_home / "jars"
    jars_mtime = jars.stat().st_mtime_ns if jars.exists() else 0
    text = f"{java}|{java.stat().st_mtime_ns}|{spark_home}|{pyspark.__version__}|{jars_mtime}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan(create: bool, directory: Path | None = None) -> ArchivePlan | None:
    """The archive options of a new local driver JVM: map the archive when it exists; else, with ``create``, write
    it at exit; else None (also when switched off, without java, or when the folder cannot be made or its path has a
    space, which Spark's option parsing would split). Sweeps pending files of JVMs that are gone."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in {"off", "0", "false", "no"}:
        return None
    key = archive_key()
    folder = directory or cache_dir()
    if key is None or " " in str(folder):
        return None
    archive = folder / f"{key}{ARCHIVE_SUFFIX}"
    if archive.is_file():
        return ArchivePlan(f"{_QUIET} -XX:SharedArchiveFile={archive}", archive, None)
    if not create:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    _sweep(folder)
    pending = folder / f"{key}.{os.getpid()}{PENDING_SUFFIX}"
    with contextlib.suppress(FileNotFoundError):
        pending.unlink()
    return ArchivePlan(f"{_QUIET} -XX:ArchiveClassesAtExit={pending}", archive, pending)


def finish(archive_plan: ArchivePlan, jvm_status: int | None) -> bool:
    """After the JVM of ``archive_plan`` exited with ``jvm_status``: a dump it completed (status 0, a non-empty
    file) becomes the archive (an atomic rename); anything else is deleted. True when an archive was put in place."""
    pending = archive_plan.pending
    if pending is None:
        return False
    try:
        if jvm_status == 0 and pending.stat().st_size > 0:
            pending.replace(archive_plan.archive)
            return True
    except OSError:
        pass
    with contextlib.suppress(OSError):
        pending.unlink()
    return False


def _sweep(folder: Path) -> None:
    """Delete ``<key>.<pid>.pending`` files whose process is gone (a driver that exited without
    stop_spark_session)."""
    for path in folder.glob(f"*{PENDING_SUFFIX}"):
        pid_text = path.name.rsplit(".", 2)[-2] if path.name.count(".") >= 2 else ""
        if pid_text.isdigit() and Path(f"/proc/{pid_text}").exists():
            continue
        with contextlib.suppress(OSError):
            path.unlink()
