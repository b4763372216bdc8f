"""The schema of ``.veil/context.db``: the migrations that build it, in order.

The version a database is at is stored in ``PRAGMA user_version``
(:func:`veil.core.store.connection.apply_migrations` applies the newer ones, each in one
``BEGIN IMMEDIATE`` transaction). Tables of default plugins that are views of the event log
(the beliefs) are not migrations: :mod:`veil.core.store.belief_tables` creates and rebuilds them.
"""

from __future__ import annotations

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
    # Warm and cold tiers with recall (veil/core/tiers.py, veil/core/models/embedder.py).
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
