"""The store's schema: the migrations that build it, in order, one list per engine.

SQLite (:data:`MIGRATIONS`): the version a database is at is stored in ``PRAGMA user_version``
(:func:`veil.core.store.connection.apply_migrations` applies the newer ones, each in one
``BEGIN IMMEDIATE`` transaction). PostgreSQL (:data:`PG_MIGRATIONS`): in the project schema's
``schema_version`` table (:class:`veil.core.store.postgres.PgDatabase` applies them at open, each
in one transaction, under an advisory lock). A change of the schema appends an entry to both
lists. Tables that plugins own (the beliefs view, ``veil doctor``'s quarantine) are not here:
each plugin declares its own migrations (``register_migrations``,
:mod:`veil.core.store.plugin_tables`), recorded per plugin in ``plugin_migrations``.
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
    """,
    # (The entry above also created ``quarantine`` until the table moved to its owner, the doctor
    # plugin, whose first migration creates it ``IF NOT EXISTS``: a database that got it here
    # keeps it and its rows, one that did not gets it from the plugin.)
    # Tables that plugins own (veil.core.store.plugin_tables): the version of each plugin's
    # tables this database has applied.
    """
    CREATE TABLE plugin_migrations (
        plugin TEXT PRIMARY KEY,
        version INTEGER NOT NULL
    );
    """,
]


PG_MIGRATIONS: list[str] = [
    # Everything SQLite's first three migrations build, in PostgreSQL's types (``quarantine``
    # too until it moved to the doctor plugin's migrations, which adopt it where it exists). ``rowid`` stands in
    # for SQLite's hidden rowid where the statements read it (insertion order, veil doctor);
    # ``COLLATE "C"`` makes text compare byte by byte, as SQLite does; recall_fts holds the
    # tsvector only (contentless, as the FTS5 table); embeddings.embedding is the vector pgvector
    # searches (its HNSW index per width: veil.core.store.postgres.ensure_vector_index);
    # memory_files holds the MEMORY.md files and their archives, which live on disk with SQLite
    # (veil.core.store.memory_tables).
    """
    CREATE TABLE sessions (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        id TEXT COLLATE "C" PRIMARY KEY,
        agent TEXT COLLATE "C" NOT NULL,
        model TEXT COLLATE "C",
        title TEXT COLLATE "C",
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        closed_at DOUBLE PRECISION,
        snapshot TEXT NOT NULL,
        compact_summary TEXT,
        compact_size BIGINT NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT '{}',
        version BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_updated ON sessions(updated_at);
    CREATE TABLE messages (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        idx BIGINT NOT NULL,
        step BIGINT NOT NULL,
        message TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        usage TEXT,
        PRIMARY KEY (session_id, idx)
    );
    CREATE INDEX messages_created ON messages(created_at);
    CREATE TABLE items (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        id TEXT COLLATE "C" PRIMARY KEY,
        session_id TEXT COLLATE "C" REFERENCES sessions(id) ON DELETE CASCADE,
        message_index BIGINT,
        step BIGINT NOT NULL DEFAULT 0,
        tool_call_id TEXT COLLATE "C",
        kind TEXT COLLATE "C" NOT NULL,
        source TEXT COLLATE "C" NOT NULL,
        tier TEXT COLLATE "C" NOT NULL DEFAULT 'live',
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        targets TEXT NOT NULL DEFAULT '[]',
        tokens BIGINT NOT NULL DEFAULT 0,
        access_count BIGINT NOT NULL DEFAULT 0,
        stability DOUBLE PRECISION NOT NULL,
        difficulty DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        last_access DOUBLE PRECISION NOT NULL,
        cognitive_weight DOUBLE PRECISION NOT NULL DEFAULT 0,
        pinned BIGINT NOT NULL DEFAULT 0,
        loaded_by_hand BIGINT NOT NULL DEFAULT 0,
        outcome TEXT
    );
    CREATE INDEX items_session_tier ON items(session_id, tier);
    CREATE INDEX items_session_message ON items(session_id, message_index);
    CREATE TABLE events (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        session_id TEXT COLLATE "C",
        step BIGINT,
        tool_call_id TEXT COLLATE "C",
        kind TEXT COLLATE "C" NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_session ON events(session_id, seq);
    CREATE INDEX events_kind ON events(kind, seq);
    CREATE TABLE usage (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        session_id TEXT COLLATE "C",
        role TEXT,
        model TEXT,
        provider TEXT,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        seconds DOUBLE PRECISION
    );
    CREATE TABLE embeddings (
        key TEXT COLLATE "C" PRIMARY KEY,
        model TEXT COLLATE "C" NOT NULL,
        dim INTEGER NOT NULL,
        vector BYTEA NOT NULL,
        embedding vector
    );
    CREATE TABLE recall_index (
        row BIGINT PRIMARY KEY,
        item_id TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES items(id) ON DELETE CASCADE,
        session_id TEXT COLLATE "C",
        seq BIGINT NOT NULL,
        tier TEXT COLLATE "C" NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        embed_key TEXT COLLATE "C",
        forgotten BIGINT NOT NULL DEFAULT 0,
        fts BIGINT NOT NULL DEFAULT 0,
        rev BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX recall_index_rev ON recall_index(rev);
    CREATE INDEX recall_index_session ON recall_index(session_id, seq);
    CREATE INDEX recall_index_embed ON recall_index(embed_key);
    CREATE TABLE recall_fts (
        row BIGINT PRIMARY KEY,
        document TSVECTOR NOT NULL
    );
    CREATE INDEX recall_fts_document ON recall_fts USING gin(document);
    CREATE TABLE cold_content (
        item_id TEXT COLLATE "C" PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
        zcontent BYTEA NOT NULL,
        sha256 TEXT NOT NULL,
        chars BIGINT NOT NULL
    );
    CREATE TABLE memory_files (
        path TEXT COLLATE "C" PRIMARY KEY,
        content TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
    # The recall index without a project-wide writer lock (issue 32): new entries take their
    # ``row`` from a sequence, and every insert or update stamps the row with its transaction's
    # id (``xid``), which readers follow instead of ``rev`` (recall_tables.index_changes: rows of
    # transactions that may still have been running at the last read are read again), so
    # concurrent eviction passes never wait for each other.
    """
    CREATE SEQUENCE recall_index_row_seq;
    SELECT setval('recall_index_row_seq', coalesce((SELECT max(row) FROM recall_index), 0) + 1,
        false);
    ALTER TABLE recall_index ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
    CREATE INDEX recall_index_xid ON recall_index(xid);
    CREATE FUNCTION recall_index_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.xid := pg_current_xact_id();
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER recall_index_stamp BEFORE UPDATE ON recall_index
        FOR EACH ROW EXECUTE FUNCTION recall_index_stamp()
    """,
    # Memory files in the shared store (veil.core.store.memory_tables): a version per file, so a
    # writer's read-modify-write is a compare-and-swap the database settles between machines, and
    # the tags of what veil wrote (the memory-files plugin's provenance), one row each.
    """
    ALTER TABLE memory_files ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
    CREATE TABLE memory_tags (
        tag TEXT COLLATE "C" PRIMARY KEY
    )
    """,
    # Tables that plugins own (veil.core.store.plugin_tables), as SQLite's fourth migration.
    """
    CREATE TABLE plugin_migrations (
        plugin TEXT COLLATE "C" PRIMARY KEY,
        version INTEGER NOT NULL
    )
    """,
]
