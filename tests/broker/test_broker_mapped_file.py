"""MappedFile and MappedFileQueue: preallocation, naming, append/read/flush, roll, load, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mq_broker.store.mapped_file import OS_PAGE_SIZE_BYTES, MappedFile, offset_to_file_name
from mq_broker.store.mapped_file_queue import MappedFileQueue


def test_file_is_preallocated_and_named_by_its_start_offset(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / offset_to_file_name(4096), 4096)
    try:
        assert mapped.file_path.name == "00000000000000004096"
        assert mapped.file_from_offset == 4096
        assert os.stat(mapped.file_path).st_size == 4096
        assert os.stat(mapped.file_path).st_blocks * 512 >= 4096  # really allocated, not sparse
    finally:
        mapped.close()


def test_append_read_and_flush_positions(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / offset_to_file_name(0), 4 * OS_PAGE_SIZE_BYTES)
    try:
        assert mapped.append(b"hello") == 0
        assert mapped.append(b"world") == 5
        assert mapped.read(0, 10) == b"helloworld"
        assert (mapped.wrote_position, mapped.flushed_position) == (10, 0)
        assert not mapped.is_able_to_flush(least_pages=1)  # less than one dirty page
        assert mapped.flush(least_pages=0) == 10
        assert mapped.flushed_position == 10
        assert mapped.flush() == 10  # nothing new
        mapped.append(b"x" * (2 * OS_PAGE_SIZE_BYTES))
        assert mapped.is_able_to_flush(least_pages=2)
        assert mapped.flush(least_pages=2) == mapped.wrote_position
    finally:
        mapped.close()
    # The bytes are in the file, read back through plain file I/O.
    assert (tmp_path / offset_to_file_name(0)).read_bytes()[:10] == b"helloworld"


def test_reopen_checks_the_size(tmp_path: Path) -> None:
    MappedFile(tmp_path / offset_to_file_name(0), 1024).close()
    with pytest.raises(OSError, match="expected 2048"):
        MappedFile(tmp_path / offset_to_file_name(0), 2048)


def test_queue_rolls_and_finds_files_by_offset(tmp_path: Path) -> None:
    mfq = MappedFileQueue(tmp_path / "q", 1024)
    first = mfq.get_last_mapped_file()
    first.append(b"a" * 1024)
    assert first.is_full
    second = mfq.get_last_mapped_file()
    assert second is not first
    assert second.file_path.name == offset_to_file_name(1024)
    second.append(b"b" * 10)
    assert mfq.max_offset() == 1034
    assert mfq.find_mapped_file_by_offset(0) is first
    assert mfq.find_mapped_file_by_offset(1023) is first
    assert mfq.find_mapped_file_by_offset(1024) is second
    assert mfq.find_mapped_file_by_offset(5000) is None
    assert mfq.flush() == 1034
    assert mfq.flushed_where == 1034
    mfq.close()


def test_queue_load_and_truncate_dirty_files(tmp_path: Path) -> None:
    mfq = MappedFileQueue(tmp_path / "q", 1024)
    for ch in b"abc":
        mfq.get_last_mapped_file().append(bytes([ch]) * 1024)
    mfq.close()

    loaded = MappedFileQueue(tmp_path / "q", 1024)
    loaded.load()
    assert [m.file_from_offset for m in loaded.mapped_files] == [0, 1024, 2048]
    assert loaded.max_offset() == 3072  # loaded files count as full until recovery says otherwise
    loaded.truncate_dirty_files(1500)
    assert [m.file_from_offset for m in loaded.mapped_files] == [0, 1024]
    assert loaded.max_offset() == 1500
    assert not (tmp_path / "q" / offset_to_file_name(2048)).exists()
    assert loaded.mapped_files[1].read(476, 10) == bytes(10)  # the tail was zeroed
    assert loaded.mapped_files[1].read(0, 4) == b"bbbb"
    loaded.close()


def test_load_refuses_a_gap(tmp_path: Path) -> None:
    MappedFile(tmp_path / offset_to_file_name(0), 1024).close()
    MappedFile(tmp_path / offset_to_file_name(4096), 1024).close()
    with pytest.raises(OSError, match="does not follow"):
        MappedFileQueue(tmp_path, 1024).load()


@pytest.mark.parametrize("zero_run_stop_bytes", [0, 3 * 1024 * 1024])
def test_zero_from_clears_the_torn_tail_and_stops_after_a_long_zero_run(
    tmp_path: Path, zero_run_stop_bytes: int
) -> None:
    size = 8 * 1024 * 1024
    mapped = MappedFile(tmp_path / offset_to_file_name(0), size)
    try:
        mapped.write_at(0, b"k" * 100)  # kept record bytes
        mapped.write_at(100, os.urandom(5000))  # torn tail right after the cut
        far = size - 10
        mapped.write_at(far, b"F" * 10)  # past a 6+ MiB zero run: only a full clear touches it
        mapped.zero_from(100, zero_run_stop_bytes)
        assert mapped.read(0, 100) == b"k" * 100
        assert mapped.read(100, 5000) == bytes(5000)
        assert mapped.read(far, 10) == (bytes(10) if zero_run_stop_bytes == 0 else b"F" * 10)
    finally:
        mapped.close()


def test_a_record_gets_its_size_and_magic_code_last(tmp_path: Path) -> None:
    """A broker killed while copying a CommitLog record must leave no magic code: recovery would otherwise accept a
    record whose body CRC holds but whose properties were never written (seen in the SIGKILL chaos rounds)."""
    mapped = MappedFile(tmp_path / offset_to_file_name(0), OS_PAGE_SIZE_BYTES)
    real = mapped._mm
    writes: list[tuple[int, int]] = []

    class Recording:
        def __setitem__(self, key: slice, value: bytes) -> None:
            writes.append((key.start, key.stop))
            real[key] = value

    mapped._mm = Recording()  # type: ignore[assignment]
    try:
        record = bytes(range(40))
        assert mapped.append_record(record) == 0
        assert writes[-1] == (0, 8)
        assert all(start >= 8 for start, _ in writes[:-1])
    finally:
        mapped._mm = real
    assert mapped.read(0, 40) == record
    assert mapped.wrote_position == 40
    mapped.close()


def test_a_mapped_file_holds_one_descriptor(tmp_path: Path) -> None:
    # Python's mmap keeps a dup of the descriptor it is given; a MappedFile closes its own, so a store of many
    # small files (a chaos run of 64 KiB files made ~9,000) stays at one descriptor per file.
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    files = [MappedFile(tmp_path / offset_to_file_name(i * 4096), 4096) for i in range(50)]
    try:
        assert open_descriptors() - before == 50
        files[0].append(b"x" * 10)
        assert files[0].flush() == 10
        assert files[0].drop_page_cache(4096) == 0  # nothing a whole page behind the flush point yet
    finally:
        for f in files:
            f.close()
    assert open_descriptors() == before
