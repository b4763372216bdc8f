"""Consecutive compaction failures, and the circuit breaker that stops automatic compaction.

A compaction fails when the summariser raises (a provider error, an empty or invisible-only
summary) or when its summary would not shrink the prompt (:class:`CompactionRejected`). On a small
window such a compaction repeats every turn without ever getting under the limit (issue 19), so
after ``compaction.maxConsecutiveFailures`` failures in a row automatic compaction (full and
``autoThreshold``) stops for the session with one warning. A successful compaction, manual
``/compact`` included, resets the count and starts it again. The count is kept in
``session.state["veil_compaction"]`` and so survives a resumed session.
"""

from __future__ import annotations

from typing import Any

STATE_KEY = "veil_compaction"
FAILURES = "consecutiveFailures"


def limit(session: Any) -> int:
    """``compaction.maxConsecutiveFailures`` in effect (3 by default)."""
    return int(session.config.settings.compaction.max_consecutive_failures)


def count(session: Any) -> int:
    """Failures in a row so far (0 after a success)."""
    return int(session.state.get(STATE_KEY, {}).get(FAILURES, 0))


def stopped(session: Any) -> bool:
    """Whether automatic compaction has stopped for ``session`` (the limit is reached)."""
    return count(session) >= limit(session)


def failed(session: Any, what: str, reason: str) -> None:
    """Record a failure of ``what`` (e.g. ``"full compaction"``) and warn the user: the
    failure itself, and once the limit is reached, that automatic compaction stops."""
    state = session.state.setdefault(STATE_KEY, {})
    state[FAILURES] = count(session) + 1
    session.emit("warning", text=f"{what} failed, context unchanged: {reason}")
    if state[FAILURES] == limit(session):
        session.emit(
            "warning",
            text=(
                f"automatic compaction stopped after {state[FAILURES]} consecutive failures "
                "(compaction.maxConsecutiveFailures); the conversation is left as it is; "
                "run /compact to try again"
            ),
        )


def succeeded(session: Any) -> None:
    """Reset the count after a compaction that was applied."""
    state = session.state.setdefault(STATE_KEY, {})
    state.pop(FAILURES, None)
