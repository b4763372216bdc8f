"""Embeddings of a session's turns, for the eviction policy's rescue of old turns.

Seed 002: "a turn the current one still refers to gets rescued: cosine similarity above 0.7
against a recent turn cuts its eviction score". The policy reads ``TurnEmbeddings.vectors``
(item id -> unit float32 vector) from the session's :class:`~veil_fsrs.session_state.
FsrsSessionState`; the plugin's hooks fill it as items become live
(:mod:`veil_fsrs.evict_plugin`: ``items_added``, ``after_eviction``, ``session_start``,
``before_close``).

Modes (``context.rescue_embeddings``):

* ``background`` (default): turns are embedded on one daemon worker thread shared by the
  process, while the model call is in flight, so capture never waits for the embedding model
  (its first load takes seconds) and a process that ends is not held up by it. A vector not
  ready yet is simply absent for that pass.
* ``sync``: embedded in the caller's thread (deterministic: replays use it).
* ``off``: nothing is embedded; no turn is rescued.

Nothing is embedded before the session's first eviction: a session that never comes under
pressure (most one-shot runs) never loads the embedding model. From the first eviction on, the
live turns and every new turn are embedded; a resumed session that had evictions before starts
at once.

Vectors come from the tiers' cached embedder (``embeddings`` table, keyed by content hash), so
a turn embedded once is never embedded again, also when it is later evicted and indexed for
recall. An embedder that fails (model missing, Ollama down) switches the session's rescue off
with one warning; capture carries on.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from veil import ContextItem

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession

log = logging.getLogger(__name__)

TURN_SOURCES = ("user", "assistant")
"""Item sources that are turns (the rescue compares turns with turns)."""

_jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = queue.SimpleQueue()
_worker_started = False
_worker_lock = threading.Lock()
_stopping = threading.Event()
_running: list[threading.Event] = []  # the completion event of the job in flight, if any
JOB_SIZE = 32
"""Turns per background job: a job in flight when the process exits ends within a fraction of
a second, and exit waits for it (a daemon thread killed inside torch aborts the process)."""
EXIT_WAIT_SECONDS = 60.0
_closing: set[int] = set()  # id() of Veil apps being closed: their queued jobs are skipped
_pending: dict[int, list[threading.Event]] = {}  # id() of a Veil app -> its unfinished jobs


def drain(veil: object, timeout: float = EXIT_WAIT_SECONDS) -> None:
    """Before ``veil`` closes its store (the ``before_close`` hook): skip its queued jobs and
    wait (up to ``timeout`` seconds) for the one in flight, while the interpreter is still
    whole. (A job still loading the model when Python shuts down fails inside torch's import:
    "can't register atexit after shutdown".)"""
    key = id(veil)
    _closing.add(key)
    try:
        for done in _pending.pop(key, []):
            done.wait(timeout)
    finally:
        _closing.discard(key)


def _run_jobs() -> None:
    while True:
        job, done = _jobs.get()
        if _stopping.is_set():
            done.set()  # exiting: queued work is dropped (the cache simply misses it)
            continue
        _running[:] = [done]
        try:
            job()
        finally:
            _running.clear()
            done.set()


@atexit.register
def _stop_worker() -> None:
    """At exit: skip queued jobs and wait for the one in flight (see :data:`JOB_SIZE`)."""
    _stopping.set()
    for done in list(_running):
        done.wait(EXIT_WAIT_SECONDS)


def _submit(job: Callable[[], None]) -> threading.Event:
    """Run ``job`` on the shared daemon worker; the returned event is set when it ends."""
    global _worker_started
    with _worker_lock:
        if not _worker_started:
            threading.Thread(target=_run_jobs, name="veil-embed", daemon=True).start()
            _worker_started = True
    done = threading.Event()
    if _stopping.is_set():
        done.set()
        return done
    _jobs.put((job, done))
    return done


class TurnEmbeddings:
    """The vectors of one session's turns, filled from its first eviction on.

    Args:
        session: the session whose turns are embedded.
        mode: ``background``, ``sync`` or ``off`` (see the module docstring).

    Attributes:
        vectors: the mapping the eviction policy reads (item id -> float32 vector, 384-d for
            the bundled MiniLM); only ever grows.
        active: whether the session has had its first eviction (embedding starts then).
        pending: completion events of background jobs not known to be finished.
        failed: the embedder's error message once it failed (rescue then stays off).
    """

    def __init__(self, session: PluginSession, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.vectors: dict[str, object] = {}
        self.active = False
        self.pending: list[threading.Event] = []
        self.failed: str | None = None

    def start(self) -> None:
        """The session evicted for the first time: embed its live turns from now on."""
        if self.active or self.mode == "off":
            return
        self.active = True
        self.add(list(self.session.live_items))

    def add(self, items: Sequence[ContextItem]) -> None:
        """Embed the turns among ``items`` (other sources are ignored), now or on the worker;
        nothing before :meth:`start`."""
        if not self.active or self.failed is not None:
            return
        turns = [i for i in items if i.source in TURN_SOURCES and i.content.strip()]
        turns = [i for i in turns if i.id not in self.vectors]
        if not turns:
            return
        if self.mode == "sync":
            self._embed(turns)
            return
        self.pending = [e for e in self.pending if not e.is_set()]
        key = id(self.session.veil)
        mine = _pending.setdefault(key, [])
        mine[:] = [e for e in mine if not e.is_set()]
        for start in range(0, len(turns), JOB_SIZE):
            chunk = turns[start : start + JOB_SIZE]
            done = _submit(lambda chunk=chunk: key in _closing or self._embed(chunk))
            self.pending.append(done)
            mine.append(done)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every background job submitted so far has finished (tests, replays).

        Raises:
            TimeoutError: a job is still running after ``timeout`` seconds.
        """
        for done in list(self.pending):
            if not done.wait(timeout):
                raise TimeoutError(f"turn embeddings still running after {timeout} s")
        self.pending.clear()

    def _embed(self, turns: list[ContextItem]) -> None:
        if self.failed is not None:
            return
        try:
            found = self.session.veil.tiers.item_vectors(turns, compute=True)
        except Exception as exc:  # the model is optional for the rescue: never break capture
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("turn embeddings off for this session (%s)", self.failed)
            return
        self.vectors.update(found)
