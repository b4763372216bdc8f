"""maxLines (seed 000): oldest whole entries move to archive-YYYY-MM.md; line counts by hand."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from veil_memoryfiles.entries import parse
from veil_memoryfiles.service import MemoryService
from veil_memoryfiles.store import append_entry

NOV = datetime(2026, 11, 15, 12, 0, tzinfo=timezone.utc)


def test_oldest_entry_moves_when_the_cap_is_crossed(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"# Mem\n")
    # "# Mem\n" + "\n" separator = 2 lines; each entry: date line + content line, and 1 blank
    # line once another entry follows: 2+2=4, 4+3=7, 7+3=10 lines.
    lines = [append_entry(path, f"e{i}", max_lines=10, now=NOV).lines for i in (1, 2, 3)]
    assert lines == [4, 7, 10]
    assert not (tmp_path / "archive-2026-11.md").exists()  # 10 is not past a cap of 10
    r = append_entry(path, "e4", max_lines=10, now=NOV)  # 13 lines: e1 (3 lines) moves -> 10
    assert (r.status, r.archived, r.lines, r.over_cap) == ("written", 1, 10, False)
    assert r.archive_path == tmp_path / "archive-2026-11.md"
    assert r.archive_path.read_bytes() == b"<!-- 2026-11-15 -->\ne1\n\n"
    assert path.read_bytes() == (
        b"# Mem\n\n<!-- 2026-11-15 -->\ne2\n\n<!-- 2026-11-15 -->\ne3\n\n<!-- 2026-11-15 -->\ne4\n"
    )


def test_archive_month_is_the_utc_month_of_the_write(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    for i in (1, 2, 3):
        append_entry(path, f"e{i}", max_lines=8, now=NOV)  # 2, 5, 8 lines
    # 2026-12-01 00:30 at UTC+02:00 is still 2026-11-30 in UTC
    local = datetime(2026, 12, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))
    r = append_entry(path, "e4", max_lines=8, now=local)
    assert r.archive_path is not None and r.archive_path.name == "archive-2026-11.md"
    assert path.read_text("utf-8").endswith("<!-- 2026-11-30 -->\ne4\n")
    r = append_entry(path, "e5", max_lines=8, now=datetime(2026, 12, 1, 0, 30, tzinfo=timezone.utc))
    assert r.archive_path is not None and r.archive_path.name == "archive-2026-12.md"
    assert (tmp_path / "archive-2026-11.md").read_bytes() == b"<!-- 2026-11-15 -->\ne1\n\n"
    assert (tmp_path / "archive-2026-12.md").read_bytes() == b"<!-- 2026-11-15 -->\ne2\n\n"


def test_multi_line_entries_move_whole(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    a = "A line 1\nA line 2\n\nA line 4"
    assert append_entry(path, a, max_lines=12, now=NOV).lines == 5
    assert append_entry(path, "B", max_lines=12, now=NOV).lines == 8  # 5 + blank + 2
    assert append_entry(path, "C", max_lines=12, now=NOV).lines == 11
    r = append_entry(path, "D1\nD2", max_lines=12, now=NOV)  # 11 + 1 + 3 = 15; A is 6 lines
    assert (r.archived, r.lines) == (1, 9)
    assert [e.content for e in parse(path.read_text("utf-8")).entries] == ["B", "C", "D1\nD2"]
    archived = parse(r.archive_path.read_text("utf-8")).entries  # type: ignore[union-attr]
    assert [e.content for e in archived] == [a]


def test_an_entry_longer_than_the_cap_is_kept_whole_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "MEMORY.md"
    append_entry(path, "x", max_lines=3, now=NOV)
    big = "\n".join(f"line {i}" for i in range(10))
    with caplog.at_level(logging.WARNING):
        r = append_entry(path, big, max_lines=3, now=NOV)  # 2 + 1 + 11 = 14; x (3) moves
    assert (r.status, r.archived, r.lines, r.over_cap) == ("written", 1, 11, True)
    assert parse(path.read_text("utf-8")).entries[0].content == big
    assert "over maxLines=3" in caplog.text and "newest entry (11 lines)" in caplog.text


def test_a_long_header_is_never_archived(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "MEMORY.md"
    header = b"# 1\n2\n3\n4\n5\n"
    path.write_bytes(header)
    with caplog.at_level(logging.WARNING):
        r = append_entry(path, "x", max_lines=3, now=NOV)  # 5 + 1 + 2 = 8, nothing to move
    assert (r.archived, r.lines, r.over_cap) == (0, 8, True)
    assert path.read_bytes().startswith(header)
    assert not (tmp_path / "archive-2026-11.md").exists()


def test_existing_archive_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    archive = tmp_path / "archive-2026-11.md"
    archive.write_bytes(b"# Archive\r\nold stuff")  # CRLF, no final line ending
    for i in (1, 2):
        append_entry(path, f"e{i}", max_lines=5, now=NOV)  # 2, 5
    r = append_entry(path, "e3", max_lines=5, now=NOV)  # 8 -> e1 (3) moves -> 5
    assert r.archived == 1
    assert archive.read_bytes() == b"# Archive\r\nold stuff\r\n<!-- 2026-11-15 -->\ne1\n\n"


def test_agent_json_max_lines_overrides_settings_for_the_agent_file_only(
    project: Path, helpers: SimpleNamespace
) -> None:
    helpers.write_settings(project, {"memory": {"maxLines": 7}})
    helpers.write_agent(project, "alice", {"memory": {"maxLines": 4}})
    svc = MemoryService(helpers.load_config(project), "alice")
    assert (svc.max_lines("agent"), svc.max_lines("global")) == (4, 7)
    assert svc.write("a1", "agent", now=NOV).result.lines == 2  # type: ignore[union-attr]
    out = svc.write("a2", "agent", now=NOV)  # 5 > 4: a1 moves
    assert (out.result.archived, out.result.lines) == (1, 2)  # type: ignore[union-attr]
    folder = project / ".veil" / "memory"
    assert (folder / "agents" / "alice" / "archive-2026-11.md").is_file()
    first_two = [svc.write(f"g{i}", "global", now=NOV).result for i in (1, 2)]
    assert [r.archived for r in first_two] == [0, 0]  # type: ignore[union-attr]
    assert svc.write("g3", "global", now=NOV).result.archived == 1  # type: ignore[union-attr]
    assert (folder / "archive-2026-11.md").read_bytes() == b"<!-- 2026-11-15 -->\ng1\n\n"


_chunks = st.sampled_from(["<!-- 2024-01-01 -->\n", "x\n", "\n", "y", "\r\n", "# h\n", "z\r\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_chunks, max_size=40).map("".join), st.integers(min_value=1, max_value=12))
def test_plan_matches_an_entry_by_entry_reference(text: str, cap: int) -> None:
    from veil_memoryfiles.archive import plan_archive
    from veil_memoryfiles.entries import count_lines

    # Reference: parse into entries, drop the oldest while over the cap, keep the newest.
    doc = parse(text)
    lines, n = count_lines(text), 0
    while lines > cap and len(doc.entries) - n > 1:
        lines -= count_lines(doc.entries[n].raw)
        n += 1
    plan = plan_archive(text, cap)
    assert plan.moved_count == n
    assert plan.moved == "".join(e.raw for e in doc.entries[:n])
    assert plan.kept == doc.header + "".join(e.raw for e in doc.entries[n:])
    assert plan.lines_after == lines == count_lines(plan.kept)
    assert plan.over_cap == (lines > cap)
