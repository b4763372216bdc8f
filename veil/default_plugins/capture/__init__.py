"""Default plugin ``veil.capture``: every turn and tool result becomes a context item
(:mod:`veil.default_plugins.capture.rules`). Blocked, nothing is captured, so nothing is
scored, evicted or recalled from this session's turns."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def capture(session: Any, event: Any) -> list:
    """Items for turns and tool results
    (:func:`veil.default_plugins.capture.rules.capture_event`)."""
    from veil.default_plugins.capture.rules import capture_event

    return capture_event(session, event)
