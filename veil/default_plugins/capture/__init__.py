"""Default plugin ``veil.capture``: every turn and tool result becomes a context item
(:mod:`veil.default_plugins.capture.rules`). Blocked, nothing is captured, so nothing is
scored, evicted or recalled from this session's turns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession


@hookimpl
def capture(session: PluginSession, event: Any) -> list:
    """Items for turns and tool results
    (:func:`veil.default_plugins.capture.rules.capture_event`)."""
    from veil.default_plugins.capture.rules import capture_event

    return capture_event(session, event)
