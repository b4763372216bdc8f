"""Rows of ``.veil/context.db`` as they are stored, damaged or not, and the writes that move
damaged ones aside or reset them: the statements of ``veil doctor``
(:mod:`veil.default_plugins.doctor.store_check`) on the core's tables (the copies it keeps go to
its own table, ``quarantine``: :mod:`veil.default_plugins.doctor.quarantine`).

Text columns that veil parses are read as bytes (``CAST(... AS BLOB)``): a column holding
invalid UTF-8 would make SQLite's text fetch, and so the whole query, fail. Every function takes
the connection to run on; the repair's writes run inside the caller's transaction.

On PostgreSQL text is valid UTF-8 and every column holds its declared type, so only JSON that
does not parse or has the wrong shape can be damage there; the server checks its own pages and
foreign keys, so :func:`integrity_problems` and :func:`foreign_key_problems` report none.
``rowid`` is the ``rowid`` column PostgreSQL's tables carry for it (``seq`` for events).
"""

from __future__ import annotations

from typing import Any

from veil.core.store.dialect import dialect_of
from veil.core.store.row_codec import SESSION_TEXT_COLUMNS

TABLES = frozenset({"sessions", "messages", "items", "events"})
"""The tables whose rows ``veil doctor`` checks and repairs."""


def _select(conn: Any, columns: str, raw: tuple[str, ...], rest: str) -> list[Any]:
    """All rows of ``SELECT columns, raw... rest``, each ``raw`` column read as bytes where the
    engine stores any bytes (SQLite: ``CAST AS BLOB``) under its own name."""
    dialect = dialect_of(conn)
    raw_sql = ", ".join(f"{dialect.blob(c)} AS {c}" for c in raw)
    return conn.execute(f"SELECT {columns}, {raw_sql} {rest}").fetchall()


def session_rows(conn: Any) -> list[Any]:
    """Every ``sessions`` row in rowid order, read by name: ``rowid, id, agent, created_at,
    updated_at, closed_at, compact_size, version`` as stored, ``snapshot, state, model, title,
    compact_summary`` as bytes (or null)."""
    return _select(
        conn,
        "rowid, id, agent, created_at, updated_at, closed_at, compact_size, version",
        ("snapshot", "state", *SESSION_TEXT_COLUMNS),
        "FROM sessions ORDER BY rowid",
    )


def message_rows(conn: Any) -> list[Any]:
    """Every ``messages`` row by session and number, read by name: ``rowid, session_id, idx,
    step`` as stored, ``message, usage`` as bytes (or null)."""
    return _select(
        conn,
        "rowid, session_id, idx, step",
        ("message", "usage"),
        "FROM messages ORDER BY session_id, idx",
    )


def item_rows(conn: Any) -> list[Any]:
    """Every ``items`` row, read by name: ``rowid, id`` as stored, ``tags, targets`` as bytes."""
    return _select(conn, "rowid, id", ("tags", "targets"), "FROM items")


def event_payloads(conn: Any) -> list[Any]:
    """Every ``events`` row in log order, read by name: ``seq``, ``payload`` as bytes."""
    return _select(conn, "seq", ("payload",), "FROM events ORDER BY seq")


def integrity_problems(conn: Any) -> list[str]:
    """What SQLite's ``PRAGMA integrity_check`` reports (pages, indexes); empty when sound
    (always on PostgreSQL, which checks its own pages)."""
    if dialect_of(conn).name != "sqlite":
        return []
    return [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]


def foreign_key_problems(conn: Any) -> list[tuple[str, int, str]]:
    """``PRAGMA foreign_key_check``: ``[(table, rowid, referenced table)]`` per row that points
    to a missing row (none on PostgreSQL, which enforces foreign keys on every write)."""
    if dialect_of(conn).name != "sqlite":
        return []
    return [(r[0], r[1], r[2]) for r in conn.execute("PRAGMA foreign_key_check").fetchall()]


def whole_row(conn: Any, table: str, rowid: int) -> Any:
    """Every column of one row of ``table`` (one of :data:`TABLES`), text read as bytes, by
    name; None when the row is gone.

    Raises:
        ValueError: ``table`` is not one of :data:`TABLES`."""
    _check_table(table)
    dialect = dialect_of(conn)
    columns = dialect.table_columns(conn, table)
    select = ", ".join(f"{dialect.text_as_bytes(c)} AS {c}" for c in columns)
    return conn.execute(
        f"SELECT {select} FROM {table} WHERE {_rowid(conn, table)} = ?", (rowid,)
    ).fetchone()


def delete_row(conn: Any, table: str, rowid: int) -> None:
    """Delete one row of ``table`` (one of :data:`TABLES`) by rowid.

    Raises:
        ValueError: ``table`` is not one of :data:`TABLES`."""
    _check_table(table)
    conn.execute(f"DELETE FROM {table} WHERE {_rowid(conn, table)} = ?", (rowid,))


def reset_item_list(conn: Any, column: str, rowid: int) -> None:
    """Set an item's ``tags`` or ``targets`` to ``[]``.

    Raises:
        ValueError: ``column`` is neither."""
    if column not in ("tags", "targets"):
        raise ValueError(f"column: expected 'tags' or 'targets', got {column!r}")
    conn.execute(f"UPDATE items SET {column} = '[]' WHERE rowid = ?", (rowid,))


def clear_message_usage(conn: Any, rowid: int) -> None:
    """Set a message row's ``usage`` to null (its token counts; the message itself stays)."""
    conn.execute("UPDATE messages SET usage = NULL WHERE rowid = ?", (rowid,))


def set_session_columns(conn: Any, rowid: int, values: dict[str, Any]) -> None:
    """Set columns of one ``sessions`` row by rowid (names from veil's own code, not from the
    stored rows; values as stored: JSON already as text)."""
    cols = ", ".join(f"{c} = ?" for c in values)
    conn.execute(f"UPDATE sessions SET {cols} WHERE rowid = ?", (*values.values(), rowid))


def _rowid(conn: Any, table: str) -> str:
    """The column that finds a row of ``table`` by the number veil doctor names it with: the
    rowid (SQLite's hidden one; PostgreSQL's ``rowid`` column), ``seq`` for events on
    PostgreSQL (on SQLite ``seq`` is the rowid)."""
    return "seq" if table == "events" and dialect_of(conn).name != "sqlite" else "rowid"


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"table: expected one of {sorted(TABLES)}, got {table!r}")
