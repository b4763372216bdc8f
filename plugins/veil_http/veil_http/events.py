"""Routing of render events to the streaming requests that wait for them.

The agent loop runs in a worker thread and calls the ``render`` hook there; a streaming request
lives on the event loop. :class:`EventHub` keeps, per session id, the callbacks of the requests
streaming that session, and each callback hands the event over to its own loop thread-safely.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from veil import RenderEvent

Listener = Callable[[RenderEvent], None]


class EventHub:
    """Thread-safe ``session id -> listeners`` map fed by the ``render`` hook.

    A listener must not block (it runs inside the agent loop); a listener that raises is
    skipped, never allowed to break the turn.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, list[Listener]] = {}

    @contextmanager
    def subscribe(self, session_id: str, listener: Listener) -> Iterator[None]:
        """Deliver the events of ``session_id`` to ``listener`` while the block runs."""
        with self._lock:
            self._listeners.setdefault(session_id, []).append(listener)
        try:
            yield
        finally:
            with self._lock:
                listeners = self._listeners.get(session_id, [])
                if listener in listeners:
                    listeners.remove(listener)
                if not listeners:
                    self._listeners.pop(session_id, None)

    def publish(self, event: RenderEvent) -> int:
        """Hand ``event`` to the listeners of its session; return how many received it.

        Events without a session id (global notices) go nowhere: a stream belongs to a session.
        """
        if event.session_id is None:
            return 0
        with self._lock:
            listeners = list(self._listeners.get(event.session_id, ()))
        delivered = 0
        for listener in listeners:
            try:
                listener(event)
                delivered += 1
            except Exception:  # noqa: BLE001 - a gone client must not break the agent loop
                continue
        return delivered

    def listening(self, session_id: str) -> int:
        """Number of listeners on ``session_id`` (for tests and diagnostics)."""
        with self._lock:
            return len(self._listeners.get(session_id, ()))


HUB = EventHub()
"""The process-wide hub the plugin's ``render`` hook publishes to (session ids are unique)."""
