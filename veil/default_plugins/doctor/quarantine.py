"""The doctor plugin's table, ``quarantine``: a copy of every row ``veil doctor --repair`` moved
aside or reset (the table, the row's key, every column as JSON text, the reasons), so nothing is
deleted unseen. Its migrations (:func:`migrations`, ``register_migrations``) and its statements
are here; the reads of the damaged rows themselves are the store's (``veil.raw_rows``).

Columns: ``seq`` (insertion order), ``ts`` (Unix seconds), ``table_name``, ``row_key``, ``row``
(JSON text, ASCII), ``reason``.
"""

from __future__ import annotations

from typing import Any

from veil import Migration

PLUGIN_NAME = "veil.doctor"
"""The key of the table's versions in the store's ``plugin_migrations``."""

TABLE_SQL = {
    # As the core's migrations created it before the table moved here (SQLite's third,
    # PostgreSQL's first): IF NOT EXISTS adopts such a table with its rows.
    "sqlite": """
    CREATE TABLE IF NOT EXISTS quarantine (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        table_name TEXT NOT NULL,
        row_key TEXT NOT NULL,
        row TEXT NOT NULL,
        reason TEXT NOT NULL
    )
    """,
    "postgresql": """
    CREATE TABLE IF NOT EXISTS quarantine (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        table_name TEXT NOT NULL,
        row_key TEXT NOT NULL,
        row TEXT NOT NULL,
        reason TEXT NOT NULL
    )
    """,
}


def migrations() -> list[Migration]:
    """The table, version by version (a change is a new version appended here; a released one
    is never edited)."""
    return [Migration(PLUGIN_NAME, 1, TABLE_SQL, "quarantine: rows veil doctor moved aside")]


def has_table(conn: Any) -> bool:
    """Whether a SQLite database (a connection to ``.veil/context.db``) has the table: one that
    no veil with this plugin loaded has opened may not."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'quarantine'"
    ).fetchone()
    return found is not None


def kept_count(conn: Any) -> int:
    """Rows kept in the table."""
    return int(conn.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0])


def keep(conn: Any, ts: float, table: str, key: str, row_json: str, reason: str) -> None:
    """Keep a copy of a damaged row (inside the repair's transaction).

    Args:
        ts: Unix seconds; key: the row's key as ``veil doctor`` names it; row_json: every
        column as JSON text; reason: the problems found.
    """
    conn.execute(
        "INSERT INTO quarantine (ts, table_name, row_key, row, reason) VALUES (?, ?, ?, ?, ?)",
        (ts, table, key, row_json, reason),
    )
