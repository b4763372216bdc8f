"""Make this folder's fixtures: a store as veil at commit 5277531 (before plugins owned their
tables) left it, for tests/test_plugin_tables.py's upgrade tests. Run with that commit's code
first on the path::

    git archive 5277531 veil | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python generate.py

* ``sqlite.sql``: the dump (``iterdump``) of a ``.veil/context.db`` that commit's code built and
  filled: a session with two messages and an item, three beliefs with an open conflict, a row
  in ``quarantine``; its ``PRAGMA user_version`` (3) last.
* ``postgresql.sql``: that commit's PostgreSQL schema as its code creates it (the migrations
  verbatim, then the beliefs view and its unique indexes), and the same rows as inserts.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import sqlean as sqlite3  # the stdlib's may be too old for FTS5's contentless_delete

import veil.core.store.schema as schema

HERE = Path(__file__).parent
COPIED = ("sessions", "messages", "items", "events", "beliefs", "belief_conflicts", "quarantine")
IDENTITY = {"events": "seq", "quarantine": "seq"}  # PostgreSQL numbers them itself


def fill(path: Path) -> None:
    from veil.core.store import Store, belief_tables
    from veil.core.types import ContextItem
    from veil.default_plugins.beliefs.store import BeliefStore

    store = Store(path, write_behind=False)
    store.create_session("s1", "default", "m", {"agent": "default"})
    store.append_message("s1", 0, 0, {"role": "user", "content": "what port?"})
    store.append_message("s1", 1, 0, {"role": "assistant", "content": "port 80"})
    store.add_items([ContextItem(id="item_1", session_id="s1", content="port 80", tokens=3)])
    beliefs = BeliefStore(store)
    beliefs.assert_fact(None, "api port is 80", ts=1.0)
    beliefs.assert_fact(None, "api port is 81", ts=2.0)
    beliefs.assert_fact(None, "the cache lives in /tmp/cache", ts=3.0)
    with store.transaction() as conn:
        belief_tables.create_tables(conn)  # as BeliefStore does: a no-op here
        conn.execute(
            "INSERT INTO quarantine (ts, table_name, row_key, row, reason)"
            " VALUES (4.0, 'messages', 's1#9', '{\"message\": \"{not json\"}', 'message: bad')"
        )
    store.close()


def dump_schema(conn: sqlite3.Connection) -> list[str]:
    """The ``CREATE`` statements of a SQLite database in the order they ran (``sqlite_master``'s
    rowid), without SQLite's own objects and FTS5's shadow tables (its ``CREATE VIRTUAL TABLE``
    makes them). sqlean has no ``iterdump``; the stdlib's SQLite may not know FTS5's options."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        " ORDER BY rowid"
    ).fetchall()
    return [f"{sql};" for name, sql in rows if not name.startswith("recall_fts_")]


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def main() -> None:
    assert len(schema.MIGRATIONS) == 3, "run with commit 5277531's code first on the path"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "context.db"
        fill(db)
        conn = sqlite3.connect(db)
        dump = dump_schema(conn)
        conn.row_factory = sqlite3.Row
        inserts = []
        for table in COPIED:
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
                cols = [c for c in row.keys() if c != IDENTITY.get(table)]  # noqa: SIM118
                values = ", ".join(literal(row[c]) for c in cols)
                inserts.append(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({values});")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
    (HERE / "sqlite.sql").write_text(
        "\n".join([*dump, *inserts, f"PRAGMA user_version = {version};"]) + "\n"
    )
    from veil.core.store import belief_tables

    parts = [f"-- migration {i + 1}\n{m.strip()};" for i, m in enumerate(schema.PG_MIGRATIONS)]
    parts.append(
        "-- the beliefs view (belief_tables.create_tables)\n"
        + belief_tables.PG_VIEW_SQL.strip()
        + ";"
    )
    parts.append(belief_tables.UNIQUE_SQL.strip() + ";")
    parts.append("-- rows\n" + "\n".join(inserts))
    (HERE / "postgresql.sql").write_text("\n\n".join(parts) + "\n")
    print(
        f"{len(inserts)} rows; PostgreSQL schema version {len(schema.PG_MIGRATIONS)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
