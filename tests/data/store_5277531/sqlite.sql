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
    , version INTEGER NOT NULL DEFAULT 0);
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
CREATE TABLE quarantine (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        table_name TEXT NOT NULL,
        row_key TEXT NOT NULL,
        row TEXT NOT NULL,
        reason TEXT NOT NULL
    );
CREATE TABLE beliefs (
    id TEXT PRIMARY KEY, statement TEXT NOT NULL, subject TEXT, predicate TEXT, value TEXT,
    status TEXT NOT NULL, session_id TEXT, step INTEGER, tool_call_id TEXT, source TEXT,
    created_at REAL NOT NULL, reinforced INTEGER NOT NULL DEFAULT 0, retracted_at REAL
);
CREATE TABLE belief_conflicts (
    id TEXT PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL, status TEXT NOT NULL,
    opened_at REAL NOT NULL, resolved_at REAL, kept TEXT
);
CREATE UNIQUE INDEX beliefs_one_active_claim ON beliefs (subject, predicate, value)
    WHERE status = 'active' AND subject IS NOT NULL;
CREATE UNIQUE INDEX beliefs_one_active_statement ON beliefs (lower(statement))
    WHERE status = 'active' AND subject IS NULL;
CREATE UNIQUE INDEX belief_conflicts_one_open ON belief_conflicts
    (subject, predicate) WHERE status = 'open'
;
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
PRAGMA user_version = 3;
