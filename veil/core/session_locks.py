"""One lock per session, held around every change of it (a turn, a compaction, close, pin), shared
by threads and processes.

Two veil processes on one project (``veil serve`` twice, the REPL beside ``veil -c -p``) share
``.veil/context.db``. Without a lock, a turn in one process and a compaction in another both
change the session at once, and the one that saves last undoes the other. The lock is a file
per session, ``<store folder>/locks/<session id>.lock``, held with :mod:`filelock` (``flock`` on
POSIX, ``msvcrt`` locking on Windows): the operating system releases it when its process dies,
so a killed process never leaves a session locked.

The ``locks`` folder and its files lie in the store's folder (``.veil/``), which a cloned
repository can ship with symbolic links in it: before each lock is taken the path goes through
:func:`veil.core.safety.paths.checked` (no link from the store folder down, nothing outside it), so a
``locks`` link to an outside folder, or a lock file that is a link, gives
:class:`~veil.core.errors.UnsafeVeilPath` instead of a file created or truncated outside.

With a PostgreSQL store (``store.url``) the lock is the database's instead:
:class:`DatabaseSessionLocks` holds a session-level advisory lock per session on one connection
of its own, which PostgreSQL releases when that connection ends, so a process killed on one
machine frees its sessions for the others.

Holding is re-entrant on one thread (a turn that compacts takes the lock it already holds) and
exclusive between threads and processes. A second holder does not queue: it gets
:class:`~veil.core.errors.SessionBusy` at once (409 over HTTP), before it stores anything, so a
request never waits out a whole turn of another process. Threads of one front end that should
queue (the HTTP server) serialise on their own in-process lock first
(:meth:`veil.core.app.Veil.session_lock`).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock

from veil.core.errors import SessionBusy, UnsafeVeilPath
from veil.core.safety.paths import checked
from veil.core.store.dialect import lock_key
from veil.core.store.postgres import advisory_unlock, try_advisory_lock

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.store import Store

log = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME_CHARS = 200
"""Longest lock file name before ``.lock``: under the 255 bytes of ext4, APFS and NTFS names."""


class SessionLocks:
    """The per-session file locks of one store.

    Args:
        store_path: the store's database file; ``":memory:"`` (one process only) gives locks that
            exist in this process alone.
        wait_s: seconds a second holder waits before :class:`SessionBusy` (0: fail at once).
    """

    def __init__(self, store_path: str | Path, *, wait_s: float = 0.0) -> None:
        self.folder: Path | None = (
            None if str(store_path) == ":memory:" else Path(store_path).parent / "locks"
        )
        self.wait_s = wait_s
        self._locks: dict[str, filelock.BaseFileLock | threading.RLock] = {}
        self._guard = threading.Lock()
        self._held: dict[str, int] = {}  # session id -> holds in this process now

    @staticmethod
    def in_database(store: Store, *, wait_s: float = 0.0) -> DatabaseSessionLocks:
        """The session locks of a PostgreSQL store: advisory locks in its database
        (:class:`DatabaseSessionLocks`, same methods)."""
        return DatabaseSessionLocks(store, wait_s=wait_s)

    def path(self, session_id: str) -> Path | None:
        """The lock file of a session (None for an in-memory store). Characters outside
        ``[A-Za-z0-9_.-]`` in the id become ``_`` (ids are ``sess_<hex>``: nothing changes); an
        id longer than :data:`MAX_NAME_CHARS` is cut and ends with a hash of the whole id, so
        the name fits every file system (255 bytes) and stays one id's own."""
        if self.folder is None:
            return None
        name = _SAFE_ID.sub("_", session_id)
        if len(name) > MAX_NAME_CHARS:
            digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
            name = f"{name[: MAX_NAME_CHARS - 65]}-{digest}"
        return self.folder / f"{name}.lock"

    def _safe_path(self, session_id: str) -> Path | None:
        """:meth:`path`, checked to contain no symbolic link from the store's folder down, with
        the ``locks`` folder created.

        Raises:
            UnsafeVeilPath: ``locks`` or the lock file is a symbolic link (or leaves the store's
                folder)."""
        path = self.path(session_id)
        if path is None:
            return None
        store_dir = path.parent.parent
        checked(store_dir, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return checked(store_dir, path)  # again: the folder may have appeared meanwhile

    def _lock(self, session_id: str) -> filelock.BaseFileLock | threading.RLock:
        with self._guard:
            lock = self._locks.get(session_id)
            if lock is None:
                path = self._safe_path(session_id)
                if path is None:
                    lock = threading.RLock()
                else:
                    # thread_local: each thread holds through its own file descriptor, so two
                    # threads exclude each other like two processes do; one thread re-enters
                    lock = filelock.FileLock(str(path), thread_local=True)
                self._locks[session_id] = lock
            return lock

    @contextmanager
    def hold(self, session_id: str, what: str = "a change") -> Iterator[None]:
        """Hold the session's lock for the block.

        Args:
            session_id: the session.
            what: what the holder does, for the error message (``"a turn"``).

        Raises:
            SessionBusy: another thread or process holds it (after ``wait_s`` seconds).
            UnsafeVeilPath: the ``locks`` folder or the lock file is a symbolic link.
        """
        lock = self._lock(session_id)
        if isinstance(lock, filelock.BaseFileLock):
            self._safe_path(session_id)  # checked at every hold: links may appear later
            try:
                with _links_refused(Path(lock.lock_file)):
                    lock.acquire(timeout=self.wait_s)
                held = True
            except filelock.Timeout:
                held = False
        else:
            held = lock.acquire(timeout=self.wait_s) if self.wait_s > 0 else lock.acquire(False)
        if not held:
            raise SessionBusy(
                f"session {session_id} is busy: another veil process or request is changing "
                f"it (a turn, a compaction...), so {what} cannot start now; retry when it ends"
            )
        with self._guard:
            self._held[session_id] = self._held.get(session_id, 0) + 1
        try:
            yield
        finally:
            with self._guard:
                self._held[session_id] -= 1
            lock.release()

    def check_free(self, session_id: str, what: str = "a change") -> None:
        """Raise :class:`SessionBusy` now if *another process* holds the session's lock; a hold
        in this process (a turn another request of this server runs) is not an obstacle, since
        this process's callers queue (:meth:`veil.core.app.Veil.session_lock`). For a front end
        that must answer before the work starts (a stream's status line); the work itself still
        takes the lock, so a process that takes it in between is refused then.

        Raises:
            SessionBusy: another process holds the lock.
            UnsafeVeilPath: the ``locks`` folder or the lock file is a symbolic link."""
        path = self.path(session_id)
        with self._guard:
            if path is None or self._held.get(session_id):
                return
        self._safe_path(session_id)
        probe = filelock.FileLock(str(path), thread_local=False)
        try:
            with _links_refused(path):
                probe.acquire(timeout=0)
        except filelock.Timeout:
            raise SessionBusy(
                f"session {session_id} is busy: another veil process is changing it (a turn, "
                f"a compaction...), so {what} cannot start now; retry when it ends"
            ) from None
        probe.release()


@contextmanager
def _links_refused(path: Path) -> Iterator[None]:
    """Turn the error of opening a lock file that became a symbolic link after the check
    (filelock opens with ``O_NOFOLLOW``: ``ELOOP`` on Linux and macOS, ``EMLINK`` on FreeBSD)
    into :class:`UnsafeVeilPath`."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafeVeilPath(
                f"{path}: is a symbolic link; veil does not follow links inside .veil/ (a "
                "cloned repository could point them at files outside the project); remove it"
            ) from None
        raise


def _busy(session_id: str, what: str) -> SessionBusy:
    return SessionBusy(
        f"session {session_id} is busy: another veil process or request is changing it (a "
        f"turn, a compaction...), so {what} cannot start now; retry when it ends"
    )


class DatabaseSessionLocks:
    """Per-session locks of a PostgreSQL store, shared by every process on every machine that
    uses its database: a session-level advisory lock (``pg_try_advisory_lock``) per session,
    keyed by the project's schema and the session id (:func:`~veil.core.store.dialect.lock_key`),
    held on one connection of this object's own. PostgreSQL releases the locks of a connection
    that ends, so a killed process never leaves a session locked.

    The same contract as :class:`SessionLocks`: re-entrant on one thread, exclusive between
    threads and processes, a second holder refused with :class:`SessionBusy` at once (or after
    ``wait_s``).

    Args:
        store: the PostgreSQL :class:`~veil.core.store.Store`.
        wait_s: seconds a second holder waits before :class:`SessionBusy` (0: fail at once).
    """

    folder = None

    def __init__(self, store: Store, *, wait_s: float = 0.0) -> None:
        assert store.database is not None, "a PostgreSQL store"
        self.database = store.database
        self.wait_s = wait_s
        self._guard = threading.Lock()
        self._conn_lock = threading.Lock()
        self._conn: Any = None
        self._owners: dict[str, list[int]] = {}  # session id -> [thread id, holds]

    def path(self, session_id: str) -> None:
        """No file: the lock lives in the database."""
        return None

    def _key(self, session_id: str) -> int:
        return lock_key("veil-session", self.database.schema, session_id)

    def _query(self, call: Callable[[Any, int], bool], key: int) -> bool:
        """Run an advisory-lock function (:func:`veil.core.store.postgres.try_advisory_lock`,
        :func:`~veil.core.store.postgres.advisory_unlock`) on the lock connection; one
        reconnect when it died
        (the locks it held died with it: the version compare-and-swap still refuses a stale
        write)."""
        import psycopg

        with self._conn_lock:
            for attempt in (1, 2):
                if self._conn is None or self._conn.closed:
                    self._conn = self.database.dedicated()
                try:
                    return call(self._conn, key)
                except psycopg.OperationalError:
                    if attempt == 2:
                        raise
                    log.warning(
                        "%s: the session-lock connection was lost; reconnecting (locks it held "
                        "were released)",
                        self.database.name,
                    )
                    self._conn = None
        return False  # pragma: no cover - the loop returns or raises

    @contextmanager
    def hold(self, session_id: str, what: str = "a change") -> Iterator[None]:
        """Hold the session's lock for the block.

        Raises:
            SessionBusy: another thread or process holds it (after ``wait_s`` seconds).
            StoreUnavailable: the database cannot be reached."""
        me = threading.get_ident()
        deadline = time.monotonic() + self.wait_s
        while True:
            with self._guard:
                owner = self._owners.get(session_id)
                if owner is not None and owner[0] == me:
                    owner[1] += 1
                    first = False
                    taken = True
                elif owner is None:
                    self._owners[session_id] = [me, 1]
                    first = True
                    taken = True
                else:
                    first = taken = False
            if first:
                try:
                    taken = self._query(try_advisory_lock, self._key(session_id))
                finally:
                    if not taken:
                        with self._guard:
                            self._owners.pop(session_id, None)
            if taken:
                break
            if time.monotonic() >= deadline:
                raise _busy(session_id, what)
            time.sleep(0.05)
        try:
            yield
        finally:
            with self._guard:
                entry = self._owners[session_id]
                entry[1] -= 1
                last = entry[1] == 0
                if last:
                    del self._owners[session_id]
            if last:
                try:
                    self._query(advisory_unlock, self._key(session_id))
                except Exception:  # noqa: BLE001 - a lost connection released it already
                    log.warning("%s: session %s unlock failed", self.database.name, session_id)

    def check_free(self, session_id: str, what: str = "a change") -> None:
        """Raise :class:`SessionBusy` now if *another process* holds the session's lock (see
        :meth:`SessionLocks.check_free`).

        Raises:
            SessionBusy: another process holds the lock."""
        with self._guard:
            if session_id in self._owners:
                return
        key = self._key(session_id)
        if not self._query(try_advisory_lock, key):
            raise _busy(session_id, what)
        self._query(advisory_unlock, key)

    def close(self) -> None:
        """Close the lock connection (releasing every lock it holds)."""
        with self._conn_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
