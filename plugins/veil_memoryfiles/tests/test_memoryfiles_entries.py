"""The MEMORY.md format: lossless parsing, escaping of date-comment lines, line endings."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from veil_memoryfiles.entries import (
    count_lines,
    detect_newline,
    escape_content,
    format_entry,
    parse,
    separator_before_entry,
    unescape_content,
)
from veil_memoryfiles.store import append_entry

NOW = datetime(2025, 3, 2, 12, 0, tzinfo=timezone.utc)

FEATURES_LF = """# Team memory

<!-- keep this file short; reviewed weekly -->

| key | value |
|-----|-------|
| port | 5051 |

<!-- 2025-01-05 -->
Build with `make all`:

```bash
make all  # <!-- 2025-01-06 --> inside a fence, not at column 0
```

<!-- 2025-01-06 -->
中文条目：记忆系统 🧠 with emoji 🚀 and ＣＪＫ fullwidth
  <!-- 2025-01-07 -->  (indented: content, not a boundary)
<!-- 2025-01-08 --> trailing text: content too

<!--2025-01-09-->
no spaces inside the comment still counts as a date comment
"""


def test_seed_example_is_one_entry_with_its_date() -> None:
    doc = parse("<!-- 2025-03-02 -->\nProject uses port 5051.\n")
    assert doc.header == ""
    assert [(e.date, e.content) for e in doc.entries] == [("2025-03-02", "Project uses port 5051.")]


def test_features_file_parses_into_header_and_three_entries() -> None:
    doc = parse(FEATURES_LF)
    assert doc.header.startswith("# Team memory") and doc.header.endswith("| port | 5051 |\n\n")
    assert [e.date for e in doc.entries] == ["2025-01-05", "2025-01-06", "2025-01-09"]
    assert doc.entries[0].content.endswith("```")
    assert "indented: content" in doc.entries[1].content
    assert "trailing text: content too" in doc.entries[1].content
    assert doc.serialize() == FEATURES_LF


def test_features_file_round_trips_with_crlf() -> None:
    crlf = FEATURES_LF.replace("\n", "\r\n")
    doc = parse(crlf)
    assert [e.date for e in doc.entries] == ["2025-01-05", "2025-01-06", "2025-01-09"]
    assert doc.serialize() == crlf
    # content is reported with \n line endings whatever the file uses
    assert parse(crlf).entries[0].content == parse(FEATURES_LF).entries[0].content


def test_real_files_round_trip_and_survive_an_append(memfiles_dir: Path, tmp_path: Path) -> None:
    for src in sorted(memfiles_dir.glob("*.md")):
        original = src.read_bytes()
        text = original.decode("utf-8")
        doc = parse(text)
        assert doc.serialize() == text
        assert doc.entries == []  # neither real file has date comments: all header
        target = tmp_path / src.name
        shutil.copyfile(src, target)
        target.chmod(0o644)
        result = append_entry(target, "Project uses port 5051.", max_lines=10_000, now=NOW)
        assert result.status == "written"
        after = target.read_bytes()
        assert after.startswith(original)
        # both real files end with "\n" but not a blank line: one "\n" separates the entry
        assert after[len(original) :] == b"\n<!-- 2025-03-02 -->\nProject uses port 5051.\n"
        reparsed = parse(after.decode("utf-8"))
        assert reparsed.header == text + "\n"
        assert [e.content for e in reparsed.entries] == ["Project uses port 5051."]


def test_append_to_features_file_keeps_original_bytes_and_crlf(tmp_path: Path) -> None:
    for newline in ("\n", "\r\n"):
        path = tmp_path / f"m{len(newline)}.md"
        original = FEATURES_LF.replace("\n", newline).encode("utf-8")
        path.write_bytes(original)
        assert append_entry(
            path, "line one\nline two\r\nline 3", max_lines=999, now=NOW
        ).status == ("written")
        after = path.read_bytes()
        assert after.startswith(original)
        added = after[len(original) :]
        expected = "\n<!-- 2025-03-02 -->\nline one\nline two\nline 3\n".replace("\n", newline)
        assert added == expected.encode("utf-8")
        doc = parse(after.decode("utf-8"))
        assert doc.entries[-1].content == "line one\nline two\nline 3"
        assert len(doc.entries) == 4


def test_content_holding_date_comment_lines_reads_back_as_one_entry(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    content = "before\n<!-- 2024-01-01 -->\n\\<!-- 2024-01-02 -->\n\\\\<!--2024-01-03-->  \nafter"
    assert append_entry(path, content, max_lines=999, now=NOW).status == "written"
    on_disk = path.read_text(encoding="utf-8")
    assert on_disk == (
        "<!-- 2025-03-02 -->\nbefore\n\\<!-- 2024-01-01 -->\n\\\\<!-- 2024-01-02 -->\n"
        "\\\\\\<!--2024-01-03-->  \nafter\n"
    )
    doc = parse(on_disk)
    assert len(doc.entries) == 1
    assert doc.entries[0].content == content
    # writing the same content again is an exact re-append: a duplicate
    assert append_entry(path, content, max_lines=999, now=NOW).status == "skipped_duplicate"


def test_escape_leaves_normal_content_alone() -> None:
    normal = "<!-- a comment -->\n  <!-- 2024-01-01 -->\n<!-- 2024-01-01 --> x\nback\\slash"
    assert escape_content(normal) == normal
    assert unescape_content(normal) == normal


def test_line_helpers() -> None:
    assert count_lines("") == 0
    assert count_lines("a") == 1
    assert count_lines("a\nb") == 2
    assert count_lines("a\nb\n") == 2
    assert count_lines("a\r\nb\r\n\r\n") == 3
    assert detect_newline("") == "\n"
    assert detect_newline("x\r\ny\n") == "\r\n"
    assert detect_newline("x\ny\r\n") == "\n"
    assert separator_before_entry("", "\n") == ""
    assert separator_before_entry("a", "\n") == "\n\n"
    assert separator_before_entry("a\n", "\n") == "\n"
    assert separator_before_entry("a\n\n", "\n") == ""
    assert separator_before_entry("a\r\n\r\n", "\r\n") == ""
    assert format_entry("  x  ", date(2025, 3, 2), "\r\n") == "<!-- 2025-03-02 -->\r\nx\r\n"


_pieces = st.sampled_from(
    [
        "<!-- 2024-01-01 -->",
        "<!--2024-12-31-->",
        "\\",
        "\n",
        "\r\n",
        "\r",
        " ",
        "\t",
        "text",
        "中文",
        "🚀",
        "```",
        "| a |",
        "<!-- note -->",
    ]
)
_texts = st.lists(st.one_of(_pieces, st.text(max_size=5)), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_parse_then_serialize_is_identity(text: str) -> None:
    assert parse(text).serialize() == text


@settings(max_examples=300, deadline=None)
@given(existing=_texts, content=_texts)
def test_any_content_appended_to_any_file_reads_back_as_the_last_entry(
    existing: str, content: str
) -> None:
    if not content.strip():
        return
    newline = detect_newline(existing)
    text = existing + separator_before_entry(existing, newline)
    text += format_entry(content, date(2025, 3, 2), newline)
    before = parse(existing)
    after = parse(text)
    assert text.startswith(existing)
    expected = content.replace("\r\n", "\n").replace("\r", "\n").strip()
    assert after.entries[-1].content == expected
    assert len(after.entries) == len(before.entries) + 1


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_date_comment_lines_match_a_line_by_line_reference(text: str) -> None:
    import re

    from veil_memoryfiles.entries import date_comment_lines

    anchored = re.compile(r"<!--[ \t]*(\d{4}-\d{2}-\d{2})[ \t]*-->[ \t]*\r?")
    expected, pos = [], 0
    for line in text.split("\n"):
        if anchored.fullmatch(line):
            expected.append(pos)
        pos += len(line) + 1
    assert [m.start() for m in date_comment_lines(text)] == expected


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_last_entry_is_the_last_parsed_entry(text: str) -> None:
    from veil_memoryfiles.entries import last_entry

    doc = parse(text)
    last = last_entry(text)
    if not doc.entries:
        assert last is None
    else:
        assert last is not None
        assert (last.date, last.marker, last.body) == (
            doc.entries[-1].date,
            doc.entries[-1].marker,
            doc.entries[-1].body,
        )
