-- migration 1
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
    CREATE TABLE quarantine (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        table_name TEXT NOT NULL,
        row_key TEXT NOT NULL,
        row TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE TABLE memory_files (
        path TEXT COLLATE "C" PRIMARY KEY,
        content TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );

-- migration 2
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
        FOR EACH ROW EXECUTE FUNCTION recall_index_stamp();

-- migration 3
ALTER TABLE memory_files ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
    CREATE TABLE memory_tags (
        tag TEXT COLLATE "C" PRIMARY KEY
    );

-- the beliefs view (belief_tables.create_tables)
CREATE TABLE IF NOT EXISTS beliefs (
    id TEXT COLLATE "C" PRIMARY KEY, statement TEXT COLLATE "C" NOT NULL,
    subject TEXT COLLATE "C", predicate TEXT COLLATE "C", value TEXT COLLATE "C",
    status TEXT COLLATE "C" NOT NULL, session_id TEXT COLLATE "C", step BIGINT,
    tool_call_id TEXT COLLATE "C", source TEXT COLLATE "C", created_at DOUBLE PRECISION NOT NULL,
    reinforced BIGINT NOT NULL DEFAULT 0, retracted_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS belief_conflicts (
    id TEXT COLLATE "C" PRIMARY KEY, subject TEXT COLLATE "C" NOT NULL,
    predicate TEXT COLLATE "C" NOT NULL, status TEXT COLLATE "C" NOT NULL,
    opened_at DOUBLE PRECISION NOT NULL, resolved_at DOUBLE PRECISION, kept TEXT COLLATE "C"
);

CREATE UNIQUE INDEX IF NOT EXISTS beliefs_one_active_claim ON beliefs (subject, predicate, value)
    WHERE status = 'active' AND subject IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS beliefs_one_active_statement ON beliefs (lower(statement))
    WHERE status = 'active' AND subject IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS belief_conflicts_one_open ON belief_conflicts
    (subject, predicate) WHERE status = 'open';

-- rows
INSERT INTO sessions (id, agent, model, title, created_at, updated_at, closed_at, snapshot, compact_summary, compact_size, state, version) VALUES ('s1', 'default', 'm', NULL, 1796688347.592554, 1796688347.593231, NULL, '{"agent":"default"}', NULL, 0, '{}', 2);
INSERT INTO messages (session_id, idx, step, message, created_at, usage) VALUES ('s1', 0, 0, '{"role":"user","content":"what port?"}', 1796688347.5930402, NULL);
INSERT INTO messages (session_id, idx, step, message, created_at, usage) VALUES ('s1', 1, 0, '{"role":"assistant","content":"port 80"}', 1796688347.593231, NULL);
INSERT INTO items (id, session_id, message_index, step, tool_call_id, kind, source, tier, content, tags, targets, tokens, access_count, stability, difficulty, created_at, last_access, cognitive_weight, pinned, loaded_by_hand, outcome) VALUES ('item_1', 's1', NULL, 0, NULL, 'episodic', 'tool_result', 'live', 'port 80', '[]', '[]', 3, 0, 0.02, 5.0, 1796688347.5933325, 1796688347.5933328, 0.0, 0, 0, NULL);
INSERT INTO events (ts, session_id, step, tool_call_id, kind, payload) VALUES (1.0, NULL, NULL, NULL, 'belief.assert', '{"belief": "belief_707089dbdb9f", "statement": "api port is 80", "source": "veil_remember", "subject": "api port", "predicate": "is", "value": "80"}');
INSERT INTO events (ts, session_id, step, tool_call_id, kind, payload) VALUES (2.0, NULL, NULL, NULL, 'belief.assert', '{"belief": "belief_aea95ffa9165", "statement": "api port is 81", "source": "veil_remember", "subject": "api port", "predicate": "is", "value": "81"}');
INSERT INTO events (ts, session_id, step, tool_call_id, kind, payload) VALUES (3.0, NULL, NULL, NULL, 'belief.assert', '{"belief": "belief_143a736f9639", "statement": "the cache lives in /tmp/cache", "source": "veil_remember", "subject": "cache", "predicate": "is located in", "value": "/tmp/cache"}');
INSERT INTO beliefs (id, statement, subject, predicate, value, status, session_id, step, tool_call_id, source, created_at, reinforced, retracted_at) VALUES ('belief_707089dbdb9f', 'api port is 80', 'api port', 'is', '80', 'active', NULL, NULL, NULL, 'veil_remember', 1.0, 0, NULL);
INSERT INTO beliefs (id, statement, subject, predicate, value, status, session_id, step, tool_call_id, source, created_at, reinforced, retracted_at) VALUES ('belief_aea95ffa9165', 'api port is 81', 'api port', 'is', '81', 'active', NULL, NULL, NULL, 'veil_remember', 2.0, 0, NULL);
INSERT INTO beliefs (id, statement, subject, predicate, value, status, session_id, step, tool_call_id, source, created_at, reinforced, retracted_at) VALUES ('belief_143a736f9639', 'the cache lives in /tmp/cache', 'cache', 'is located in', '/tmp/cache', 'active', NULL, NULL, NULL, 'veil_remember', 3.0, 0, NULL);
INSERT INTO belief_conflicts (id, subject, predicate, status, opened_at, resolved_at, kept) VALUES ('conflict_aea95ffa9165', 'api port', 'is', 'open', 2.0, NULL, NULL);
INSERT INTO quarantine (ts, table_name, row_key, row, reason) VALUES (4.0, 'messages', 's1#9', '{"message": "{not json"}', 'message: bad');
