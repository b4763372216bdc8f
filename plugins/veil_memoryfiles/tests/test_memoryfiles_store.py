"""memory_write's store path: seed 000's three statuses, exact bytes, atomicity, lock, UTF-8."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import filelock
import pytest
from veil_memoryfiles.errors import MemoryBusy, MemoryFileInvalid
from veil_memoryfiles.store import append_entry, overwrite

from veil.core.errors import BadRequest

NOW = datetime(2025, 3, 2, 12, 0, tzinfo=timezone.utc)
LATER = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)


def write(path: Path, content: object, now: datetime = NOW) -> str:
    return append_entry(path, content, max_lines=10_000, now=now).status  # type: ignore[arg-type]


@pytest.mark.parametrize("content", [None, "", "   ", " \n\t\r\n ", "\u3000\n"])
def test_skipped_empty_writes_nothing(tmp_path: Path, content: object) -> None:
    path = tmp_path / "MEMORY.md"
    assert write(path, content) == "skipped_empty"
    assert not path.exists()
    path.write_bytes(b"# header\n")
    assert write(path, content) == "skipped_empty"
    assert path.read_bytes() == b"# header\n"


def test_written_matches_the_seed_format_exactly(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "default" / "MEMORY.md"
    result = append_entry(path, "Project uses port 5051.", max_lines=500, now=NOW)
    assert (result.status, result.date, result.lines) == ("written", "2025-03-02", 2)
    assert path.read_bytes() == b"<!-- 2025-03-02 -->\nProject uses port 5051.\n"
    assert write(path, "  Second fact.\n\n", LATER) == "written"
    assert path.read_bytes() == (
        b"<!-- 2025-03-02 -->\nProject uses port 5051.\n\n<!-- 2025-03-03 -->\nSecond fact.\n"
    )


def test_date_is_the_utc_date_of_the_write(tmp_path: Path) -> None:
    from datetime import timedelta

    path = tmp_path / "MEMORY.md"
    # 2025-03-03 01:30 at UTC+05:00 is 2025-03-02 20:30 UTC
    local = datetime(2025, 3, 3, 1, 30, tzinfo=timezone(timedelta(hours=5)))
    assert append_entry(path, "x", max_lines=10, now=local).date == "2025-03-02"


def test_skipped_duplicate_only_for_exact_trimmed_reappend_of_the_last_entry(
    tmp_path: Path,
) -> None:
    path = tmp_path / "MEMORY.md"
    assert write(path, "Project uses port 5051.") == "written"
    before = path.read_bytes()
    assert write(path, "\n  Project uses port 5051.  \n", LATER) == "skipped_duplicate"
    assert path.read_bytes() == before
    # substrings and near-matches are new entries
    assert write(path, "Project uses port 5051") == "written"
    assert write(path, "Project uses port 5051. Also 5052.") == "written"
    assert write(path, "project uses port 5051. also 5052.") == "written"
    # only the LAST entry counts: A, B, A writes A again
    assert write(path, "A") == "written"
    assert write(path, "B") == "written"
    assert write(path, "A") == "written"
    assert write(path, "A") == "skipped_duplicate"
    from veil_memoryfiles.entries import parse

    contents = [e.content for e in parse(path.read_text("utf-8")).entries]
    assert contents == [
        "Project uses port 5051.",
        "Project uses port 5051",
        "Project uses port 5051. Also 5052.",
        "project uses port 5051. also 5052.",
        "A",
        "B",
        "A",
    ]


def test_duplicate_check_against_a_hand_written_crlf_entry(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"# Notes\r\n\r\n<!-- 2024-12-01 -->\r\nline 1\r\nline 2\r\n\r\n\r\n")
    assert write(path, "line 1\nline 2") == "skipped_duplicate"
    assert write(path, "line 1\r\nline 2\r\n") == "skipped_duplicate"
    assert write(path, "line 1\nline 2\nline 3") == "written"
    assert path.read_bytes().endswith(
        b"\r\n\r\n\r\n<!-- 2025-03-02 -->\r\nline 1\r\nline 2\r\nline 3\r\n"
    )


def test_header_only_file_has_no_last_entry(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"Project uses port 5051.\n")
    # the header is not an entry: identical text is still written as the first entry
    assert write(path, "Project uses port 5051.") == "written"


def test_non_string_content_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="content"):
        append_entry(tmp_path / "MEMORY.md", 42, max_lines=10)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="content"):
        append_entry(tmp_path / "MEMORY.md", "bad \ud800 surrogate", max_lines=10)
    assert not (tmp_path / "MEMORY.md").exists()


def test_invalid_utf8_file_is_reported_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"ok\n\xff\xfe broken\n")
    with pytest.raises(MemoryFileInvalid, match=r"MEMORY\.md: not valid UTF-8 \(byte 3\)"):
        write(path, "new")
    assert path.read_bytes() == b"ok\n\xff\xfe broken\n"


def test_failed_replace_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "MEMORY.md"
    assert write(path, "first") == "written"
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write(path, "second")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_permissions_of_an_existing_file_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"# h\n")
    path.chmod(0o640)
    write(path, "x")
    assert path.stat().st_mode & 0o777 == 0o640


def test_writer_waits_for_the_lock_and_gives_up_with_memory_busy(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    with filelock.FileLock(f"{path}.lock"):
        with pytest.raises(MemoryBusy, match="MEMORY.md.lock"):
            append_entry(path, "x", max_lines=10, lock_timeout=0.1)
        with pytest.raises(MemoryBusy):
            overwrite(path, b"y", lock_timeout=0.1)
    assert not path.exists()
    assert write(path, "x") == "written"


def test_overwrite_is_literal_and_checks_utf8(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    data = b"<!-- 2025-01-01 -->\nA\n<!-- 2025-01-01 -->\nA\r\n"
    assert overwrite(path, data) == data.decode()
    assert path.read_bytes() == data
    with pytest.raises(BadRequest, match=r"body: not valid UTF-8 \(byte 1\)"):
        overwrite(path, b"a\xc3(")
    assert path.read_bytes() == data


def test_a_new_file_gets_the_usual_mode_not_mkstemps_0600(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    path = tmp_path / "MEMORY.md"
    write(path, "x")
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
