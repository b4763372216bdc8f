"""Writes that leave the call path: one background thread applies queued store writes in order.

An eviction pass of 1,000 items changes ~2,000 index rows in SQLite (the items' tiers, the
recall index, the event log): 40-50 ms of writes on this machine, where the decision itself
takes 3 ms. The pass is decided in memory, so the session's own view is already right; its
writes only have to land before anything reads the store. They are queued here and applied by
one thread, each job in one ``BEGIN IMMEDIATE`` transaction on the thread's own connection, in
the order they were queued, while the model answers.

Reads stay consistent: :class:`~veil.core.store.Store` drains the queue (:meth:`WriteBehind.drain`)
before any other thread uses the database, so every read and write after a pass sees the pass
whole. A crash before a job commits loses that pass's bookkeeping only: its items stay
``live`` in the store (nothing is lost; a resumed session evicts them again), because the job's
transaction is atomic. A job that fails rolls back and its error is raised by the next drain.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from veil.core.errors import VeilError
from veil.core.store.dialect import dialect_of

log = logging.getLogger(__name__)

Job = Callable[[Any], None]
"""A write: called with a store connection (SQLite's, or a PostgreSQL
:class:`~veil.core.store.postgres.PgConnection`) inside an open transaction."""


class WriteBehindError(VeilError):
    """A queued write failed and was rolled back; the message names the database and the job."""


class WriteBehind:
    """A FIFO of store writes applied by one daemon thread.

    Args:
        connect: opens the thread's own connection (called once, on the thread).
        name: the database, for error messages.

    Tier deltas: a job may carry ``{session_id: {tier: change in item count}}``, so
    :meth:`pending_tier_deltas` can add what is queued to committed counts without waiting.
    """

    def __init__(self, connect: Callable[[], Any], name: str) -> None:
        self._connect = connect
        self._name = name
        self._queue: queue.Queue[tuple[Job, str, dict[str, dict[str, int]]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._failed_job = ""
        self._lock = threading.Lock()  # guards _pending and the commit of a job carrying deltas
        self._pending: list[dict[str, dict[str, int]]] = []
        self._atexit_registered = False
        self.seconds = 0.0
        """Seconds the thread has spent applying jobs, commits included (for benchmarks)."""

    @property
    def pending(self) -> int:
        """Jobs queued and not yet committed (or rolled back)."""
        return self._queue.unfinished_tasks

    @property
    def failed(self) -> bool:
        """A job failed and the next :meth:`drain` will raise its error."""
        return self._error is not None

    def submit(
        self, job: Job, what: str, tier_deltas: dict[str, dict[str, int]] | None = None
    ) -> None:
        """Queue ``job`` (``what`` names it in errors); returns at once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="veil-write-behind", daemon=True)
            self._thread.start()
            if not self._atexit_registered:  # a script that never closes its store still lands
                atexit.register(self._drain_at_exit)
                self._atexit_registered = True
        deltas = tier_deltas or {}
        with self._lock:
            self._pending.append(deltas)
        self._queue.put((job, what, deltas))

    def drain(self) -> None:
        """Wait until every queued job has committed or rolled back.

        Raises:
            WriteBehindError: a job failed since the last drain (its writes were rolled back).
        """
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._queue.join()
        if self._error is not None:
            error, what = self._error, self._failed_job
            self._error, self._failed_job = None, ""
            raise WriteBehindError(
                f"{self._name}: a queued write ({what}) failed and was rolled back: {error}"
            ) from error

    def pending_tier_deltas(self, session_id: str) -> dict[str, int]:
        """The item-count change per tier that queued jobs will make to ``session_id``.

        Call it inside :meth:`counts_lock` together with the query of committed counts, so a
        job cannot commit between the two."""
        total: dict[str, int] = {}
        for deltas in self._pending:
            for tier, change in deltas.get(session_id, {}).items():
                total[tier] = total.get(tier, 0) + change
        return total

    @property
    def counts_lock(self) -> threading.Lock:
        """Held while a job carrying tier deltas commits and forgets its deltas."""
        return self._lock

    def close(self) -> None:
        """Drain, then stop the thread (a later :meth:`submit` starts a new one).

        Raises:
            WriteBehindError: as :meth:`drain`.
        """
        try:
            self.drain()
        finally:
            if self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()
            self._thread = None

    def _drain_at_exit(self) -> None:
        try:
            self.drain()
        except WriteBehindError as exc:
            log.error("%s", exc)

    def _run(self) -> None:
        conn = self._connect()
        try:
            while True:
                entry = self._queue.get()
                if entry is None:
                    self._queue.task_done()
                    return
                job, what, deltas = entry
                start = time.perf_counter()
                try:
                    self._apply(conn, job, deltas)
                except BaseException as exc:  # kept for the next drain, which raises it
                    log.exception("write-behind job %s failed", what)
                    if self._error is None:
                        self._error, self._failed_job = exc, what
                finally:
                    self.seconds += time.perf_counter() - start
                    self._queue.task_done()
        finally:
            conn.close()

    def _apply(self, conn: Any, job: Job, deltas: dict[str, dict[str, int]]) -> None:
        try:  # BEGIN too: a lock held past the busy timeout fails here, and the deltas must go
            conn.execute(dialect_of(conn).begin_write)
            job(conn)
            with self._lock:  # committed counts and pending deltas change together
                conn.execute("COMMIT")
                self._forget(deltas)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with self._lock:
                self._forget(deltas)
            raise

    def _forget(self, deltas: dict[str, dict[str, int]]) -> None:
        for n, entry in enumerate(self._pending):
            if entry is deltas:
                del self._pending[n]
                return
