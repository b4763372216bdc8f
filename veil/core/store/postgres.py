"""The PostgreSQL engine of the store: a team's one database behind many veil processes on many
machines (``store.url = postgresql://...``), through psycopg 3, its connection pool and
pgvector-python.

* **One schema per project.** Every table of a project lives in its own schema,
  ``veil_<name>_<hash>`` (:func:`schema_name`), and each connection's ``search_path`` names that
  schema alone (with the one holding the ``vector`` extension). The statements are the SQLite
  ones, unchanged: no statement can name another project's rows, since no other project's tables
  are on its path; the same session or item id in two projects is two rows in two tables; and a
  project's HNSW index holds its own vectors only (a shared index filtered by a project column
  loses recall for small projects: the nearest candidates it visits are mostly other projects').
  ``schema_version`` in the schema records the project's name, so two names never share one
  schema.
* **Migrations** (:data:`veil.core.store.schema.PG_MIGRATIONS`) run at open, each in one
  transaction, under a session-level advisory lock on the schema (two processes starting at once
  apply each migration once).
* **Connections.** :class:`PgConnection` is the object the store's statement functions receive:
  it runs ``?``-placeholder SQL (turned into psycopg's ``%s`` once per statement text), buffers
  the rows, and reads ``BEGIN`` / ``COMMIT`` / ``ROLLBACK``: a thread in a transaction holds one
  pooled connection until it ends; any other statement borrows one for itself (autocommit, as a
  SQLite statement outside a transaction is its own transaction).
* **Transactions.** Writes run at READ COMMITTED: the session's compare-and-swap is one
  ``UPDATE ... WHERE version = ?`` (PostgreSQL re-checks the condition on the row it waited for,
  so two machines never both win); a message append is that ``UPDATE`` and its ``INSERT`` in one
  statement, and an item capture one statement too (one round trip each); duplicates are refused
  by primary keys and unique constraints. The recall index needs no writer lock: new rows are
  numbered by a sequence and every row carries its writer's transaction id, which readers follow
  (:meth:`PostgresDialect.index_changes`), so eviction passes of many sessions never wait for
  each other. Read snapshots (``Store.read_snapshot``) run at REPEATABLE READ, as SQLite's WAL
  read transaction sees one moment. No in-process lock orders a process's transactions: each
  thread's transaction holds a pooled connection of its own.
* **Text.** PostgreSQL's text cannot hold NUL; it is written escaped and read back as it was
  (:data:`NUL_ESCAPE`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from veil.core.errors import ConfigError, VeilError
from veil.core.store.dialect import INDEX_CHANGE_COLUMNS, Dialect, lock_key

log = logging.getLogger("veil.store")

URL_SCHEMES = ("postgresql", "postgres")
"""``store.url`` schemes that mean PostgreSQL (libpq's two spellings)."""

POOL_TIMEOUT_S = 30.0
"""Seconds a thread waits for a free pooled connection before :class:`StoreUnavailable`."""

HNSW_M = 16
"""``m`` of the warm tier's HNSW index: links per node (pgvector's default)."""

HNSW_EF_CONSTRUCTION = 64
"""``ef_construction`` of the HNSW index: candidates kept while linking a new node (pgvector's
default)."""

HNSW_EF_SEARCH = 200
"""``hnsw.ef_search`` for the warm tier's vector search: candidates HNSW keeps while it
searches. Measured in bench/bench_store.py (bench/RESULTS.md, "Store engines"; 384-dimensional
vectors like sentence embeddings): recall@10 at 100k items 0.954 / 0.980 / 0.985 and at 1M
0.803 / 0.882 / 0.946 for 40 (pgvector's default) / 100 / 200, p95 at 1M under 50 ms for each
on a shared 2-core machine; recall fetches 100 candidates, which 200 also covers."""


class StoreUnavailable(VeilError):
    """The PostgreSQL server cannot be reached, refused the login, or has no free connection; the
    message names the server (never the password)."""

    code = "STORE_UNAVAILABLE"
    http_status = 503


def is_url(target: object) -> bool:
    """Whether ``target`` (a ``store.url`` or a database path) names a PostgreSQL server."""
    return isinstance(target, str) and target.split(":", 1)[0].lower() in URL_SCHEMES


def display_url(url: str) -> str:
    """``url`` without its password (and without query parameters, which may hold one), for
    messages and logs: ``postgresql://veil@db.internal:5432/veil``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{parts.path}"


_SLUG = re.compile(r"[^a-z0-9_]+")


def schema_name(project: str) -> str:
    """The schema of a project: ``veil_`` + its name in lowercase letters, digits and ``_``
    (at most 40 of them) + ``_`` + the first 8 hex digits of the SHA-256 of the exact name, so
    names that read alike (``My-App``, ``my_app``) get schemas of their own.

    Raises:
        ConfigError: ``project`` is empty."""
    if not isinstance(project, str) or not project.strip():
        raise ConfigError("store.project: expected a non-empty project name")
    slug = _SLUG.sub("_", project.lower()).strip("_")[:40]
    digest = hashlib.sha256(project.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"veil_{slug}_{digest}" if slug else f"veil_{digest}"


# -- rows ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type:
    """A tuple type whose items are also read by column name, like ``sqlite3.Row``
    (``row[0]``, ``row["id"]``, ``dict(row)``)."""
    index = {name: i for i, name in enumerate(names)}
    get = tuple.__getitem__

    class Row(tuple):
        __slots__ = ()

        def __getitem__(self, key: Any) -> Any:
            return get(self, index[key]) if isinstance(key, str) else get(self, key)

        def keys(self) -> list[str]:
            return list(names)

    return Row


def _row_factory(cursor: Any) -> Any:
    description = cursor.description
    if description is None:
        return tuple
    return _row_class(tuple(c.name for c in description))


class Result:
    """A statement's outcome, rows read in full (what the store's code reads of a sqlite3
    cursor: ``fetchone``, ``fetchall``, iteration, ``rowcount``)."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


_NO_ROWS = Result([], -1)


@functools.lru_cache(maxsize=4096)
def to_pyformat(sql: str) -> str:
    """SQL with ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled); ``?`` and
    ``%`` inside quoted strings and identifiers are left as they are (``%`` doubled there
    too, as psycopg reads every ``%``)."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
            out.append("%%" if ch == "%" else ch)
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


_BEGINS = {"BEGIN", "BEGIN IMMEDIATE", "BEGIN ISOLATION LEVEL REPEATABLE READ"}


class PgConnection:
    """The store's connection to one project of a PostgreSQL database, shared by the threads of
    one :class:`~veil.core.store.Store` (see the module docstring).

    Args:
        database: the open :class:`PgDatabase` (its pool).
    """

    def __init__(self, database: PgDatabase) -> None:
        self.database = database
        self.dialect: Dialect = database.dialect
        self._local = threading.local()

    @property
    def in_transaction(self) -> bool:
        """This thread has a transaction open (and holds a pooled connection for it)."""
        return getattr(self._local, "conn", None) is not None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        """Run one statement (``?`` placeholders) and return its rows, read in full.

        ``BEGIN`` (any of the store's begin statements), ``COMMIT`` and ``ROLLBACK`` open and end
        this thread's transaction.

        Raises:
            psycopg.Error: the statement failed. StoreUnavailable: no connection could be had.
        """
        statement = sql.strip()
        if statement in _BEGINS:
            self._begin(statement)
            return _NO_ROWS
        if statement in ("COMMIT", "ROLLBACK"):
            self._end(statement)
            return _NO_ROWS
        held = getattr(self._local, "conn", None)
        if held is not None:
            return _run(held, sql, params)
        with self.database.connection() as conn:
            return _run(conn, sql, params)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Result:
        """Run one statement for each parameter row (psycopg pipelines them)."""
        rows = list(seq)
        if not rows:
            return _NO_ROWS
        held = getattr(self._local, "conn", None)
        if held is not None:
            return _run_many(held, sql, rows)
        with self.database.connection() as conn:
            return _run_many(conn, sql, rows)

    def _begin(self, statement: str) -> None:
        if self.in_transaction:
            raise VeilError("a transaction is already open on this thread")
        conn = self.database.getconn()
        try:
            conn.execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ"
                if statement == self.dialect.begin_read
                else "BEGIN"
            )
        except BaseException:
            self.database.putconn(conn)
            raise
        self._local.conn = conn

    def _end(self, statement: str) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            return
        self._local.conn = None
        callbacks, self._local.after_commit = getattr(self._local, "after_commit", []), []
        try:
            conn.execute(statement)
        finally:
            self.database.putconn(conn)
        if statement == "COMMIT":
            for callback in callbacks:
                callback()

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once this thread's open transaction has committed (never when
        it rolls back); at once when no transaction is open (the statement before it has
        committed on its own). For what a process remembers of the database, such as an index
        it created, which must not outlive a rollback."""
        if not self.in_transaction:
            callback()
            return
        if not hasattr(self._local, "after_commit"):
            self._local.after_commit = []
        self._local.after_commit.append(callback)

    def close(self) -> None:
        """End this thread's open transaction, if any, by rolling it back (the pool stays open:
        :meth:`PgDatabase.close` closes it)."""
        if self.in_transaction:
            self._end("ROLLBACK")


def _run(conn: Any, sql: str, params: Sequence[Any]) -> Result:
    cur = conn.execute(to_pyformat(sql), params or None)
    rows = cur.fetchall() if cur.description is not None else []
    return Result(rows, cur.rowcount)


def _run_many(conn: Any, sql: str, rows: list[Sequence[Any]]) -> Result:
    with conn.cursor() as cur:
        cur.executemany(to_pyformat(sql), rows)
        return Result([], cur.rowcount)


# -- the database --------------------------------------------------------------------------------


class PgDatabase:
    """An open PostgreSQL store of one project: its pool of connections, each with the project's
    schema on its ``search_path`` and pgvector's types registered, the schema migrated.

    Args:
        url: ``postgresql://user:password@host:port/database`` (libpq's URI; ``?host=/socket``
            for a Unix socket).
        project: the project's name (``store.project``).
        pool_size: most connections this process opens.
        synchronous_commit: wait at each commit until the server has flushed its write-ahead
            log (PostgreSQL's default). Off (veil's default) is the durability of veil's SQLite
            store (WAL, ``synchronous = NORMAL``): a commit survives veil's crash and the
            server's restart, and a crash of the server's machine may lose the last fraction of
            a second of commits, never leave one half written.

    Raises:
        StoreUnavailable: the server cannot be reached or refused the login.
        ConfigError: the project name is empty, or pgvector is not installed and this user may
            not install it.
    """

    def __init__(
        self, url: str, project: str, *, pool_size: int = 10, synchronous_commit: bool = False
    ) -> None:
        from veil.core.store.schema import PG_MIGRATIONS

        _check_drivers()
        self.url = url
        self.project = project
        self.schema = schema_name(project)
        self.name = f"{display_url(url)} (project {project!r})"
        # what pg_stat_activity shows for this project's connections (ASCII, under 64 bytes)
        self.application_name = f"veil {self.schema}"
        self.dialect: Dialect = PostgresDialect()
        self.synchronous_commit = synchronous_commit
        self._vector_schema = self._prepare(PG_MIGRATIONS)
        self._pool = self._open_pool(pool_size)

    # -- connections ---------------------------------------------------------------------------

    def _connect_raw(self) -> Any:
        import psycopg

        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=_row_factory,
                application_name=self.application_name,
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"{display_url(self.url)}: cannot connect: {exc}") from None

    def _configure(self, conn: Any) -> None:
        from pgvector.psycopg import register_vector

        register_nul_escape(conn)
        conn.execute(f'SET search_path TO "{self.schema}", "{self._vector_schema}"')
        conn.execute(f"SET synchronous_commit = {'on' if self.synchronous_commit else 'off'}")
        # the warm tier's vector search (PostgresDialect.nearest_warm) as one statement
        conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        register_vector(conn)

    def _open_pool(self, size: int) -> Any:
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max(1, size),
            kwargs={
                "autocommit": True,
                "row_factory": _row_factory,
                "application_name": self.application_name,
            },
            configure=self._configure,
            timeout=POOL_TIMEOUT_S,
            name=f"veil {self.project}",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - PoolTimeout, OperationalError...
            pool.close()
            raise StoreUnavailable(f"{display_url(self.url)}: cannot connect: {exc}") from None
        return pool

    def connection(self) -> Any:
        """A pooled connection for one statement (a context manager; returned at exit).

        Raises:
            StoreUnavailable: none was free within :data:`POOL_TIMEOUT_S`."""
        from psycopg_pool import PoolTimeout

        try:
            return self._pool.connection()
        except PoolTimeout as exc:  # pragma: no cover - raised on enter, see getconn
            raise StoreUnavailable(f"{self.name}: no free connection: {exc}") from None

    def getconn(self) -> Any:
        """Take a pooled connection for a transaction (give it back with :meth:`putconn`).

        Raises:
            StoreUnavailable: none was free within :data:`POOL_TIMEOUT_S`."""
        from psycopg_pool import PoolTimeout

        try:
            return self._pool.getconn()
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"{self.name}: no free connection within {POOL_TIMEOUT_S:.0f} s ({exc}); raise "
                "store.poolSize or lower the number of concurrent requests"
            ) from None

    def putconn(self, conn: Any) -> None:
        """Give back a connection :meth:`getconn` took."""
        self._pool.putconn(conn)

    def dedicated(self) -> Any:
        """A connection of its own, outside the pool, on the project's schema (the session
        locks': an advisory lock lives as long as its connection).

        Raises:
            StoreUnavailable: the server cannot be reached."""
        conn = self._connect_raw()
        self._configure(conn)
        return conn

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    # -- schema --------------------------------------------------------------------------------

    def _prepare(self, migrations: list[str]) -> str:
        """Create the project's schema and the ``vector`` extension if missing and apply the
        pending migrations; return the schema that holds the extension."""
        conn = self._connect_raw()
        try:
            key = lock_key("veil-migrate", self.schema)
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                vector_schema = _ensure_vector(conn)
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                conn.execute(f'SET search_path TO "{self.schema}", "{vector_schema}"')
                self._migrate(conn, migrations)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return vector_schema
        finally:
            conn.close()

    def _migrate(self, conn: Any, migrations: list[str]) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version"
            " (version INTEGER NOT NULL, project TEXT NOT NULL)"
        )
        row = conn.execute("SELECT version, project FROM schema_version").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO schema_version (version, project) VALUES (0, %s)", (self.project,)
            )
            version = 0
        elif row[1] != self.project:
            raise ConfigError(
                f"{display_url(self.url)}: schema {self.schema} holds project {row[1]!r}, not "
                f"{self.project!r}; give this project another store.project name"
            )
        else:
            version = int(row[0])
        if version > len(migrations):
            raise ConfigError(
                f"{self.name}: schema version {version} is newer than this veil knows "
                f"({len(migrations)}); upgrade veil"
            )
        for number in range(version, len(migrations)):
            with conn.transaction():
                for statement in _split_sql(migrations[number]):
                    conn.execute(statement)
                conn.execute("UPDATE schema_version SET version = %s", (number + 1,))
            log.info("%s: schema migrated to version %d", self.name, number + 1)


NUL_ESCAPE = "\uffff"
"""PostgreSQL's text cannot hold the character NUL (U+0000), which a tool's output can (a
binary file printed), and SQLite stores as given. On PostgreSQL every text value veil writes
has NUL written as ``U+FFFF 0`` and U+FFFF itself as ``U+FFFF U+FFFF`` (U+FFFF is a
noncharacter: no text means it), and every text value read is turned back, so what veil stores
comes back exactly, on both engines. Text without either character (all but such outputs) is
sent and read unchanged."""

_ESCAPED = re.compile("\uffff(.)", re.S)


def escape_nul(text: str) -> str:
    """``text`` as stored on PostgreSQL (see :data:`NUL_ESCAPE`)."""
    if "\x00" not in text and NUL_ESCAPE not in text:
        return text
    return text.replace(NUL_ESCAPE, NUL_ESCAPE * 2).replace("\x00", NUL_ESCAPE + "0")


def unescape_nul(text: str) -> str:
    """The inverse of :func:`escape_nul`."""
    if NUL_ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


def register_nul_escape(conn: Any) -> None:
    """Make ``conn`` (a psycopg connection) write ``str`` parameters through
    :func:`escape_nul` and read ``text`` and ``varchar`` columns through :func:`unescape_nul`."""
    from psycopg.types.string import StrDumperUnknown, TextLoader

    class Dumper(StrDumperUnknown):
        def dump(self, obj: str) -> bytes:
            return super().dump(escape_nul(obj))

    class Loader(TextLoader):
        def load(self, data: Any) -> Any:
            return unescape_nul(super().load(data))

    conn.adapters.register_dumper(str, Dumper)
    for name in ("text", "varchar"):
        conn.adapters.register_loader(name, Loader)


def try_advisory_lock(conn: Any, key: int) -> bool:
    """Take session-level advisory lock ``key`` on ``conn`` (a raw psycopg connection) if it
    is free; whether it was (a lock held by this connection is taken again: PostgreSQL counts
    holds per connection)."""
    return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])


def advisory_unlock(conn: Any, key: int) -> bool:
    """Release one hold of advisory lock ``key`` on ``conn``; whether it was held there."""
    return bool(conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()[0])


def install_vector(url: str) -> str:
    """Create the ``vector`` extension in the database at ``url`` if missing (the test server's
    set-up); return the schema holding it.

    Raises:
        ConfigError: it is missing and this user may not create it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return _ensure_vector(conn)


def _check_drivers() -> None:
    """Raise a ConfigError naming what to install when psycopg, its pool or pgvector-python is
    missing (they come with ``pip install 'veil[postgres]'``)."""
    import importlib.util

    missing = [
        dist
        for module, dist in (
            ("psycopg", "psycopg[binary]"),
            ("psycopg_pool", "psycopg-pool"),
            ("pgvector", "pgvector"),
        )
        if importlib.util.find_spec(module) is None
    ]
    if missing:
        raise ConfigError(
            f"store.url names a PostgreSQL server, but {', '.join(missing)} is not installed: "
            "pip install 'veil[postgres]'"
        )


def _split_sql(script: str) -> list[str]:
    """The statements of a migration script: split at ``;`` outside ``$$``-quoted bodies (a
    PL/pgSQL function's body holds statements of its own)."""
    out, current = [], []
    for n, part in enumerate(script.split("$$")):
        if n % 2:  # inside a $$ body
            current.append(f"$${part}$$")
            continue
        pieces = part.split(";")
        current.append(pieces[0])
        for piece in pieces[1:]:
            out.append("".join(current))
            current = [piece]
    out.append("".join(current))
    return [s.strip() for s in out if s.strip()]


def _ensure_vector(conn: Any) -> str:
    """The schema of the ``vector`` extension, created in ``public`` when missing.

    Raises:
        ConfigError: it is missing and this user may not create it."""
    import psycopg

    query = (
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'vector'"
    )
    row = conn.execute(query).fetchone()
    if row is not None:
        return str(row[0])
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    except psycopg.Error as exc:
        raise ConfigError(
            f"the database has no pgvector extension and this user cannot create it ({exc}); "
            "run CREATE EXTENSION vector; as its owner or a superuser once"
        ) from None
    return str(conn.execute(query).fetchone()[0])


# -- the dialect ---------------------------------------------------------------------------------


class PostgresDialect(Dialect):
    """PostgreSQL's SQL where it differs from SQLite's (see :class:`Dialect` for each method)."""

    name = "postgresql"
    begin_write = "BEGIN"
    begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ"

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.IntegrityError,)

    def text_as_bytes(self, column: str) -> str:
        # PostgreSQL text is valid UTF-8 by construction: nothing to guard against
        return column

    def blob(self, column: str) -> str:
        return column

    def sound_version(self) -> str:
        return "(version >= 0)"

    def replace_rows(
        self, conn: Any, table: str, key: str, columns: Sequence[str], rows: list[Sequence[Any]]
    ) -> None:
        # SQLite's REPLACE deletes the old row (cascading to what references it) and inserts a
        # new one with a new rowid: the same two steps here, in one statement (one round trip;
        # atomic on its own): the INSERT reads the DELETE's count, so the delete runs first
        at = list(columns).index(key)
        keys = list(dict.fromkeys(r[at] for r in rows))
        types = self._column_types(conn, table)
        first = "(" + ", ".join(f"?::{types[c]}" for c in columns) + ")"
        other = "(" + ", ".join("?" for _ in columns) + ")"
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            values = ", ".join([first, *(other for _ in chunk[1:])])
            conn.execute(
                f"WITH gone AS (DELETE FROM {table} WHERE {key} = ANY(?) RETURNING 1)"
                f" INSERT INTO {table} ({', '.join(columns)})"
                f" SELECT * FROM (VALUES {values}) AS v WHERE (SELECT count(*) FROM gone) >= 0",
                [keys if start == 0 else [], *(v for r in chunk for v in r)],
            )

    def _column_types(self, conn: Any, table: str) -> dict[str, str]:
        """``{column: SQL type}`` of ``table`` (read once; ``VALUES`` in a ``SELECT`` needs its
        types spelled, as no target column gives them)."""
        cache: dict[str, dict[str, str]] = self.__dict__.setdefault("_types", {})
        if table not in cache:
            cache[table] = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
                    " WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 AND NOT a.attisdropped",
                    (table,),
                ).fetchall()
            }
        return cache[table]

    def table_columns(self, conn: Any, table: str) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = ?"
                " ORDER BY ordinal_position",
                (table,),
            ).fetchall()
            if r[0] != "rowid"  # PostgreSQL's stand-in for SQLite's hidden rowid
        ]

    def lock_schema(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (lock_key("veil-migrate", _schema(conn)),))

    def lock_recall_index(self, conn: Any) -> None:
        # nothing to serialise: new rows come from a sequence (new_index_rows) and readers
        # follow transaction ids, not revision numbers (index_changes); two writers of one row
        # wait for each other on the row itself, as PostgreSQL always makes them
        return

    def new_index_rows(self, conn: Any, count: int) -> list[int]:
        if count <= 0:
            return []
        found = conn.execute(
            "SELECT nextval('recall_index_row_seq') FROM generate_series(1, ?)", (int(count),)
        ).fetchall()
        return sorted(int(r[0]) for r in found)

    def index_changes(self, conn: Any, since: int) -> tuple[list[Any], int]:
        # the oldest transaction still running is read first, then the rows: every
        # transaction older than it had ended before the rows' snapshot, so its rows are there
        # (pg_current_snapshot: PostgreSQL's "transactional outbox" reading)
        position = int(
            conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text").fetchone()[0]
        )
        rows = conn.execute(
            f"SELECT {INDEX_CHANGE_COLUMNS} FROM recall_index WHERE xid >= ?::xid8",
            (str(max(0, since)),),
        ).fetchall()
        return rows, position

    def insert_returning(self, conn: Any, sql: str, params: Sequence[Any], column: str) -> int:
        return int(conn.execute(f"{sql} RETURNING {column}", params).fetchone()[0])

    def add_text_entries(self, conn: Any, entries: list[tuple[int, str, str]]) -> None:
        # another process may have indexed the same entry meanwhile (no writer lock): the
        # same text gives the same document
        conn.executemany(
            "INSERT INTO recall_fts (row, document) VALUES (?, setweight(to_tsvector('english',"
            " ?), 'A') || setweight(to_tsvector('english', ?), 'B'))"
            " ON CONFLICT (row) DO UPDATE SET document = excluded.document",
            entries,
        )

    def delete_text_entry(self, conn: Any, row: int) -> None:
        conn.execute("DELETE FROM recall_fts WHERE row = ?", (row,))

    def keyword_query(
        self, terms: list[str], meta_weight: float
    ) -> tuple[str, str, list[Any]] | None:
        terms = [t for t in terms if t]
        if not terms:
            return None
        # each term a phrase (an identifier's parts next to each other, as FTS5's quoted
        # string), OR-ed; content weighs 1.0 (A), meta meta_weight (B)
        query = " || ".join("phraseto_tsquery('english', ?)" for _ in terms)
        weights = f"'{{0, 0, {float(meta_weight)}, 1.0}}'"
        return (
            f"ts_rank({weights}, document, ({query}))",
            f"document @@ ({query})",
            [*terms, *terms],
        )

    def fts_row(self) -> str:
        return "row"

    def tags_contain(self, column: str, count: int) -> tuple[str, str]:
        marks = ",".join("?" * count)
        return (
            f", jsonb_array_elements_text({column}::jsonb) AS j(value)",
            f"lower(j.value) IN ({marks})",
        )

    def tags_exist(self, column: str, count: int) -> str:
        marks = ",".join("?" * count)
        return (
            f"EXISTS (SELECT 1 FROM jsonb_array_elements_text({column}::jsonb) AS j(value)"
            f" WHERE lower(j.value) IN ({marks}))"
        )

    def nearest_warm(
        self, conn: Any, vector: bytes, model: str, k: int, where: str = "", args: Sequence = ()
    ) -> list[Any]:
        import numpy as np

        query = np.frombuffer(vector, dtype=np.float32)
        dim = int(query.shape[0])
        distance = f"e.embedding::vector({dim}) <=> ?::vector({dim})"
        # the width is a literal, not a parameter: the planner must see that the query implies
        # the partial index's "dim = N" even in a generic (prepared) plan
        sql = (
            f"SELECT r.item_id, 1.0 - ({distance}) AS cos, r.row"
            " FROM embeddings e JOIN recall_index r ON r.embed_key = e.key"
            f" WHERE e.dim = {dim} AND e.model = ? AND r.tier = 'warm' AND r.forgotten = 0"
            f"{where} ORDER BY {distance} LIMIT ?"
        )
        # each connection searches with ef_search HNSW_EF_SEARCH and pgvector 0.8's iterative
        # scan (HNSW walks on past candidates the filters reject, so a filtered search still
        # finds k rows): PgDatabase._configure; a larger k widens the search for its statement
        wide = int(k) > HNSW_EF_SEARCH
        owned = wide and not conn.in_transaction
        if owned:
            conn.execute(self.begin_write)
        try:
            if wide:
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(k)}")
            rows = conn.execute(sql, (query, model, *args, query, k)).fetchall()
        finally:
            if owned:
                conn.execute("COMMIT")
        # relaxed order: sort again, ties by entry row as SQLite's exact search
        rows.sort(key=lambda r: (-float(r[1]), int(r[2])))
        return [(r[0], r[1]) for r in rows]

    def add_embeddings(self, conn: Any, rows: list[tuple[str, str, int, bytes]]) -> None:
        import numpy as np

        dims = {int(r[2]) for r in rows}
        for dim in dims:
            ensure_vector_index(conn, dim)
        conn.executemany(
            "INSERT INTO embeddings (key, model, dim, vector, embedding) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (key) DO NOTHING",
            [(k, m, d, v, np.frombuffer(v, dtype=np.float32)) for k, m, d, v in rows],
        )


def _schema(conn: Any) -> str:
    database = getattr(conn, "database", None)
    return database.schema if database is not None else ""


_indexed_dims: set[tuple[str, int]] = set()
_indexed_lock = threading.Lock()


def ensure_vector_index(conn: Any, dim: int) -> None:
    """Create the HNSW index (cosine) over the stored embeddings of width ``dim`` if missing:
    a partial index per width, since an HNSW index needs one (models of different widths share
    the ``embeddings`` table). Taken under the migration lock, inside the caller's transaction
    when there is one; this process remembers the index only once that transaction has
    committed (a rollback takes the index away with it)."""
    key = (_schema(conn), int(dim))
    with _indexed_lock:
        if key in _indexed_dims:
            return
    conn.execute("SELECT pg_advisory_xact_lock(?)", (lock_key("veil-migrate", key[0]),))
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS embeddings_hnsw_{int(dim)} ON embeddings USING hnsw"
        f" ((embedding::vector({int(dim)})) vector_cosine_ops)"
        f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE dim = {int(dim)}"
    )

    def remember() -> None:
        with _indexed_lock:
            _indexed_dims.add(key)

    after = getattr(conn, "after_commit", None)
    if after is not None:
        after(remember)
    else:  # a raw psycopg connection in autocommit: the statement has committed
        remember()


def forget_vector_indexes() -> None:
    """Forget which HNSW indexes this process created (tests that drop a schema)."""
    with _indexed_lock:
        _indexed_dims.clear()


def end_project_connections(url: str, project: str) -> int:
    """End every connection a store of ``project`` opened on the server at ``url`` (they carry
    ``application_name`` ``veil <schema>``, :class:`PgDatabase`); return how many (test
    teardown: :func:`veil.testing.postgres.end_connections`).

    Raises:
        psycopg.Error: the server cannot be reached, or the user may not end them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (f"veil {schema_name(project)}",),
        ).fetchall()
    return len(rows)
