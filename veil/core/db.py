"""SQLite access for ``.veil/context.db``: connection setup, WAL, busy timeout, schema migrations.

The connection comes from ``sqlean`` (sqlean.py, a drop-in sqlite3 with extension loading enabled)
when it is installed, so sqlite-vec can load even where the interpreter's own ``sqlite3`` cannot
load extensions (pyenv's default build, macOS's system Python); otherwise from ``sqlite3``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veil.core.paths import refuse_links

try:  # sqlean.py: same API as sqlite3, with load_extension available everywhere
    import sqlean as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - fallback when sqlean.py is not installed
    import sqlite3  # type: ignore[no-redef]

BUSY_TIMEOUT_MS = 10_000

# Each entry moves the schema from version i to i + 1; never edit a released entry, append one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        model TEXT,
        title TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        closed_at REAL,
        snapshot TEXT NOT NULL,
        compact_summary TEXT,
        compact_size INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX sessions_updated ON sessions(updated_at);
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        step INTEGER NOT NULL,
        message TEXT NOT NULL,
        created_at REAL NOT NULL,
        usage TEXT,
        PRIMARY KEY (session_id, idx)
    );
    CREATE TABLE items (
        id TEXT PRIMARY KEY,
        session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
        message_index INTEGER,
        step INTEGER NOT NULL DEFAULT 0,
        tool_call_id TEXT,
        kind TEXT NOT NULL,
        source TEXT NOT NULL,
        tier TEXT NOT NULL DEFAULT 'live',
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        targets TEXT NOT NULL DEFAULT '[]',
        tokens INTEGER NOT NULL DEFAULT 0,
        access_count INTEGER NOT NULL DEFAULT 0,
        stability REAL NOT NULL,
        difficulty REAL NOT NULL,
        created_at REAL NOT NULL,
        last_access REAL NOT NULL,
        cognitive_weight REAL NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0,
        loaded_by_hand INTEGER NOT NULL DEFAULT 0,
        outcome TEXT
    );
    CREATE INDEX items_session_tier ON items(session_id, tier);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        session_id TEXT,
        step INTEGER,
        tool_call_id TEXT,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_session ON events(session_id, seq);
    CREATE TABLE usage (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        session_id TEXT,
        role TEXT,
        model TEXT,
        provider TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        seconds REAL
    );
    """,
    # Warm and cold tiers with recall (veil/core/tiers.py, veil/core/embedder.py).
    """
    CREATE TABLE embeddings (
        key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE TABLE recall_index (
        row INTEGER PRIMARY KEY,
        item_id TEXT NOT NULL UNIQUE REFERENCES items(id) ON DELETE CASCADE,
        session_id TEXT,
        seq INTEGER NOT NULL,
        tier TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        embed_key TEXT,
        forgotten INTEGER NOT NULL DEFAULT 0,
        fts INTEGER NOT NULL DEFAULT 0,
        rev INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX recall_index_rev ON recall_index(rev);
    CREATE INDEX recall_index_session ON recall_index(session_id, seq);
    CREATE VIRTUAL TABLE recall_fts USING fts5(
        content, meta, content='', contentless_delete=1, tokenize='porter unicode61'
    );
    CREATE TABLE cold_content (
        item_id TEXT PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
        zcontent BLOB NOT NULL,
        sha256 TEXT NOT NULL,
        chars INTEGER NOT NULL
    );
    """,
    # Sessions shared by processes (veil/core/session_locks.py): a version bumped by every change
    # of a session's history or state, so a write from an out-of-date copy is refused
    # (compare-and-swap); rows found damaged, moved aside by `veil doctor --repair`.
    """
    ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE quarantine (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        table_name TEXT NOT NULL,
        row_key TEXT NOT NULL,
        row TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    """,
]


def connect(path: str | Path, *, migrate: bool = True) -> Any:
    """Open ``path`` (created with its folder if missing) in WAL mode and migrate its schema.

    Args:
        path: database file, or ``":memory:"``.
        migrate: apply pending :data:`MIGRATIONS` (inside one transaction each).

    Returns:
        A DB-API connection (``sqlean`` or ``sqlite3``) in autocommit mode with ``Row`` rows,
        foreign keys on and a busy timeout of :data:`BUSY_TIMEOUT_MS` milliseconds.

    Raises:
        sqlite3.DatabaseError: the file is not a SQLite database (the caller names the file).
        UnsafeVeilPath: the file or its ``-wal`` / ``-shm`` / ``-journal`` is a symbolic link.
    """
    if str(path) != ":memory:":
        # SQLite follows links: a cloned .veil/context.db-wal -> ~/file would be written through.
        refuse_links(*(f"{path}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    if migrate:
        apply_migrations(conn)
    return conn


def schema_version(conn: Any) -> int:
    """Return the schema version stored in ``PRAGMA user_version``."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply_migrations(conn: Any) -> int:
    """Apply every migration newer than the stored version; return the resulting version.

    Each migration runs in its own ``BEGIN IMMEDIATE`` transaction, so two processes opening the
    same new database do not both apply it.
    """
    while True:
        current = schema_version(conn)
        if current >= len(MIGRATIONS):
            return current
        conn.execute("BEGIN IMMEDIATE")
        try:
            if schema_version(conn) != current:  # another process migrated meanwhile
                conn.execute("ROLLBACK")
                continue
            for statement in _split_sql(MIGRATIONS[current]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {current + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once


def dumps(value: Any) -> str:
    """JSON-encode for a TEXT column (UTF-8 kept as is, compact)."""
    return _encode(value)


def dumps_strings(values: Any) -> str:
    """:func:`dumps` of ``values``, faster for a list of strings none of which needs escaping
    (no ``"``, no backslash, only printable characters: nearly every tag and target); anything
    else goes through :func:`dumps`. Same text either way (tests/test_store.py compares them)."""
    if type(values) is list:
        try:
            joined = "".join(values)
        except TypeError:  # not all strings
            return _encode(values)
        if joined.isprintable() and '"' not in joined and "\\" not in joined:
            return '["' + '","'.join(values) + '"]' if values else "[]"
    return _encode(values)
