"""The tables of memory files kept in a PostgreSQL store (``store.url``): ``memory_files`` (one
row per file, its text and a version bumped by every write) and ``memory_tags`` (the tags of what
veil wrote, for the memory-files plugin's provenance). With SQLite the files live on disk under
``.veil/memory/`` and these tables do not exist.

Every function takes the connection to run on and never opens a transaction of its own
(:class:`veil.core.shared_files.SharedFiles` does). A file is named by its path below the memory
folder, ``/``-separated: ``MEMORY.md``, ``agents/<name>/archive-2026-12.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHUNK = 500
"""Names or tags per ``IN (...)`` list."""


def read_file(conn: Any, name: str) -> tuple[str, int] | None:
    """``(text, version)`` of a file, or None when there is none."""
    row = conn.execute(
        "SELECT content, version FROM memory_files WHERE path = ?", (name,)
    ).fetchone()
    return None if row is None else (row[0], int(row[1]))


def file_names(conn: Any, prefix: str) -> list[str]:
    """Names of the files whose name starts with ``prefix``, sorted (byte order)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return [
        r[0]
        for r in conn.execute(
            "SELECT path FROM memory_files WHERE path LIKE ? ESCAPE '\\' ORDER BY path",
            (escaped + "%",),
        ).fetchall()
    ]


def file_versions(conn: Any, names: Sequence[str]) -> dict[str, int]:
    """``{name: version}`` of those of ``names`` that exist."""
    out: dict[str, int] = {}
    unique = list(dict.fromkeys(names))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT path, version FROM memory_files WHERE path IN ({marks})", chunk
        ):
            out[row[0]] = int(row[1])
    return out


def put_file(conn: Any, name: str, text: str, expect: int | None, now: float) -> bool:
    """Write a file if it is still as the writer read it: ``expect`` None, the file did not
    exist (``INSERT ... ON CONFLICT DO NOTHING``: the primary key settles two creators); else its
    version was ``expect`` (bumped by one). Returns whether it was written (False: another
    writer got there first; the caller's transaction should roll back and read again)."""
    if expect is None:
        cur = conn.execute(
            "INSERT INTO memory_files (path, content, updated_at, version) VALUES (?, ?, ?, 1)"
            " ON CONFLICT (path) DO NOTHING",
            (name, text, now),
        )
    else:
        cur = conn.execute(
            "UPDATE memory_files SET content = ?, updated_at = ?, version = version + 1"
            " WHERE path = ? AND version = ?",
            (text, now, name, expect),
        )
    return cur.rowcount == 1


def known_tags(conn: Any, tags: Sequence[str]) -> set[str]:
    """Those of ``tags`` on record."""
    found: set[str] = set()
    unique = list(dict.fromkeys(tags))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            r[0] for r in conn.execute(f"SELECT tag FROM memory_tags WHERE tag IN ({marks})", chunk)
        )
    return found


def add_tags(conn: Any, tags: Sequence[str]) -> None:
    """Record ``tags`` (those on record already are kept once: the primary key)."""
    unique = list(dict.fromkeys(tags))
    if unique:
        conn.executemany(
            "INSERT INTO memory_tags (tag) VALUES (?) ON CONFLICT (tag) DO NOTHING",
            [(t,) for t in unique],
        )
