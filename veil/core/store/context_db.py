"""The session store: sessions, their full message history, context items and the
append-only event log, in ``.veil/context.db`` (SQLite) or a project's schema of a PostgreSQL
database (``store.url``; :mod:`veil.core.store.postgres`).

The full message history is never deleted or rewritten (compaction and eviction change what is
*sent*, not what is *stored*). Every change that must land together runs in one transaction
(SQLite: ``BEGIN IMMEDIATE``). SQLite: one connection per thread (WAL lets readers run beside a
writer); PostgreSQL: one :class:`~veil.core.store.postgres.PgConnection` over a pool.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veil.core.errors import ConfigError, SessionConflict, SessionNotFound
from veil.core.jsonio import loads
from veil.core.store import connection, plugin_tables, row_codec
from veil.core.store.dialect import SQLITE, Dialect, dialect_of
from veil.core.store.plugin_tables import Migration
from veil.core.store.write_behind import WriteBehind
from veil.core.text import clean_message
from veil.core.types import ContextItem, Message

log = logging.getLogger("veil.store")

ITEM_COLUMNS = (
    "id",
    "session_id",
    "message_index",
    "step",
    "tool_call_id",
    "kind",
    "source",
    "tier",
    "content",
    "tags",
    "targets",
    "tokens",
    "access_count",
    "stability",
    "difficulty",
    "created_at",
    "last_access",
    "cognitive_weight",
    "pinned",
    "loaded_by_hand",
    "outcome",
)


_LISTED_COLUMNS = (
    "id",
    "agent",
    "model",
    "title",
    "created_at",
    "updated_at",
    "closed_at",
    "compact_summary",
    "compact_size",
    "version",
)
"""The columns a listing reads: never the JSON ones, so a damaged snapshot or state (which only
a load needs) cannot hide a session from ``veil sessions`` or ``GET /sessions``."""


def _listed(dialect: Dialect) -> str:
    """:data:`_LISTED_COLUMNS` as a select list, free text read as bytes where the engine needs
    it (:meth:`Dialect.text_as_bytes`)."""
    return ", ".join(
        f"{dialect.text_as_bytes(c)} AS {c}" if c in row_codec.SESSION_TEXT_COLUMNS else c
        for c in _LISTED_COLUMNS
    )


_CONTENT_FIELDS = frozenset({"compact_summary", "compact_size", "state"})
"""Session columns whose change bumps the session's ``version`` (history and state; not
title, model or closed_at, which no later write depends on)."""


@dataclass
class StoredSession:
    """A session as :meth:`Store.load_session` read it, all in one read transaction.

    Attributes:
        row: as :meth:`Store.get_session` gives it; a damaged ``snapshot`` or ``state`` is
            ``{}`` there and named in ``row["damaged"]``.
        messages: the full history as ``[(step, message), ...]``, a stand-in
            (:func:`veil.core.store.row_codec.fill_damaged`) where a row is damaged or missing.
        problems: one line per damaged row or column, naming it.
    """

    row: dict[str, Any]
    messages: list[tuple[int, Message]]
    problems: list[str] = field(default_factory=list)


_TIER_COUNTS = "SELECT tier, COUNT(*) AS n FROM items WHERE session_id = ? GROUP BY tier"


class Store:
    """Persistence for sessions, messages, items and events, on SQLite or PostgreSQL.

    Args:
        path: database file (``.veil/context.db``), ``":memory:"``, or a PostgreSQL URL
            (``postgresql://user:password@host:port/database``).
        write_behind: apply :meth:`write_behind` jobs on a background thread (a file or
            PostgreSQL database; ``:memory:`` has one connection, so they run at once).
        project: with a PostgreSQL URL, the project whose rows this store reads and writes
            (its own schema: :func:`veil.core.store.postgres.schema_name`); required there.
        pool_size: with a PostgreSQL URL, most connections this process opens.
        synchronous_commit: with a PostgreSQL URL, wait for the server's log flush at every
            commit (:class:`~veil.core.store.postgres.PgDatabase`).
        migrations: the plugins' tables (the ``register_migrations`` hook's answers, which
            :class:`veil.core.app.Veil` passes): applied at open, after the core's schema
            (:meth:`migrate_plugins`).

    Attributes:
        path: the file, or the URL without its password and the project (for messages).
        dialect: the engine's :class:`~veil.core.store.dialect.Dialect`.
        database: the open :class:`~veil.core.store.postgres.PgDatabase`, or None on SQLite.

    Raises:
        ConfigError: the file exists but is not a SQLite database (names the file); a
            PostgreSQL URL without a project; ``migrations`` that :meth:`migrate_plugins`
            refuses.
        StoreUnavailable: the PostgreSQL server cannot be reached.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        write_behind: bool = True,
        project: str | None = None,
        pool_size: int = 10,
        synchronous_commit: bool = False,
        migrations: Sequence[Migration] = (),
    ) -> None:
        from veil.core.store import postgres

        self._local = threading.local()
        self._memory_conn: Any = None
        # SQLite: one writer at a time in this process (``:memory:`` shares one connection
        # between threads; a file's writers would otherwise spin on its lock). PostgreSQL: each
        # thread's transaction has a connection of its own and the server orders the writers,
        # so nothing is serialised here (set below)
        self._write_lock: Any = threading.RLock()
        self._session_select: str | None = None
        self._behind: WriteBehind | None = None
        self.database: postgres.PgDatabase | None = None
        self.dialect: Dialect = SQLITE
        self._pg: postgres.PgConnection | None = None
        if postgres.is_url(path):
            if not project:
                raise ConfigError("store.project: a PostgreSQL store needs a project name")
            self.database = postgres.PgDatabase(
                str(path), project, pool_size=pool_size, synchronous_commit=synchronous_commit
            )
            self._pg = postgres.PgConnection(self.database)
            self.dialect = self.database.dialect
            self.path = self.database.name
            self._write_lock = contextlib.nullcontext()
        else:
            self.path = str(path)
        self._listed = _listed(self.dialect)
        self.conn  # open now so a broken file fails at start, naming the file  # noqa: B018
        if migrations:
            self.migrate_plugins(migrations)
        if write_behind and self._pg is not None:
            pg = self._pg
            self._behind = WriteBehind(lambda: pg, self.path)
        elif write_behind and self.path != ":memory:":
            self._behind = WriteBehind(
                lambda: connection.connect(self.path, migrate=False), self.path
            )

    def migrate_plugins(self, migrations: Iterable[Migration]) -> dict[str, int]:
        """Apply the plugins' table migrations this database has not applied yet: per plugin in
        name order, each version in order in one write transaction with its row in
        ``plugin_migrations``, under the schema's lock (:mod:`veil.core.store.plugin_tables`).
        Applying the same list again changes nothing.

        Returns:
            ``{plugin: version its tables are at}`` for the plugins in ``migrations``.

        Raises:
            ConfigError: a plugin's versions repeat or leave a gap, or this database holds a
                newer version of a plugin's tables than the plugin declares (names both).
            Exception: a migration failed (the engine's error; that version is rolled back,
                earlier ones stay).
        """
        reached: dict[str, int] = {}
        for plugin, steps in plugin_tables.plan(migrations).items():
            with self.read_snapshot() as conn:
                current = plugin_tables.applied_version(conn, plugin)
            while current < len(steps):
                with self.transaction() as conn:
                    self.dialect.lock_schema(conn)
                    # another process may have applied it between the read and the lock
                    current = plugin_tables.applied_version(conn, plugin)
                    if current < len(steps):
                        step = steps[current]
                        step.apply(conn, self.engine)
                        plugin_tables.record_version(conn, plugin, step.version)
                        current = step.version
                        log.info(
                            "%s: tables of %s at version %d%s",
                            self.path,
                            plugin,
                            current,
                            f" ({step.description})" if step.description else "",
                        )
            if current > len(steps):
                raise ConfigError(
                    f"{self.path}: the tables of plugin {plugin!r} are at version {current}, "
                    f"newer than the plugin knows ({len(steps)}); upgrade the plugin"
                )
            reached[plugin] = current
        return reached

    def forget_plugin_migrations(self, plugin: str) -> None:
        """Forget which versions of ``plugin``'s tables this database applied, so the next
        :meth:`migrate_plugins` applies them all again: for a plugin whose tables are a view it
        drops and derives again (the beliefs), called in the same :meth:`transaction` as the
        drop."""
        with self.transaction() as conn:
            self.dialect.lock_schema(conn)
            plugin_tables.forget(conn, plugin)

    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.dialect.name

    # -- connections ------------------------------------------------------------------------

    @property
    def conn(self) -> Any:
        """This thread's connection (one shared connection for ``:memory:``), once every queued
        :meth:`write_behind` job has landed (outside a transaction: a block that holds the
        write lock cannot wait for the writer thread, which needs it).

        Raises:
            WriteBehindError: a queued write failed (it was rolled back)."""
        behind = getattr(self, "_behind", None)  # None while __init__ opens the connection
        pending = behind is not None and (behind.pending or behind.failed)
        if pending and not getattr(self._local, "depth", 0):
            behind.drain()
        return self._thread_conn()

    @property
    def reader(self) -> Any:
        """This thread's connection for reads of tables that :meth:`write_behind` jobs never
        write (sessions, messages, beliefs, usage, embeddings), without waiting for queued
        jobs: a prompt built right after an eviction pass reads the open belief conflicts while
        the writer thread records the pass. The jobs write ``items``, ``events``,
        ``recall_index``, ``recall_fts`` and ``cold_content``: read those through
        :attr:`conn`."""
        return self._thread_conn()

    def _thread_conn(self) -> Any:
        if self._pg is not None:
            return self._pg
        if self.path == ":memory:":
            if self._memory_conn is None:
                self._memory_conn = connection.connect(":memory:")
            return self._memory_conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = connection.connect(self.path)
            except connection.sqlite3.DatabaseError as exc:
                raise ConfigError(f"{self.path}: not a veil database ({exc})") from exc
            self._local.conn = conn
        return conn

    def execute_one(self, sql: str, params: tuple | list = ()) -> None:
        """Run one writing statement, atomic on its own (SQLite wraps a statement outside a
        transaction in its own), or as part of this thread's open :meth:`transaction`.

        Cheaper than a :meth:`transaction` holding one statement: no ``BEGIN IMMEDIATE`` and
        ``COMMIT`` statements. Queued :meth:`write_behind` jobs land first.

        Raises:
            sqlite3.Error: the statement failed (nothing of it was written).
        """
        conn = self.conn  # drains the write-behind queue
        with self._write_lock:
            conn.execute(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """Run a block in one ``BEGIN IMMEDIATE`` transaction (rolled back on any exception).

        Re-entrant: a block opened inside another on the same thread joins the outer
        transaction (one commit for both; an exception rolls back both). Queued
        :meth:`write_behind` jobs land first."""
        yield from self._own_transaction(self.dialect.begin_write, on_error="ROLLBACK")

    @contextmanager
    def read_snapshot(self) -> Iterator[Any]:
        """Run reads in one read transaction: they all see the store as of one moment (WAL), even
        while another process writes. Joins this thread's open transaction if there is one.
        Queued :meth:`write_behind` jobs land first."""
        # reads change nothing: the transaction ends with COMMIT even when the block raises
        yield from self._own_transaction(self.dialect.begin_read, on_error="COMMIT")

    def _own_transaction(self, begin: str, *, on_error: str) -> Iterator[Any]:
        """The body of :meth:`transaction` and :meth:`read_snapshot`: under the write lock,
        join this thread's open transaction, or open one with ``begin``, yield the connection,
        end with ``COMMIT`` (``on_error`` when the block raises) and re-raise."""
        conn = self.conn  # drains the write-behind queue before taking the lock
        with self._write_lock:  # ":memory:" shares one connection between threads
            if conn.in_transaction:
                yield conn
                return
            # reads and writes inside do not wait for the writer thread, which may need the
            # write lock this block holds
            self._local.depth = getattr(self._local, "depth", 0) + 1
            try:
                conn.execute(begin)
                try:
                    yield conn
                except BaseException:
                    conn.execute(on_error)
                    raise
                conn.execute("COMMIT")
            finally:
                self._local.depth -= 1

    def write_behind(
        self,
        job: Callable[[Any], None],
        what: str,
        *,
        tier_deltas: dict[str, dict[str, int]] | None = None,
    ) -> None:
        """Apply ``job(conn)`` in one transaction off the call path (see
        :mod:`veil.core.store.write_behind`): queued for the writer thread, in order; every later use
        of the store waits for it. ``:memory:`` or ``write_behind=False``: run now.

        Args:
            job: the writes; called with a connection inside ``BEGIN IMMEDIATE``.
            what: names the job in a :class:`~veil.core.store.write_behind.WriteBehindError`.
            tier_deltas: ``{session_id: {tier: change}}`` in item counts, so
                :meth:`tier_counts` is right while the job waits.
        """
        if self._behind is None:
            with self.transaction() as conn:
                job(conn)
            return
        self._behind.submit(job, what, tier_deltas)

    def flush(self) -> None:
        """Wait for every queued :meth:`write_behind` job.

        Raises:
            WriteBehindError: a queued write failed (it was rolled back)."""
        if self._behind is not None:
            self._behind.drain()

    @property
    def writer(self) -> WriteBehind | None:
        """The write-behind queue (None for ``:memory:`` or ``write_behind=False``)."""
        return self._behind

    def close(self) -> None:
        """Let queued writes land, then close this thread's connection.

        Raises:
            WriteBehindError: a queued write failed (it was rolled back)."""
        try:
            if self._behind is not None:
                self._behind.close()
        finally:
            self._close_connection()

    def _close_connection(self) -> None:
        if self.database is not None:
            assert self._pg is not None
            self._pg.close()
            self.database.close()
            return
        conn = getattr(self._local, "conn", None) or self._memory_conn
        if conn is not None:
            conn.close()
        self._local.conn = None
        self._memory_conn = None

    # -- sessions ---------------------------------------------------------------------------

    def create_session(
        self, session_id: str, agent: str, model: str | None, snapshot: dict[str, Any]
    ) -> dict[str, Any]:
        """Insert a new session row and return it as a dict (see :meth:`get_session`)."""
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO sessions (id, agent, model, created_at, updated_at, snapshot)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, agent, model, now, now, row_codec.dumps(snapshot)),
            )
        return self.get_session(session_id)

    def get_session(self, session_id: str) -> dict[str, Any]:
        """Return a session row: id, agent, model, title, created_at, updated_at, closed_at,
        snapshot (dict), compact_summary, compact_size, state (dict), version, message_count,
        damaged (the JSON columns that did not parse; each is ``{}`` here).

        Raises:
            SessionNotFound: no session with that id.
        """
        row = self.conn.execute(
            f"SELECT {self._session_columns()}, (SELECT COUNT(*) FROM messages m"
            " WHERE m.session_id = s.id) AS message_count FROM sessions s WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        out = dict(row)
        for col in ("snapshot", "state"):
            out[col] = row_codec.utf8(out[col])
        text_problems = row_codec.decode_session_text(out)
        if any(p.startswith("compact_summary:") for p in text_problems):
            # without its summary the compacted start must be sent again (it is all stored)
            out["compact_size"] = 0
            text_problems.append("compact_summary unreadable: the whole history is sent again")
        row_codec.session_json(out)
        out["problems"] = text_problems + _number_problems(out)
        return out

    def _session_columns(self) -> str:
        """Every column of ``sessions``, the free-text and JSON ones fetched as bytes (a column
        of invalid UTF-8 would make the fetch itself fail; they are decoded after)."""
        if self._session_select is None:
            names = self.dialect.table_columns(self.conn, "sessions")
            texty = {*row_codec.SESSION_TEXT_COLUMNS, "snapshot", "state"}
            self._session_select = ", ".join(
                f"{self.dialect.text_as_bytes(c)} AS {c}" if c in texty else c for c in names
            )
        return self._session_select

    def load_session(self, session_id: str) -> StoredSession:
        """A session's row and full history, read in one read transaction (so the history is the
        one of that row's ``version``, even while another process appends).

        Damaged rows do not stop the load: a damaged snapshot or state is ``{}`` (named in
        ``row["damaged"]``); a damaged or missing message row gets a stand-in
        (:func:`veil.core.store.row_codec.fill_damaged`). Each is named in ``problems`` and logged; the rows
        stay as they are (``veil doctor --repair`` moves them aside).

        Raises:
            SessionNotFound: no session with that id.
        """
        with self.read_snapshot():
            row = self.get_session(session_id)
            problems = [
                f"session {session_id}: {p}" for p in [*row.pop("problems"), *_json_problems(row)]
            ]
            history = self._history(session_id, problems)
        for problem in problems:
            log.warning("%s: %s", self.path, problem)
        return StoredSession(row=row, messages=history, problems=problems)

    def list_sessions(
        self, limit: int = 50, problems: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Sessions, most recently updated first (at most ``limit``), without their snapshot
        and state: id, agent, model, title, created_at, updated_at, closed_at, compact_summary,
        compact_size, version, message_count.

        Rows whose listed columns are damaged (:func:`veil.core.store.row_codec.session_row_problems`)
        are left out, each named in ``problems`` (when given) and logged.
        """
        found = self.conn.execute(
            f"SELECT {self._listed}, (SELECT COUNT(*) FROM messages m"
            " WHERE m.session_id = s.id) AS message_count FROM sessions s"
            " ORDER BY updated_at DESC, rowid DESC LIMIT ?",
            (limit,),
        ).fetchall()
        out = []
        for found_row in found:
            row = dict(found_row)
            bad = row_codec.decode_session_text(row) + row_codec.session_row_problems(row)
            if bad:
                problem = f"session row {row['id']!r} is damaged, left out: {'; '.join(bad)}"
                log.warning("%s: %s", self.path, problem)
                if problems is not None:
                    problems.append(problem)
                continue
            out.append(row)
        return out

    def update_session(
        self, session_id: str, *, expect_version: int | None = None, **fields: Any
    ) -> int:
        """Set columns of a session (title, model, closed_at, compact_summary, compact_size,
        state); dict values are stored as JSON. A change of compact_summary, compact_size or
        state bumps the session's ``version`` by one.

        Args:
            expect_version: compare-and-swap: write only if the stored version is this one.

        Returns:
            The session's version after the write.

        Raises:
            SessionNotFound: no such session. SessionConflict: the stored version is not
            ``expect_version`` (nothing is written). ValueError: an unknown field.
        """
        allowed = {"title", "model", "closed_at", "compact_summary", "compact_size", "state"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update session fields {sorted(bad)}")
        bump = bool(_CONTENT_FIELDS & set(fields))
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        if bump:
            cols += f", version = {_next_version(self.dialect)}"
        values = [row_codec.dumps(v) if isinstance(v, dict) else v for v in fields.values()]
        with self.transaction() as conn:
            _swap(conn, session_id, f"UPDATE sessions SET {cols}", values, expect_version)
            if expect_version is not None:
                return expect_version + 1 if bump else expect_version
            return _version(conn, session_id)

    def version(self, session_id: str) -> int:
        """The stored version of a session (see :meth:`update_session`).

        Raises:
            SessionNotFound: no such session."""
        row = self.conn.execute("SELECT version FROM sessions WHERE id = ?", (session_id,))
        found = row.fetchone()
        if found is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return _sound_version(found[0])

    def has_session(self, session_id: str) -> bool:
        """Whether a session with this id is stored (one indexed lookup through :attr:`reader`;
        sessions are never written by :meth:`write_behind` jobs)."""
        row = self.reader.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
        return row.fetchone() is not None

    def version_and_closed_at(self, session_id: str) -> tuple[int, float | None]:
        """``(version, closed_at)`` of a session as stored now, read through :attr:`reader`
        (without waiting for queued :meth:`write_behind` jobs, which never write sessions).

        Raises:
            SessionNotFound: no such session."""
        row = self.reader.execute(
            "SELECT version, closed_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        # read as a load reads them (_number_problems), so a damaged row is no conflict
        closed_at = row[1] if row[1] is None else (_sound_time(row[1]) or time.time())
        return _sound_version(row[0]), closed_at

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its messages and items (events stay: the log is append-only)."""
        with self.transaction() as conn:
            cur = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            if cur.rowcount == 0:
                raise SessionNotFound(f"no session with id {session_id!r}")

    # -- messages ---------------------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        idx: int,
        step: int,
        message: Message,
        usage: dict | None = None,
        *,
        expect_version: int | None = None,
    ) -> int:
        """Store message number ``idx`` (0-based) of a session's full history; bumps the
        session's version.

        Args:
            expect_version: compare-and-swap: store only if the session's version is this one.

        Returns:
            The session's version after the write.

        Raises:
            SessionConflict: ``idx`` is taken, or the version is not ``expect_version`` (another
                process appended or compacted since this copy was loaded; nothing is stored).
            SessionNotFound: no such session.
        """
        try:
            return self._append(
                session_id, idx, step, row_codec.dumps(message), usage, expect_version
            )
        except UnicodeEncodeError:  # lone surrogates: SQLite stores UTF-8 only (rolled back)
            text = row_codec.dumps(clean_message(message))
            return self._append(session_id, idx, step, text, usage, expect_version)

    def _append(
        self,
        session_id: str,
        idx: int,
        step: int,
        text: str,
        usage: dict | None,
        expect_version: int | None,
    ) -> int:
        now = time.time()
        usage_json = row_codec.dumps(usage) if usage else None
        if self._pg is not None and not self._pg.in_transaction:
            return self._append_one_statement(
                session_id, idx, step, text, now, usage_json, expect_version
            )
        with self.transaction() as conn:
            _swap(
                conn,
                session_id,
                f"UPDATE sessions SET updated_at = ?, version = {_next_version(self.dialect)}",
                [now],
                expect_version,
            )
            try:
                conn.execute(
                    "INSERT INTO messages (session_id, idx, step, message, created_at, usage)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, idx, step, text, now, usage_json),
                )
            except self.dialect.integrity_errors() as exc:
                raise _taken(session_id, idx) from exc
            return expect_version + 1 if expect_version is not None else _version(conn, session_id)

    def _append_one_statement(
        self,
        session_id: str,
        idx: int,
        step: int,
        text: str,
        now: float,
        usage_json: str | None,
        expect_version: int | None,
    ) -> int:
        """:meth:`_append` on PostgreSQL as one statement, so one round trip to the server:
        the compare-and-swap ``UPDATE`` in a ``WITH`` that the ``INSERT`` reads (no session row
        updated: nothing inserted). A statement is atomic on its own: a taken ``idx`` fails it
        whole, the version bump included. Same outcomes as :meth:`_append`'s transaction."""
        conn = self.conn
        condition, args = _swap_condition(conn, expect_version)
        sql = (
            "WITH bumped AS (UPDATE sessions SET updated_at = ?,"
            f" version = {_next_version(self.dialect)} WHERE id = ?{condition} RETURNING version)"
            " INSERT INTO messages (session_id, idx, step, message, created_at, usage)"
            " SELECT ?, ?, ?, ?, ?, ? FROM bumped RETURNING (SELECT version FROM bumped)"
        )
        params = [now, session_id, *args, session_id, idx, step, text, now, usage_json]
        try:
            row = conn.execute(sql, params).fetchone()
        except self.dialect.integrity_errors() as exc:
            raise _taken(session_id, idx) from exc
        if row is None:
            raise _refusal(conn, session_id, expect_version)
        return _sound_version(row[0])

    def messages(self, session_id: str) -> list[tuple[int, Message]]:
        """The full history as ``[(step, message), ...]`` in order; a damaged or missing row
        gets a stand-in (see :meth:`load_session`, which also names them)."""
        return self._history(session_id, [])

    def last_usage(self, session_id: str) -> dict[str, Any] | None:
        """The usage stored with the session's latest answer (``prompt_tokens``,
        ``completion_tokens``, and ``cached_tokens`` / ``estimated`` when recorded), or None when
        no answer has usage or its row is damaged (front ends then show no figure)."""
        row = self.conn.execute(
            f"SELECT {self.dialect.blob('usage')} AS usage FROM messages WHERE session_id = ?"
            " AND usage IS NOT NULL ORDER BY idx DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        try:
            raw = row["usage"]
            usage = loads(raw if isinstance(raw, str) else bytes(raw).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        return usage if isinstance(usage, dict) else None

    def search_messages(self, since: float, words: list[str], limit: int) -> list[dict[str, Any]]:
        """Stored messages of every session of the project created at or after ``since`` (Unix
        seconds) whose JSON text contains every one of ``words`` (lowercase; SQL ``LIKE``, so
        case-insensitive for ASCII), newest first, at most ``limit``.

        Returns:
            ``[{"session_id", "idx", "message" (the stored JSON text), "created_at"}]``.
        """
        sql = (
            "SELECT session_id, idx, message, created_at FROM messages WHERE created_at >= ?"
            + "".join(" AND lower(message) LIKE ?" for _ in words)
            + " ORDER BY created_at DESC, idx DESC LIMIT ?"
        )
        args: list[Any] = [since, *[f"%{w}%" for w in words], limit]
        return [dict(row) for row in self.conn.execute(sql, args)]

    def _history(self, session_id: str, problems: list[str]) -> list[tuple[int, Message]]:
        found = self.conn.execute(
            # as bytes: a row holding invalid UTF-8 would make the whole query fail
            f"SELECT idx, step, {self.dialect.blob('message')} AS message FROM messages"
            " WHERE session_id = ? ORDER BY idx",
            (session_id,),
        ).fetchall()
        numbered = [r for r in found if isinstance(r["idx"], int) and r["idx"] >= 0]
        if len(numbered) < len(found):  # a primary key that is not a position cannot be placed
            for r in found:
                if not (isinstance(r["idx"], int) and r["idx"] >= 0):
                    problems.append(
                        f"session {session_id}: message row {r['idx']!r} has no position"
                    )
            found = numbered
        if not found:
            return []
        size = max(r["idx"] for r in found) + 1
        messages: list[Message | None] = [None] * size
        steps = [0] * size
        reasons: dict[int, str] = {}
        for r in found:
            idx = r["idx"]
            message, problem = row_codec.json_value(row_codec.utf8(r["message"]), dict, "message")
            if problem is None:
                problem = row_codec.message_problem(message)
            if problem is None and not isinstance(r["step"], int):
                problem = f"step: {r['step']!r}, expected an integer"
            if problem is not None:
                reasons[idx] = problem
                problems.append(f"session {session_id}: message row {idx} is damaged: {problem}")
                continue
            messages[idx] = message
            steps[idx] = r["step"]
        for idx in range(size):
            if messages[idx] is None and idx not in reasons:
                reasons[idx] = "row missing"
                problems.append(f"session {session_id}: message row {idx}{MISSING_ROW}")
        for idx in range(1, size):  # a stand-in takes the step of the message before it
            if messages[idx] is None:
                steps[idx] = steps[idx - 1]
        filled = row_codec.fill_damaged(messages, reasons) if reasons else messages
        return list(zip(steps, filled, strict=True))  # type: ignore[arg-type]

    # -- items ------------------------------------------------------------------------------

    def add_items(self, items: list[ContextItem]) -> None:
        """Insert context items (tags and targets stored as JSON lists)."""
        if not items:
            return
        rows = [_item_values(i) for i in items]
        if len(items) == 1 and self.dialect is SQLITE:
            # one statement is atomic on its own: no BEGIN / COMMIT round trips
            conn = self.conn  # drains the write-behind queue
            with self._write_lock:
                SQLITE.replace_rows(conn, "items", "id", ITEM_COLUMNS, rows)
            return
        if self._pg is not None and len(rows) <= 1000:
            # one statement (PostgresDialect.replace_rows), atomic on its own: one round trip
            self.dialect.replace_rows(self.conn, "items", "id", ITEM_COLUMNS, rows)
            return
        with self.transaction() as conn:
            self.dialect.replace_rows(conn, "items", "id", ITEM_COLUMNS, rows)

    def set_tier(self, item_ids: list[str], tier: str) -> None:
        """Move items to ``tier`` (``live``, ``warm`` or ``cold``) in one transaction."""
        if not item_ids:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE items SET tier = ? WHERE id = ?", [(tier, i) for i in item_ids]
            )

    def record_accesses(self, accesses: list[tuple[float, float, int, float, str]]) -> None:
        """Store items' memory state after an access, in one transaction.

        Args:
            accesses: ``(stability, difficulty, access_count, last_access, item id)`` per item
                (stability in days, last_access in Unix seconds, as :class:`ContextItem`).
        """
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE items SET stability = ?, difficulty = ?, access_count = ?, last_access = ?"
                " WHERE id = ?",
                accesses,
            )

    def update_item(self, item_id: str, **fields: Any) -> None:
        """Set fields of one item (tags / targets as lists; flags as bools).

        Raises:
            KeyError: no item with that id; ValueError: an unknown field.
        """
        bad = set(fields) - set(ITEM_COLUMNS[1:])
        if bad:
            raise ValueError(f"cannot update item fields {sorted(bad)}")
        values = [
            row_codec.dumps(v) if isinstance(v, list) else int(v) if isinstance(v, bool) else v
            for v in fields.values()
        ]
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as conn:
            cur = conn.execute(f"UPDATE items SET {cols} WHERE id = ?", (*values, item_id))
            if cur.rowcount == 0:
                raise KeyError(item_id)

    def items(self, session_id: str, tiers: tuple[str, ...] = ("live",)) -> list[ContextItem]:
        """A session's items in the given tiers, in insertion order."""
        marks = ", ".join("?" for _ in tiers)
        rows = self.conn.execute(
            f"SELECT * FROM items WHERE session_id = ? AND tier IN ({marks}) ORDER BY rowid",
            (session_id, *tiers),
        ).fetchall()
        return [_row_item(r) for r in rows]

    def get_item(self, item_id: str) -> ContextItem | None:
        """One item by id, or None."""
        row = self.conn.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
        return _row_item(row) if row else None

    def item_of_message(self, session_id: str, message_index: int) -> ContextItem | None:
        """The item captured from message ``message_index`` of a session (one that left the
        prompt first, then the newest), or None."""
        row = self.conn.execute(
            "SELECT * FROM items WHERE session_id = ? AND message_index = ?"
            " ORDER BY tier = 'live', rowid DESC LIMIT 1",
            (session_id, message_index),
        ).fetchone()
        return _row_item(row) if row else None

    def tier_counts(self, session_id: str) -> dict[str, int]:
        """``{"live": n, "warm": n, "cold": n}`` for a session, queued moves included (without
        waiting for them: the manifest asks right after an eviction pass)."""
        counts = {"live": 0, "warm": 0, "cold": 0}
        behind = self._behind
        if behind is None or behind.failed:
            rows, pending = self.conn.execute(_TIER_COUNTS, (session_id,)).fetchall(), {}
        else:
            with behind.counts_lock:  # no job commits between the query and its deltas
                rows = self.reader.execute(_TIER_COUNTS, (session_id,)).fetchall()
                pending = behind.pending_tier_deltas(session_id)
        for row in rows:
            counts[row["tier"]] = int(row["n"])
        for tier, change in pending.items():
            counts[tier] = counts.get(tier, 0) + change
        return counts

    # -- event log and usage ----------------------------------------------------------------

    def log_event(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        session_id: str | None = None,
        step: int | None = None,
        tool_call_id: str | None = None,
        ts: float | None = None,
    ) -> int:
        """Append an event to the append-only log; return its sequence number."""
        with self.transaction() as conn:
            return insert_event(
                conn,
                kind,
                row_codec.dumps(payload),
                ts=ts or time.time(),
                session_id=session_id,
                step=step,
                tool_call_id=tool_call_id,
            )

    def events(self, session_id: str | None = None, kinds: tuple[str, ...] = ()) -> list[dict]:
        """Events in log order, optionally for one session and some kinds."""
        sql, args = "SELECT * FROM events WHERE 1=1", []
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        if kinds:
            sql += f" AND kind IN ({', '.join('?' for _ in kinds)})"
            args.extend(kinds)
        found = self.conn.execute(sql + " ORDER BY seq", args).fetchall()
        out = []
        for r in found:
            payload, problem = row_codec.json_value(r["payload"], dict, "payload")
            if problem:  # one damaged event must not hide the log (veil doctor names it)
                log.warning("%s: event %s is damaged, skipped: %s", self.path, r["seq"], problem)
                continue
            out.append({**dict(r), "payload": payload})
        return out

    def eviction_count(self, session_id: str) -> int:
        """Items evicted in a session so far (each ``evict`` event lists the items of a pass)."""
        return sum(len(e["payload"].get("items", [])) for e in self.events(session_id, ("evict",)))

    def record_usage(self, session_id: str | None, entry: dict[str, Any]) -> None:
        """Record one model call's usage (role, model, provider, prompt/completion tokens, s)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO usage (ts, session_id, role, model, provider, prompt_tokens,"
                " completion_tokens, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    session_id,
                    entry.get("role"),
                    entry.get("model"),
                    entry.get("provider"),
                    entry.get("prompt_tokens"),
                    entry.get("completion_tokens"),
                    entry.get("seconds"),
                ),
            )


def insert_event(
    conn: Any,
    kind: str,
    payload_json: str,
    *,
    ts: float,
    session_id: str | None,
    step: int | None,
    tool_call_id: str | None,
) -> int:
    """Append one event to the append-only ``events`` log on ``conn`` (the only statement that
    writes an event: :meth:`Store.log_event`, the masking and eviction writes of a session and
    the beliefs all come here), inside the caller's transaction or as a statement of its own.

    Args:
        kind: the event's kind (``evict``, ``mask``, ``belief.assert``, ...).
        payload_json: the payload, already JSON text (a JSON object).
        ts: Unix seconds.

    Returns:
        The event's sequence number (``events.seq``).
    """
    return dialect_of(conn).insert_returning(
        conn,
        "INSERT INTO events (ts, session_id, step, tool_call_id, kind, payload)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (ts, session_id, step, tool_call_id, kind, payload_json),
        "seq",
    )


def set_items_tier(conn: Any, item_ids: list[str], tier: str) -> None:
    """``UPDATE items SET tier`` for ``item_ids`` on ``conn`` (inside the caller's transaction),
    500 ids a statement (SQLite's variable limit). Unknown ids are skipped."""
    for start in range(0, len(item_ids), 500):
        chunk = item_ids[start : start + 500]
        conn.execute(
            f"UPDATE items SET tier = ? WHERE id IN ({','.join('?' * len(chunk))})",
            [tier, *chunk],
        )


def _number_problems(row: dict[str, Any]) -> list[str]:
    """Damage in a loaded session's number columns, set in place to what lets the session load
    (the values ``veil doctor --repair`` writes):

    - ``version``, ``compact_size``: 0. For ``version`` the next save writes a sound one (the
      compare-and-swap takes a damaged stored version for 0: :func:`_swap`); for
      ``compact_size`` the whole history is sent again, nothing stored is lost.
    - ``created_at``, ``updated_at``: the other one when it is sound, else now (the prompt's
      date comes from ``created_at``: :func:`veil.core.prompt.assemble.session_date`).
    - ``closed_at`` (not null and not a number): now, so the session reads as closed, as the
      row says it was meant to be.
    """
    problems = []
    for col in ("version", "compact_size"):
        value = row.get(col)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{col}: {value!r}, expected a whole number >= 0; read as 0")
            row[col] = 0
    created, updated = _sound_time(row.get("created_at")), _sound_time(row.get("updated_at"))
    for col, other in (("created_at", updated), ("updated_at", created)):
        if _sound_time(row.get(col)) is None:
            when = other if other is not None else time.time()
            source = "the other time column" if other is not None else "now"
            problems.append(
                f"{col}: {row.get(col)!r}, expected a number (Unix seconds); read as {source}"
            )
            row[col] = when
    closed = row.get("closed_at")
    if closed is not None and _sound_time(closed) is None:
        problems.append(f"closed_at: {closed!r}, expected a number or null; read as closed now")
        row["closed_at"] = time.time()
    return problems


def _json_problems(row: dict[str, Any]) -> list[str]:
    """The problems :func:`veil.core.store.row_codec.session_json` found (it ran in get_session), again."""
    return [f"{col} is damaged (not a JSON object); read as {{}}" for col in row["damaged"]]


def _swap(conn: Any, session_id: str, update: str, values: list, expect: int | None) -> None:
    """Run ``update`` (an ``UPDATE sessions SET ...`` without WHERE) on one session, only if its
    version is ``expect`` (when given).

    Raises:
        SessionNotFound, SessionConflict."""
    condition, extra = _swap_condition(conn, expect)
    sql, args = f"{update} WHERE id = ?{condition}", [*values, session_id, *extra]
    if conn.execute(sql, args).rowcount == 1:
        return
    raise _refusal(conn, session_id, expect)


def _swap_condition(conn: Any, expect: int | None) -> tuple[str, list[Any]]:
    """The compare-and-swap's condition on a session row (`` AND ...``, with its parameters):
    its version is ``expect``; nothing when ``expect`` is None."""
    if expect is None:
        return "", []
    # a damaged version was read as 0 (_number_problems): the copy that read it may write
    return (
        f" AND (version = ? OR (? = 0 AND NOT {dialect_of(conn).sound_version()}))",
        [expect, expect],
    )


def _taken(session_id: str, idx: int) -> SessionConflict:
    return SessionConflict(
        f"session {session_id}: message {idx} was already stored by another process "
        "(this copy of the session is out of date; load it again)"
    )


def _refusal(conn: Any, session_id: str, expect: int | None) -> Exception:
    """Why a compare-and-swap wrote nothing: SessionNotFound, or SessionConflict naming the
    stored version."""
    found = conn.execute("SELECT version FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if found is None:
        return SessionNotFound(f"no session with id {session_id!r}")
    return SessionConflict(
        f"session {session_id} was changed by another process (stored version {found[0]}, this "
        f"copy has {expect}); load it again and retry"
    )


def _version(conn: Any, session_id: str) -> int:
    return _sound_version(
        conn.execute("SELECT version FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    )


def _next_version(dialect: Dialect) -> str:
    """SQL: the version after a change; a damaged one (read as 0) becomes 1, a sound one
    (:meth:`Dialect.sound_version`, what :func:`_number_problems` accepts) its successor."""
    return f"CASE WHEN {dialect.sound_version()} THEN version + 1 ELSE 1 END"


def _sound_version(value: Any) -> int:
    """A stored ``version`` as loads read it: a damaged one (text, negative...) is 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _sound_time(value: Any) -> float | None:
    """A stored time column (Unix seconds) as loads read it, or None when it is damaged."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


_item_columns = operator.attrgetter(*ITEM_COLUMNS)
_TAGS, _TARGETS, _PINNED, _BY_HAND = (
    ITEM_COLUMNS.index(c) for c in ("tags", "targets", "pinned", "loaded_by_hand")
)


def _item_values(item: ContextItem) -> list:
    # attribute reads in C, not dataclasses.asdict: asdict deep-copies every list (~1 ms per item)
    values = list(_item_columns(item))
    values[_TAGS] = row_codec.dumps_strings(values[_TAGS])
    values[_TARGETS] = row_codec.dumps_strings(values[_TARGETS])
    values[_PINNED] = int(values[_PINNED])
    values[_BY_HAND] = int(values[_BY_HAND])
    return values


MISSING_ROW = " is missing; an empty stand-in keeps its place"
"""How a session load's warning ends for a message row that is not there (one ``veil doctor
--repair`` moved aside, say): nothing is left to repair, unlike a damaged row."""


def _row_item(row: Any) -> ContextItem:
    d = {c: row[c] for c in ITEM_COLUMNS}
    for col in ("tags", "targets"):
        try:
            d[col] = loads(d[col])
        except (TypeError, ValueError):
            d[col] = None
        if not isinstance(d[col], list):  # damaged: the item stays usable without them
            log.warning("item %s: %s column is damaged; read as []", d["id"], col)
            d[col] = []
    d["pinned"] = bool(d["pinned"])
    d["loaded_by_hand"] = bool(d["loaded_by_hand"])
    return ContextItem(**d)
