"""Convergence over a recorded session, for ``veil replay`` (issue 7).

The recorded session is given as its observations; each recorded action is read as a shell
command (mini-swe-agent, SWE-agent and OpenHands ``run`` actions are commands; an editor action
such as ``edit 12:14`` simply has no known program). The whole list is one goal, as in a
recorded run that answers one task.
"""

from __future__ import annotations

from typing import Any

from veil import ToolResult
from veil_convergence.monitor import ConvergenceMonitor
from veil_convergence.outcome import build_attempt


def convergence_report(
    observations: list[tuple[int, str, str]], settings: Any | None = None
) -> dict[str, Any]:
    """Replay the convergence monitor over a recorded session.

    Args:
        observations: ``(step, action_text, observation_text)`` in order; ``action_text`` is the
            command that produced ``observation_text`` (mini-swe-agent's ``<returncode>`` tag in
            the observation gives the exit status).
        settings: a :class:`veil_convergence.settings.ConvergenceSettings`; None uses the defaults
            (3 / 5 / 15, DESIGN.md).

    Returns:
        ``{"fingerprints": int, "levels": [{"step", "level", "fingerprint"}]}``:
        ``fingerprints`` is the number of distinct error fingerprints in the session; ``levels``
        lists every step at which the level rose, with the fingerprint of the failing approach
        (None when the attempts held no recognised error).

    Raises:
        ValueError: an observation is not a ``(int, str, str)`` tuple (names its position).
    """
    monitor = (
        ConvergenceMonitor() if settings is None else ConvergenceMonitor.from_settings(settings)
    )
    for position, item in enumerate(observations):
        if (
            not isinstance(item, tuple | list)
            or len(item) != 3
            or not isinstance(item[0], int)
            or not all(isinstance(x, str) for x in item[1:])
        ):
            raise ValueError(f"observations[{position}]: expected (step, action, observation)")
        step, action, text = item
        built = build_attempt(step, "bash", {"command": action}, ToolResult(content=text))
        if built is None:  # pragma: no cover - "bash" is never an ignored tool
            continue
        attempt, signature = built
        monitor.record(attempt, label=signature.label if signature else None)
    return report_of(monitor)


def report_of(monitor: ConvergenceMonitor) -> dict[str, Any]:
    """``{"fingerprints", "levels"}`` of what a monitor has recorded (see
    :func:`convergence_report`)."""
    return {
        "fingerprints": len(monitor.seen_fingerprints),
        "levels": [dict(entry) for entry in monitor.history],
    }
