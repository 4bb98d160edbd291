"""mq_spark.class_archive without a JVM: which options a new local driver JVM gets (map the archive, write it at
exit, or nothing), the switch, and how a finished or failed dump is put in place or deleted. The JVM side (a dump
written at exit, then mapped by the next JVM) is in test_spark_session_stop.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mq_spark import class_archive


@pytest.fixture(autouse=True)
def _switch_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)


def test_without_an_archive_a_jvm_writes_one_at_exit_only_when_asked(tmp_path: Path) -> None:
    assert class_archive.plan(create=False, directory=tmp_path) is None
    writing = class_archive.plan(create=True, directory=tmp_path)
    assert writing is not None
    assert writing.pending is not None
    assert writing.pending.parent == tmp_path
    assert writing.pending.name.endswith(f".{os.getpid()}.pending")
    assert f"-XX:ArchiveClassesAtExit={writing.pending}" in writing.java_options
    assert writing.archive == tmp_path / f"{class_archive.archive_key()}.jsa"
    assert "-XX:+IgnoreUnrecognizedVMOptions" in writing.java_options  # a JDK without the flag still starts


def test_an_archive_in_place_is_mapped(tmp_path: Path) -> None:
    archive = tmp_path / f"{class_archive.archive_key()}.jsa"
    archive.write_bytes(b"jsa")
    for create in (False, True):
        mapping = class_archive.plan(create=create, directory=tmp_path)
        assert mapping is not None
        assert (mapping.pending, mapping.archive) == (None, archive)
        assert f"-XX:SharedArchiveFile={archive}" in mapping.java_options
        assert "ArchiveClassesAtExit" not in mapping.java_options


@pytest.mark.parametrize("value", ["off", "0", "false", "OFF"])
def test_the_switch_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    (tmp_path / f"{class_archive.archive_key()}.jsa").write_bytes(b"jsa")
    monkeypatch.setenv(class_archive.ENV_SWITCH, value)
    assert class_archive.plan(create=True, directory=tmp_path) is None


def test_a_folder_with_a_space_is_not_used(tmp_path: Path) -> None:
    assert class_archive.plan(create=True, directory=tmp_path / "with space") is None


def test_a_completed_dump_becomes_the_archive_and_a_failed_one_is_deleted(tmp_path: Path) -> None:
    writing = class_archive.plan(create=True, directory=tmp_path)
    assert writing is not None
    assert writing.pending is not None
    writing.pending.write_bytes(b"classes")
    assert class_archive.finish(writing, 0) is True
    assert writing.archive.read_bytes() == b"classes"
    assert not writing.pending.exists()
    writing.archive.unlink()
    for status, content in ((137, b"half"), (None, b"half"), (0, b"")):
        writing.pending.write_bytes(content)
        assert class_archive.finish(writing, status) is False
        assert not writing.pending.exists()
        assert not writing.archive.exists()
    assert class_archive.finish(writing, 0) is False  # the JVM wrote nothing


def test_pending_files_of_gone_processes_are_swept(tmp_path: Path) -> None:
    key = class_archive.archive_key()
    alive = tmp_path / f"{key}.1.pending"  # pid 1 runs
    gone = tmp_path / f"{key}.999999999.pending"
    alive.write_bytes(b"x")
    gone.write_bytes(b"x")
    assert class_archive.plan(create=True, directory=tmp_path) is not None
    assert alive.exists()
    assert not gone.exists()
