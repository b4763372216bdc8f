"""What differs between the store's two engines, SQLite and PostgreSQL, in one place.

Every statement of the store package is written once. Most of them are plain SQL that both
engines run as written (``?`` placeholders: the PostgreSQL connection turns them into ``%s``,
:mod:`veil.core.store.postgres`). The few pieces that cannot be written once are attributes and
methods of a :class:`Dialect`: SQLite's ``typeof`` checks of damaged columns, reading text as
bytes, ``INSERT OR REPLACE``, the full-text and vector searches, the begin statements, the
lock that serialises writers of the recall index, and the error classes.

A statement function finds the engine of the connection it was given with :func:`dialect_of`:
a PostgreSQL connection carries its dialect (``conn.dialect``); a SQLite connection (``sqlean``
or ``sqlite3``, which take no attributes) is anything else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any


class Dialect:
    """The SQL of one engine where it cannot be shared (SQLite's, as veil wrote it before
    PostgreSQL, by default; :class:`PostgresDialect` overrides).

    Attributes:
        name: ``"sqlite"`` or ``"postgresql"``.
        begin_write: opens a transaction that writes (SQLite takes the write lock at once, so
            a read-modify-write inside cannot interleave with another writer).
        begin_read: opens a transaction whose reads all see one snapshot.
    """

    name = "sqlite"
    begin_write = "BEGIN IMMEDIATE"
    begin_read = "BEGIN"

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        """The exception classes a unique or foreign-key violation raises on this engine."""
        from veil.core.store.connection import sqlite3

        return (sqlite3.IntegrityError,)

    def text_as_bytes(self, column: str) -> str:
        """SQL that reads ``column`` as bytes when it holds text: SQLite stores whatever bytes it
        was given, and fetching invalid UTF-8 as text makes the whole query fail."""
        return f"CASE WHEN typeof({column}) = 'text' THEN CAST({column} AS BLOB) ELSE {column} END"

    def blob(self, column: str) -> str:
        """SQL that reads a text column as bytes (``CAST AS BLOB``)."""
        return f"CAST({column} AS BLOB)"

    def sound_version(self) -> str:
        """SQL: the session row's ``version`` is a whole number >= 0 (a SQLite column can hold
        text or a negative number written by another tool)."""
        return "(typeof(version) = 'integer' AND version >= 0)"

    def replace_rows(
        self, conn: Any, table: str, key: str, columns: Sequence[str], rows: list[Sequence[Any]]
    ) -> None:
        """Insert ``rows`` into ``table``, each replacing the row with the same ``key`` value
        (SQLite's ``INSERT OR REPLACE``: the old row is deleted first, with its foreign-key
        cascades, and the new one gets a new rowid)."""
        sql = (
            f"INSERT OR REPLACE INTO {table} ({', '.join(columns)})"
            f" VALUES ({', '.join('?' for _ in columns)})"
        )
        if len(rows) == 1:
            conn.execute(sql, rows[0])
        else:
            conn.executemany(sql, rows)

    def table_columns(self, conn: Any, table: str) -> list[str]:
        """The column names of ``table`` in their order."""
        return [c[1] for c in conn.execute(f"PRAGMA table_info({table})").fetchall()]

    def lock_recall_index(self, conn: Any) -> None:
        """Serialise the writers of ``recall_index`` until the caller's transaction ends, where
        the engine needs it: SQLite numbers revisions and rows ``max + 1``, and ``BEGIN
        IMMEDIATE`` already admits one writer at a time, so nothing to do here; PostgreSQL
        needs none (:meth:`new_index_rows`, :meth:`index_changes`)."""

    def new_index_rows(self, conn: Any, count: int) -> list[int]:
        """``count`` unused ``recall_index.row`` numbers, ascending (SQLite: ``max + 1`` on,
        as it numbers an ``INTEGER PRIMARY KEY`` left out; the caller's transaction holds the
        write lock)."""
        if count <= 0:
            return []
        top = int(conn.execute("SELECT coalesce(max(row), 0) FROM recall_index").fetchone()[0])
        return list(range(top + 1, top + 1 + int(count)))

    def index_changes(self, conn: Any, since: int) -> tuple[list[Any], int]:
        """``(entries changed after position since, the position to read from next time)``:
        SQLite's position is the highest revision number (revisions are ``max + 1`` under the
        write lock, so they commit in order). The top is read first: an entry committed between
        the two reads is read now and again next time, never missed."""
        top = int(conn.execute("SELECT coalesce(max(rev), 0) FROM recall_index").fetchone()[0])
        if top <= since:
            return [], since
        rows = conn.execute(
            f"SELECT {INDEX_CHANGE_COLUMNS} FROM recall_index WHERE rev > ?", (since,)
        ).fetchall()
        return rows, top

    def lock_schema(self, conn: Any) -> None:
        """Serialise changes of the schema (tables created at run time) until the caller's
        transaction ends. SQLite: ``BEGIN IMMEDIATE`` already does."""

    def insert_returning(self, conn: Any, sql: str, params: Sequence[Any], column: str) -> int:
        """Run an ``INSERT`` and return the integer key it gave the new row (SQLite: the
        cursor's ``lastrowid``, the ``INTEGER PRIMARY KEY`` ``column``)."""
        return int(conn.execute(sql, params).lastrowid)

    # -- full text (recall_fts) -----------------------------------------------------------------

    def add_text_entries(self, conn: Any, entries: list[tuple[int, str, str]]) -> None:
        """Put ``(row, content, meta)`` into the full-text index (FTS5, contentless)."""
        conn.executemany("INSERT INTO recall_fts (rowid, content, meta) VALUES (?, ?, ?)", entries)

    def delete_text_entry(self, conn: Any, row: int) -> None:
        """Take entry ``row`` out of the full-text index."""
        conn.execute("DELETE FROM recall_fts WHERE rowid = ?", (row,))

    def keyword_query(
        self, terms: list[str], meta_weight: float
    ) -> tuple[str, str, list[Any]] | None:
        """``(score SQL, match condition SQL, its parameters)`` for a search OR-ing ``terms``:
        FTS5's ``-bm25`` over ``recall_fts`` (higher is better), ``meta`` weighted
        ``meta_weight`` against 1.0 for the content; None for no terms. The select reads
        ``rowid`` (the entry's row) from ``recall_fts``."""
        match = fts5_match(terms)
        if match is None:
            return None
        return f"-bm25(recall_fts, 1.0, {float(meta_weight)})", "recall_fts MATCH ?", [match]

    def fts_row(self) -> str:
        """The name of the entry's row number in ``recall_fts``."""
        return "rowid"

    def tags_contain(self, column: str, count: int) -> tuple[str, str]:
        """``(FROM addition, condition)`` selecting rows whose JSON list ``column`` holds one of
        ``count`` lowercase values given as parameters (compared lowercase)."""
        marks = ",".join("?" * count)
        return f", json_each({column}) j", f"lower(j.value) IN ({marks})"

    # -- vectors --------------------------------------------------------------------------------

    def tags_exist(self, column: str, count: int) -> str:
        """A condition: the JSON list ``column`` holds one of ``count`` lowercase values given
        as parameters (compared lowercase)."""
        marks = ",".join("?" * count)
        return f"EXISTS (SELECT 1 FROM json_each({column}) j WHERE lower(j.value) IN ({marks}))"

    def nearest_warm(
        self, conn: Any, vector: bytes, model: str, k: int, where: str = "", args: Sequence = ()
    ) -> list[Any]:
        """Rows ``(item_id, cosine)`` of the ``k`` warm, unforgotten items nearest to ``vector``
        (float32 bytes) by their stored ``model`` embedding, best first, ties by entry row:
        exact, by sqlite-vec's ``vec_distance_cosine``. ``where``: more conditions on the
        ``recall_index r`` row (`` AND ...``), with their ``args``.

        Raises:
            VeilError: sqlite-vec cannot be loaded into this connection."""
        from veil.core.store.connection import load_sqlite_vec

        load_sqlite_vec(conn)
        return conn.execute(
            "SELECT r.item_id, 1.0 - vec_distance_cosine(e.vector, ?) AS cos"
            " FROM recall_index r JOIN embeddings e ON e.key = r.embed_key"
            f" WHERE r.tier = 'warm' AND r.forgotten = 0 AND e.model = ?{where}"
            " ORDER BY cos DESC, r.row LIMIT ?",
            (vector, model, *args, k),
        ).fetchall()

    def add_embeddings(self, conn: Any, rows: list[tuple[str, str, int, bytes]]) -> None:
        """Store ``(key, model, dim, float32 bytes)`` rows; a key already stored is kept."""
        conn.executemany(
            "INSERT OR IGNORE INTO embeddings (key, model, dim, vector) VALUES (?,?,?,?)", rows
        )


def fts5_match(terms: list[str]) -> str | None:
    """An FTS5 ``MATCH`` expression OR-ing ``terms`` (each a quoted string, so FTS5 syntax in a
    term is inert and the table's tokenizer applies); None for no terms.

    ``fts5_match(["parse_config", "tests"]) == '"parse_config" OR "tests"'``: an identifier
    with ``_`` becomes an FTS5 phrase of its parts, matching where they occur together.
    """
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms if t]
    return " OR ".join(quoted) if quoted else None


INDEX_CHANGE_COLUMNS = "row, item_id, session_id, seq, tier, tags, embed_key, forgotten, fts"
"""The columns of a ``recall_index`` entry a reader of changes gets (see
:func:`veil.core.store.recall_tables.index_changes`)."""


SQLITE = Dialect()
"""SQLite's dialect (``.veil/context.db``)."""


def dialect_of(conn: Any) -> Dialect:
    """The dialect of a store connection: a PostgreSQL connection's own, else :data:`SQLITE`."""
    return getattr(conn, "dialect", SQLITE)


def lock_key(*parts: str) -> int:
    """A signed 64-bit key for a PostgreSQL advisory lock, from the SHA-256 of ``parts`` joined
    by NUL (one project's session id, say): collisions would only make a free session look busy,
    at a chance of about n² / 2^65 for n keys held at once."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
