"""veil_convergence: attempts, error fingerprints and escalation (seed 002, issue 7).

Hooks implemented:

* ``capture``: on ``tool_result`` builds the :class:`~veil.core.types.Attempt`, feeds the
  monitor, calls ``attempt_recorded`` and announces level changes through ``session.emit``
  (``warning`` for levels 1-2, ``halt`` plus ``session.request_halt`` for level 3, ``info`` when
  progress clears a warning); on ``user`` starts a new goal. It contributes no context items.
* ``system_prompt_sections``: at level >= 1, a ``convergence`` section (order 800) naming the
  failing approach to avoid.
* ``replay_report``: ``{"convergence": {"fingerprints", "levels"}}`` for ``veil replay``, from
  what ``capture`` recorded while the session was replayed.

Settings: ``convergence.softRepeats`` (3), ``strongFailures`` (5), ``haltWithoutProgress`` (15).
The monitor lives in ``session.state["veil_convergence"]["monitor"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil import CaptureEvent, ContextItem, PromptSection
from veil.hookspecs import hookimpl
from veil_convergence.fingerprint import error_signature, fingerprint
from veil_convergence.monitor import ConvergenceMonitor, LevelChange
from veil_convergence.outcome import build_attempt
from veil_convergence.replay import convergence_report, report_of

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession

__all__ = [
    "register_settings",
    "ConvergenceMonitor",
    "capture",
    "convergence_report",
    "error_signature",
    "fingerprint",
    "monitor_for",
    "register_hookspecs",
    "replay_report",
    "system_prompt_sections",
]

PLUGIN_NAME = "veil_convergence"
PROMPT_ORDER = 800


def monitor_for(session: Any) -> ConvergenceMonitor:
    """The session's monitor, created on first use from ``session.config.settings.convergence``."""
    state = session.state.setdefault(PLUGIN_NAME, {})
    monitor = state.get("monitor")
    if monitor is None:
        monitor = ConvergenceMonitor.from_settings(session.config.settings.convergence)
        state["monitor"] = monitor
    return monitor


@hookimpl
def register_hookspecs() -> list[Any]:
    """The hook this plugin fires (``attempt_recorded``: :mod:`veil_convergence.hookspecs`)."""
    from veil_convergence import hookspecs

    return [hookspecs]


@hookimpl
def capture(session: PluginSession, event: CaptureEvent) -> list[ContextItem]:
    """Record tool results as attempts; a user message starts a new goal. Returns ``[]``."""
    if event.phase == "user":
        monitor_for(session).reset()
        return []
    if event.phase != "tool_result" or event.result is None:
        return []
    built = build_attempt(
        event.step, event.tool_name or "", event.arguments, event.result, session.cwd
    )
    if built is None:
        return []
    attempt, signature = built
    monitor = monitor_for(session)
    change = monitor.record(attempt, label=signature.label if signature else None)
    session.veil.pm.hook.attempt_recorded(session=session, attempt=attempt)
    if change is not None:
        _announce(session, change)
    return []


def _announce(session: Any, change: LevelChange) -> None:
    """Tell the front ends (``render``) about a level change; level 3 also stops the run."""
    data = {
        "level": change.new,
        "message": change.message,
        "fingerprint": change.fingerprint,
        "label": change.label,
        "step": change.step,
    }
    if change.new == 3 and change.old < 3:
        session.emit("halt", **data)
        session.request_halt(f"convergence: {change.message}")
    elif change.new > change.old:
        session.emit("warning", **data)
    else:
        session.emit("info", **data)


@hookimpl
def system_prompt_sections(session: PluginSession) -> PromptSection | None:
    """The ``convergence`` section while a warning is active (level >= 1), else None. It is
    volatile: it comes and goes with the level, so it is sent in the context note after the
    conversation, not in the system message (whose prefix must stay put)."""
    text = monitor_for(session).prompt_text()
    if text is None:
        return None
    return PromptSection(name="convergence", text=text, order=PROMPT_ORDER, volatile=True)


@hookimpl(optionalhook=True)  # declared by the plugin that fires it
def replay_report(session: PluginSession) -> dict[str, Any]:
    """``{"convergence": {"fingerprints": int, "levels": [{"step", "level", "fingerprint"}]}}``
    for one replayed session (issue 7): distinct error fingerprints and every level rise."""
    return {"convergence": report_of(monitor_for(session))}


@hookimpl
def register_settings() -> dict[str, Any]:
    """The ``convergence`` section (:class:`~veil_convergence.settings.ConvergenceSettings`;
    imported here: pydantic is not needed by ``veil --help``)."""
    from veil_convergence.settings import ConvergenceSettings

    return {"convergence": ConvergenceSettings}
