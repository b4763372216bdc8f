"""The two write paths of a memory file.

:func:`append_entry` is the tool path (``memory_write``, ``/remember``, ``veil memory write``):
it applies seed 000's cleanup guards, the ``maxLines`` archive and issue 17's byte bounds
(``maxEntryBytes`` refuses, ``maxFileBytes`` archives like ``maxLines``). :func:`overwrite` is the
HTTP ``PUT`` path: the same lock and atomic write, no guards, no archive (seed 000: "literal
overwrite"; its size is bounded by the HTTP body limit). Both go through :mod:`.fileio` (UTF-8,
temp file + fsync + rename, ``<file>.lock``, no symbolic links) and, given a
:class:`~veil_memoryfiles.provenance.Provenance`, record what they write before writing it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from veil import MAX_ENTRY_BYTES, MAX_FILE_BYTES, BadRequest
from veil_memoryfiles.archive import append_to_archive, archive_name, plan_archive
from veil_memoryfiles.dedupe import fact_key, present_keys
from veil_memoryfiles.entries import (
    count_lines,
    detect_newline,
    format_entry,
    last_entry,
    normalize_newlines,
    separator_before_entry,
    utc_date,
)
from veil_memoryfiles.errors import MemoryLimitExceeded
from veil_memoryfiles.fileio import LOCK_TIMEOUT_S, atomic_write_bytes, file_lock, read_text
from veil_memoryfiles.provenance import Provenance

log = logging.getLogger(__name__)

WriteStatus = Literal["written", "skipped_empty", "skipped_duplicate"]


@dataclass
class WriteResult:
    """What :func:`append_entry` did.

    Attributes:
        status: seed 000's status: ``written``, ``skipped_empty`` or ``skipped_duplicate``.
        path: the memory file.
        date: the entry's date (``YYYY-MM-DD``, UTC) when written, else None.
        archived: number of whole entries moved to ``archive_path`` by ``maxLines``.
        archive_path: the archive file written, or None.
        lines: lines of the memory file after the write.
        over_cap: True when the file still exceeds ``maxLines`` because its newest entry (or its
            header) alone is longer than the cap; kept whole and logged.
    """

    status: WriteStatus
    path: Path
    date: str | None = None
    archived: int = 0
    archive_path: Path | None = None
    lines: int = 0
    over_cap: bool = False


def is_empty(content: object) -> bool:
    """Seed 000's ``skipped_empty`` trigger: None, ``""`` or whitespace only."""
    return content is None or (isinstance(content, str) and not content.strip())


def check_entry_size(content: str, max_entry_bytes: int) -> None:
    """Refuse an entry whose UTF-8 size (after trimming) is over ``maxEntryBytes``.

    Raises:
        MemoryLimitExceeded: naming the limit, its value and the entry's size.
    """
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > max_entry_bytes:
        raise MemoryLimitExceeded(
            f"content: {size} bytes is over memory.maxEntryBytes ({max_entry_bytes} bytes); "
            "nothing was written. Write a shorter, focused entry (or raise memory.maxEntryBytes "
            "in .veil/settings.json)"
        )


@dataclass
class AppendPlan:
    """What appending an entry to a file's text does (:func:`plan_append`), before anything is
    written: the caller writes ``text`` (and appends ``moved`` to ``archive``) as one change.

    Attributes:
        result: the :class:`WriteResult` to report once written (its ``archive_path`` set when
            entries move).
        text: the file's new text. moved: the raw text of the entries moving to the archive ("":
            none). trimmed: the entry's content as stored. day: the entry's date.
    """

    result: WriteResult
    text: str
    moved: str
    trimmed: str
    day: date


def prepare_content(content: object, max_entry_bytes: int) -> str | None:
    """The trimmed content of an entry to append, or None for seed 000's ``skipped_empty``.

    Raises:
        BadRequest: not a string, or not encodable as UTF-8 (lone surrogates).
        MemoryLimitExceeded: over ``max_entry_bytes``."""
    if is_empty(content):
        return None
    if not isinstance(content, str):
        raise BadRequest(f"content: expected a string, got {type(content).__name__}")
    trimmed = normalize_newlines(content).strip()
    check_entry_size(trimmed, max_entry_bytes)
    try:
        trimmed.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"content: not encodable as UTF-8 ({exc.reason})") from exc
    return trimmed


def plan_append(
    path: Path,
    existing: str,
    trimmed: str,
    day: date,
    *,
    max_lines: int,
    max_file_bytes: int,
    skip_if_present: bool = False,
) -> AppendPlan | WriteResult:
    """Seed 000's ``memory_write`` on a file's text, nothing written: the duplicate guard, the
    dated entry in the file's own line endings, and the ``maxLines`` / ``maxFileBytes`` archive
    (see :func:`append_entry` for each rule). Both places memory files live (disk and a shared
    store) write what this decides.

    Returns:
        A :class:`WriteResult` with status ``skipped_duplicate`` when nothing is to be written,
        else the :class:`AppendPlan`.

    Raises:
        MemoryLimitExceeded: the header and the new entry alone are over ``max_file_bytes``.
    """
    last = last_entry(existing)
    if (last is not None and last.content == trimmed) or (
        skip_if_present and fact_key(trimmed) in present_keys(existing)
    ):
        return WriteResult(status="skipped_duplicate", path=path, lines=count_lines(existing))
    newline = detect_newline(existing)
    text = existing + separator_before_entry(existing, newline)
    text += format_entry(trimmed, day, newline)
    result = WriteResult(status="written", path=path, date=day.isoformat())
    plan = plan_archive(text, max_lines, max_file_bytes)
    if plan.over_bytes:
        raise MemoryLimitExceeded(
            f"{path.name}: its header and the new entry alone take {plan.bytes_after} bytes, "
            f"over memory.maxFileBytes ({max_file_bytes} bytes), even with every older "
            "entry archived; nothing was written. Shorten the file's header (the text "
            "before its first date comment) or raise memory.maxFileBytes"
        )
    moved = ""
    if plan.moved_count:
        result.archive_path = path.parent / archive_name(day)
        result.archived = plan.moved_count
        moved = plan.moved
        text = plan.kept
    if plan.over_cap:
        result.over_cap = True
        log.warning(
            "%s: %d lines after archiving, over maxLines=%d; kept whole: the newest "
            "entry (%d lines) and the header (%d lines)",
            path,
            plan.lines_after,
            max_lines,
            plan.newest_lines,
            plan.header_lines,
        )
    result.lines = count_lines(text)
    return AppendPlan(result, text, moved, trimmed, day)


def append_entry(
    path: Path,
    content: str | None,
    *,
    max_lines: int,
    max_entry_bytes: int = MAX_ENTRY_BYTES,
    max_file_bytes: int = MAX_FILE_BYTES,
    now: datetime | None = None,
    lock_timeout: float = LOCK_TIMEOUT_S,
    provenance: Provenance | None = None,
    skip_if_present: bool = False,
) -> WriteResult:
    """Append ``content`` as a dated entry (seed 000 ``memory_write``), with the cleanup guards,
    the ``maxLines`` / ``maxFileBytes`` archive and the ``maxEntryBytes`` bound, atomically and
    under the file's lock (a memory file on disk; :mod:`.backend` writes the same plan to a
    shared store).

    Args:
        path: the MEMORY.md file (created with its folders when missing).
        content: the text to remember; stored trimmed, with the file's line endings.
        max_lines: seed 000 ``maxLines``: when the file ends up with more lines, its oldest whole
            entries move to ``archive-YYYY-MM.md`` in the same folder (see :mod:`.archive`).
        max_entry_bytes: ``memory.maxEntryBytes``: the trimmed content's UTF-8 size may not be
            larger (refused, nothing written).
        max_file_bytes: ``memory.maxFileBytes``: when the file would be larger, its oldest whole
            entries move to the archive as for ``max_lines``; if the header and the new entry
            alone are larger, the write is refused and nothing is written.
        now: time of the write (default: now); its UTC date dates the entry and the archive.
        lock_timeout: seconds to wait for the lock.
        provenance: where to record that veil wrote the entry (before the file is written).
        skip_if_present: also skip content that states a fact already anywhere in the file
            (:mod:`.dedupe`: same text up to whitespace, case, list markers and trailing
            punctuation); the pre-compaction extractor sets it.

    Returns:
        A :class:`WriteResult`; status ``skipped_empty`` for None/empty/whitespace content,
        ``skipped_duplicate`` when the trimmed content equals the last entry's (only the last;
        compared with ``\\n`` line endings, escapes undone) or, with ``skip_if_present``, is
        already in the file, else ``written``.

    Raises:
        BadRequest: ``content`` is not a string (or holds lone surrogates, which UTF-8 cannot
            encode). MemoryLimitExceeded: over ``max_entry_bytes``, or over ``max_file_bytes``
            even after archiving. MemoryFileInvalid: the file on disk is not UTF-8.
            MemoryBusy: lock timeout. UnsafeVeilPath: a symbolic link on the way.
    """
    path = Path(path)
    trimmed = prepare_content(content, max_entry_bytes)
    if trimmed is None:
        return WriteResult(status="skipped_empty", path=path)
    day = utc_date(now)
    with file_lock(path, lock_timeout):
        plan = plan_append(
            path,
            read_text(path) or "",
            trimmed,
            day,
            max_lines=max_lines,
            max_file_bytes=max_file_bytes,
            skip_if_present=skip_if_present,
        )
        if isinstance(plan, WriteResult):
            return plan
        if provenance is not None:
            provenance.record_entry(path, day.isoformat(), trimmed)
        if plan.moved:
            # Archive first: a crash in between leaves the moved entries in both files
            # (duplicated, never lost); MEMORY.md is then replaced in one step.
            assert plan.result.archive_path is not None
            append_to_archive(plan.result.archive_path, plan.moved, lock_timeout=lock_timeout)
        atomic_write_bytes(path, plan.text.encode("utf-8"))
        return plan.result


def decode_body(data: bytes) -> str:
    """A PUT body as text.

    Raises:
        BadRequest: ``data`` is not UTF-8 (names the byte offset)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body: not valid UTF-8 (byte {exc.start})") from exc


def overwrite(
    path: Path,
    data: bytes,
    *,
    lock_timeout: float = LOCK_TIMEOUT_S,
    provenance: Provenance | None = None,
) -> str:
    """Replace a memory file with ``data`` literally (HTTP ``PUT``): UTF-8 checked, atomic, under
    the file's lock; no guards, no archive (seed 000: "literal overwrite"). With ``provenance``,
    the header and every entry of ``data`` are recorded as veil-written first (the caller of
    veil's own API chose this content).

    Returns:
        The decoded text written.

    Raises:
        BadRequest: ``data`` is not UTF-8 (names the byte offset). MemoryBusy: lock timeout.
        UnsafeVeilPath: a symbolic link on the way.
    """
    text = decode_body(data)
    with file_lock(path, lock_timeout):
        if provenance is not None:
            provenance.record_text(path, text)
        atomic_write_bytes(path, data)
    return text
