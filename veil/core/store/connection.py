"""Connections to ``.veil/context.db``: setup (WAL, busy timeout, foreign keys), applying the
schema's migrations (:mod:`veil.core.store.schema`) and loading the sqlite-vec extension.

The connection comes from ``sqlean`` (sqlean.py, a drop-in sqlite3 with extension loading enabled)
when it is installed, so sqlite-vec can load even where the interpreter's own ``sqlite3`` cannot
load extensions (pyenv's default build, macOS's system Python); otherwise from ``sqlite3``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.core.errors import VeilError
from veil.core.safety.paths import refuse_links
from veil.core.store.schema import MIGRATIONS

try:  # sqlean.py: same API as sqlite3, with load_extension available everywhere
    import sqlean as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - fallback when sqlean.py is not installed
    import sqlite3  # type: ignore[no-redef]

BUSY_TIMEOUT_MS = 10_000


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


def load_sqlite_vec(conn: Any) -> None:
    """Load the sqlite-vec extension into ``conn`` once.

    Raises:
        VeilError: the ``sqlite-vec`` package or extension loading is unavailable.
    """
    try:
        conn.execute("SELECT vec_version()")
        return
    except Exception:  # noqa: BLE001 - not loaded yet
        pass
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as exc:  # noqa: BLE001 - any loader failure means the same to the caller
        raise VeilError(f"sqlite-vec could not be loaded: {exc}") from exc
