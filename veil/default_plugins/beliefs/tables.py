"""The tables of the beliefs default plugin: ``beliefs`` and ``belief_conflicts``, a view derived
from the ``belief.*`` and ``conflict.resolve`` events of the append-only log, their migrations
(:func:`migrations`, applied by the store at open through
``register_migrations``) and every statement run on them.

The view is rebuilt from the log at any time (``veil doctor --repair``:
:meth:`~veil.default_plugins.beliefs.store.BeliefStore.rebuild` drops it, applies its migrations
again and replays the log), so a change of its tables is a new migration, which a rebuild applies
too. The plugin's
logic (which statements conflict, what an event does to the view) calls these functions with a
connection: the store's ``reader`` for reads, an open ``Store.transaction()`` for writes. The
same statements run on both engines (``?`` placeholders).

Rows are returned as dicts of the columns: ``beliefs``: ``id, statement, subject, predicate,
value, status`` (``active`` / ``retracted``) ``, session_id, step, tool_call_id, source,
created_at, reinforced, retracted_at``; ``belief_conflicts``: ``id, subject, predicate,
status`` (``open`` / ``resolved``) ``, opened_at, resolved_at, kept``. Times are Unix seconds.
"""

from __future__ import annotations

import logging
from typing import Any

from veil import Migration

log = logging.getLogger(__name__)


VIEW_SQL = """
CREATE TABLE IF NOT EXISTS beliefs (
    id TEXT PRIMARY KEY, statement TEXT NOT NULL, subject TEXT, predicate TEXT, value TEXT,
    status TEXT NOT NULL, session_id TEXT, step INTEGER, tool_call_id TEXT, source TEXT,
    created_at REAL NOT NULL, reinforced INTEGER NOT NULL DEFAULT 0, retracted_at REAL
);
CREATE TABLE IF NOT EXISTS belief_conflicts (
    id TEXT PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL, status TEXT NOT NULL,
    opened_at REAL NOT NULL, resolved_at REAL, kept TEXT
)
"""

PG_VIEW_SQL = """
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
)
"""
""":data:`VIEW_SQL` in PostgreSQL's types (times as double precision, text compared byte by
byte as SQLite does)."""

UNIQUE_SQL = """
CREATE UNIQUE INDEX IF NOT EXISTS beliefs_one_active_claim ON beliefs (subject, predicate, value)
    WHERE status = 'active' AND subject IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS beliefs_one_active_statement ON beliefs (lower(statement))
    WHERE status = 'active' AND subject IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS belief_conflicts_one_open ON belief_conflicts
    (subject, predicate) WHERE status = 'open'
"""
"""What keeps the view free of duplicates when writers race, on both engines (SQLite and
PostgreSQL run these statements as written; ``IF NOT EXISTS``: a database an older veil made
has them already): one *active* belief per claim (subject, predicate,
value), one per statement (ignoring ASCII case) among those without a claim, and one *open*
conflict per subject and predicate. A write that would break one is skipped (``ON CONFLICT DO
NOTHING``, :func:`insert_belief`, :func:`insert_conflict`) and the caller reinforces the belief
that is there instead. A retracted belief or a resolved conflict holds nothing back."""

EVENT_KINDS = ("belief.assert", "belief.reinforce", "belief.retract", "conflict.resolve")
"""The event kinds the view is derived from."""


def create_view(conn: Any, engine: str) -> None:
    """Create the view tables (:data:`VIEW_SQL`, or :data:`PG_VIEW_SQL` on PostgreSQL) where
    they are missing, inside the caller's transaction. ``IF NOT EXISTS``: the tables an older
    veil created outside a migration are adopted as they are, rows kept."""
    for stmt in (PG_VIEW_SQL if engine == "postgresql" else VIEW_SQL).split(";"):
        if stmt.strip():
            conn.execute(stmt)


def create_unique_indexes(conn: Any) -> None:
    """Create :data:`UNIQUE_SQL`'s indexes where they are missing (inside the caller's
    transaction).

    Raises:
        IntegrityError (the engine's): the view holds duplicates (:func:`has_duplicates`)."""
    for stmt in UNIQUE_SQL.split(";"):
        if stmt.strip():
            conn.execute(stmt)


def has_duplicates(conn: Any) -> bool:
    """Whether the view holds rows :data:`UNIQUE_SQL` would refuse (a view written before the
    unique indexes existed): two active beliefs with one claim, or without a claim with one
    statement ignoring case, or two open conflicts about one subject and predicate."""
    row = conn.execute(
        "SELECT 1 FROM beliefs WHERE status = 'active' AND subject IS NOT NULL"
        " GROUP BY subject, predicate, value HAVING count(*) > 1"
        " UNION ALL SELECT 1 FROM beliefs WHERE status = 'active' AND subject IS NULL"
        " GROUP BY lower(statement) HAVING count(*) > 1"
        " UNION ALL SELECT 1 FROM belief_conflicts WHERE status = 'open'"
        " GROUP BY subject, predicate HAVING count(*) > 1"
    ).fetchone()
    return row is not None


def drop_view(conn: Any) -> None:
    """Drop the view tables (inside the caller's transaction; the event log stays)."""
    conn.execute("DROP TABLE IF EXISTS beliefs")
    conn.execute("DROP TABLE IF EXISTS belief_conflicts")


def clear(conn: Any) -> None:
    """Empty the view tables (inside the caller's transaction; the event log stays)."""
    conn.execute("DELETE FROM beliefs")
    conn.execute("DELETE FROM belief_conflicts")


PLUGIN_NAME = "veil.beliefs"
"""The key of the view's versions in the store's ``plugin_migrations``."""


def migrations() -> list[Migration]:
    """The view's tables, version by version (``register_migrations``; the store applies the
    ones a database lacks at open, :meth:`veil.core.store.Store.migrate_plugins`).

    Version 1 is what veil created before plugins owned their tables, so a database made then is
    adopted unchanged: the tables ``IF NOT EXISTS``; then, where the view holds duplicates from
    before the unique indexes existed, it is emptied and replayed from the log (the replay merges
    them: a second assertion of an active claim reinforces it); then the unique indexes.
    A change of the tables is a new version appended here (a released one is never edited)."""

    def view(conn: Any, engine: str) -> None:
        from veil.default_plugins.beliefs.store import replay

        create_view(conn, engine)
        if has_duplicates(conn):
            log.warning("duplicate beliefs in the view; rebuilding it from the log")
            clear(conn)
            create_unique_indexes(conn)
            replay(conn)
        else:
            create_unique_indexes(conn)

    return [
        Migration(
            PLUGIN_NAME,
            1,
            view,
            "beliefs and belief_conflicts, one active belief per claim",
        )
    ]


def belief_events(conn: Any) -> list[Any]:
    """Every event of the :data:`EVENT_KINDS` in log order, as stored (rows read by name:
    ``seq, ts, session_id, step, tool_call_id, kind, payload`` JSON text)."""
    return conn.execute(
        "SELECT * FROM events WHERE kind IN ('belief.assert','belief.reinforce',"
        "'belief.retract','conflict.resolve') ORDER BY seq"
    ).fetchall()


def insert_belief(
    conn: Any,
    belief_id: str,
    statement: str,
    subject: str | None,
    predicate: str | None,
    value: str | None,
    *,
    session_id: str | None,
    step: int | None,
    tool_call_id: str | None,
    source: str | None,
    created_at: float,
) -> bool:
    """Add an active belief, unless an active one already makes the same claim (or, without a
    claim, the same statement): :data:`UNIQUE_SQL`.

    Returns:
        Whether it was added (False: the caller reinforces :func:`active_claim` /
        :func:`active_statement` instead; also False when ``belief_id`` is taken, which fresh
        ids never are)."""
    return (
        conn.execute(
            "INSERT INTO beliefs (id, statement, subject, predicate, value, status, session_id,"
            " step, tool_call_id, source, created_at) VALUES (?,?,?,?,?,'active',?,?,?,?,?)"
            " ON CONFLICT DO NOTHING",
            (
                belief_id,
                statement,
                subject,
                predicate,
                value,
                session_id,
                step,
                tool_call_id,
                source,
                created_at,
            ),
        ).rowcount
        == 1
    )


def reinforce(conn: Any, belief_id: str) -> None:
    """Count one more assertion of a belief (``reinforced`` + 1)."""
    conn.execute("UPDATE beliefs SET reinforced = reinforced + 1 WHERE id = ?", (belief_id,))


def retract(conn: Any, belief_id: str, ts: float) -> None:
    """Mark a belief retracted at ``ts`` (the row stays)."""
    conn.execute(
        "UPDATE beliefs SET status='retracted', retracted_at=? WHERE id=?", (ts, belief_id)
    )


def resolve_conflict(conn: Any, conflict_id: str, kept: str, ts: float) -> None:
    """Mark a conflict resolved at ``ts``, keeping belief ``kept``."""
    conn.execute(
        "UPDATE belief_conflicts SET status='resolved', resolved_at=?, kept=? WHERE id=?",
        (ts, kept, conflict_id),
    )


def open_conflict_id(conn: Any, subject: str, predicate: str) -> str | None:
    """The id of the open conflict about ``subject`` / ``predicate``, or None."""
    row = conn.execute(
        "SELECT id FROM belief_conflicts WHERE subject=? AND predicate=? AND status='open'",
        (subject, predicate),
    ).fetchone()
    return None if row is None else row[0]


def insert_conflict(conn: Any, conflict_id: str, subject: str, predicate: str, ts: float) -> None:
    """Open a conflict about ``subject`` / ``predicate`` at ``ts``; nothing when one is open
    about them already (:data:`UNIQUE_SQL`: another writer opened it meanwhile)."""
    conn.execute(
        "INSERT INTO belief_conflicts (id, subject, predicate, status, opened_at)"
        " VALUES (?, ?, ?, 'open', ?) ON CONFLICT DO NOTHING",
        (conflict_id, subject, predicate, ts),
    )


def conflict(conn: Any, conflict_id: str) -> dict[str, Any] | None:
    """One conflict's row, or None."""
    row = conn.execute("SELECT * FROM belief_conflicts WHERE id = ?", (conflict_id,)).fetchone()
    return None if row is None else dict(row)


def open_conflicts(conn: Any) -> list[dict[str, Any]]:
    """Open conflicts' rows, oldest first (ties by id)."""
    return [
        dict(r)
        for r in conn.execute(
            "SELECT * FROM belief_conflicts WHERE status='open' ORDER BY opened_at, id"
        )
    ]


def open_conflict_of(conn: Any, belief_id: str) -> dict[str, Any] | None:
    """``{"id", "subject", "predicate"}`` of the open conflict about the subject and predicate
    of belief ``belief_id``, or None."""
    row = conn.execute(
        "SELECT c.id, c.subject, c.predicate FROM belief_conflicts c JOIN beliefs b ON"
        " b.subject=c.subject AND b.predicate=c.predicate WHERE b.id=? AND c.status='open'",
        (belief_id,),
    ).fetchone()
    return None if row is None else dict(row)


def active_claim(conn: Any, subject: str, predicate: str, value: str) -> str | None:
    """The id of an active belief with this exact claim, or None."""
    row = conn.execute(
        "SELECT id FROM beliefs WHERE status='active' AND subject=? AND predicate=? AND value=?",
        (subject, predicate, value),
    ).fetchone()
    return None if row is None else row["id"]


def active_statement(conn: Any, statement: str) -> str | None:
    """The id of an active belief whose statement equals ``statement`` ignoring case (SQL
    ``lower``: ASCII letters), or None."""
    row = conn.execute(
        "SELECT id FROM beliefs WHERE status='active' AND lower(statement)=?",
        (statement.lower(),),
    ).fetchone()
    return None if row is None else row["id"]


def active_about(conn: Any, subject: str, predicate: str) -> list[dict[str, Any]]:
    """Active beliefs about ``subject`` / ``predicate``, oldest first (ties by id)."""
    rows = conn.execute(
        "SELECT * FROM beliefs WHERE subject=? AND predicate=? AND status='active'"
        " ORDER BY created_at, id",
        (subject, predicate),
    ).fetchall()
    return [dict(r) for r in rows]


def beliefs(conn: Any, include_retracted: bool = False) -> list[dict[str, Any]]:
    """Beliefs' rows, oldest first (ties by id); active ones only unless ``include_retracted``."""
    sql = "SELECT * FROM beliefs" + ("" if include_retracted else " WHERE status='active'")
    return [dict(r) for r in conn.execute(sql + " ORDER BY created_at, id")]
