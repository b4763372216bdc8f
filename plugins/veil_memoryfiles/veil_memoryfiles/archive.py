"""``maxLines``: move the oldest whole entries of a memory file to ``archive-YYYY-MM.md``.

Seed 000 ("Configuring memory"): "When a write pushes the file past the cap, the oldest whole
entries are moved to a dated archive-YYYY-MM.md file in the same directory (entries are never
split mid-body)". Decisions where the seed is silent (DESIGN.md, issue 4):

* Lines are counted with :func:`~veil_memoryfiles.entries.count_lines`; the header counts too.
* ``maxFileBytes`` (issue 17) works the same way on the UTF-8 size of the file: entries move,
  oldest first, until the file fits both caps.
* Entries move oldest first until the file fits, but the newest entry (the one just written)
  always stays; the header is never moved. If the file still exceeds the cap, the newest entry or
  the header alone is longer than it: they are kept whole and the caller logs it.
* ``YYYY-MM`` is the month of the write, in UTC. Moved entries are appended to the end of that
  archive verbatim (same bytes, same line endings), so an archive is itself a parseable memory
  file, oldest first.

The plan works on the text and its date-comment positions, without building every entry: only
the entries that move are walked, so crossing the cap of a 10,000-entry file stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from veil_memoryfiles.entries import count_lines, date_comment_lines, detect_newline
from veil_memoryfiles.fileio import LOCK_TIMEOUT_S, atomic_write_bytes, file_lock, read_text


@dataclass
class ArchivePlan:
    """What :func:`plan_archive` decided.

    Attributes:
        kept: the text left in MEMORY.md (header + newest entries).
        moved: the raw text of the entries to archive, oldest first ("" when none move).
        moved_count: how many entries move.
        lines_after: lines of ``kept``.
        over_cap: ``lines_after`` still exceeds the cap (newest entry or header too long).
        header_lines, newest_lines: lines of the header and of the newest entry (for the log).
        bytes_after: UTF-8 bytes of ``kept``.
        over_bytes: ``bytes_after`` still exceeds ``max_bytes`` (header and newest entry alone
            are larger).
    """

    kept: str
    moved: str
    moved_count: int
    lines_after: int
    over_cap: bool
    header_lines: int = 0
    newest_lines: int = 0
    bytes_after: int = 0
    over_bytes: bool = False


def archive_name(day: date) -> str:
    """``archive-YYYY-MM.md`` for the month of ``day`` (the UTC date of the write)."""
    return f"archive-{day.year:04d}-{day.month:02d}.md"


def _utf8_len(text: str) -> int:
    # surrogatepass: a size is asked for before any encoding check could have refused the text
    return len(text.encode("utf-8", "surrogatepass"))


def plan_archive(text: str, max_lines: int, max_bytes: int | None = None) -> ArchivePlan:
    """Choose the oldest whole entries to move so that the file has at most ``max_lines`` lines
    and, when ``max_bytes`` is given, at most ``max_bytes`` bytes of UTF-8.

    Args:
        text: the file as it would be after the write.
        max_lines: the cap (``maxLines``), >= 1.
        max_bytes: the byte cap (``maxFileBytes``), >= 1, or None for none.

    Returns:
        An :class:`ArchivePlan`; nothing moves when the file already fits.
    """
    lines = count_lines(text)
    size = _utf8_len(text)

    def fits() -> bool:
        return lines <= max_lines and (max_bytes is None or size <= max_bytes)

    if fits():
        return ArchivePlan(text, "", 0, lines, False, bytes_after=size)
    starts = date_comment_lines(text)
    first = next(starts, None)
    if first is None:  # header only: nothing can move
        return ArchivePlan(
            text,
            "",
            0,
            lines,
            lines > max_lines,
            header_lines=lines,
            bytes_after=size,
            over_bytes=max_bytes is not None and size > max_bytes,
        )
    header_end = cut = first.start()
    moved_count = 0
    # Each entry but the newest ends with a line ending (the next date comment starts a line),
    # so removing the text before the next start removes exactly that entry's lines.
    for m in starts:
        lines -= text.count("\n", cut, m.start())
        size -= _utf8_len(text[cut : m.start()])
        cut = m.start()
        moved_count += 1
        if fits():
            break
    kept = text[:header_end] + text[cut:]
    over_cap = lines > max_lines
    return ArchivePlan(
        kept=kept,
        moved=text[header_end:cut],
        moved_count=moved_count,
        lines_after=lines,
        over_cap=over_cap,
        header_lines=count_lines(text[:header_end]),
        newest_lines=count_lines(text[cut:]) if over_cap else 0,
        bytes_after=size,
        over_bytes=max_bytes is not None and size > max_bytes,
    )


def append_to_archive(path: Path, moved: str, *, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
    """Append the ``moved`` entries' raw text to the archive at ``path`` (atomic, under its own
    lock; the caller already holds the memory file's lock, and the archive's lock is always taken
    second, so there is no lock-order cycle).

    Raises:
        MemoryFileInvalid: the existing archive is not UTF-8. MemoryBusy: lock timeout.
    """
    if not moved:
        return
    with file_lock(path, lock_timeout):
        text = archive_text_after(read_text(path) or "", moved)
        atomic_write_bytes(path, text.encode("utf-8"))


def archive_text_after(existing: str, moved: str) -> str:
    """An archive's text once the ``moved`` entries are appended to its text ``existing``
    (a last line without its ending is completed first)."""
    if existing and not existing.endswith("\n"):
        # complete a last line that ends in a bare CR rather than adding a second ending
        existing += "\n" if existing.endswith("\r") else detect_newline(existing)
    return existing + moved
