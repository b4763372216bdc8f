"""The hook this plugin fires: ``attempt_recorded`` (declared here, not in the core: only the
convergence monitor records attempts; :func:`veil_convergence.register_hookspecs` hands this
module to the core).

A plugin that follows attempts implements it with ``@hookimpl(optionalhook=True)``, so it still
loads where ``veil_convergence`` is not installed or is blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookspec

if TYPE_CHECKING:  # pragma: no cover
    from veil import Attempt, PluginSession


@hookspec
def attempt_recorded(session: PluginSession, attempt: Attempt) -> None:
    """An attempt against the current goal was recorded (collected).

    Fired by ``veil_convergence``'s ``capture`` for each tool result it reads as an attempt (a
    test run, a build, a command that passed or failed), after its monitor recorded it and
    before a level change is announced. DESIGN.md names the use it is meant for: weighting the
    items in context by how things went (``ContextItem.cognitive_weight``); no default plugin
    implements it yet.

    :param session: the session the attempt was made in.
    :param attempt: the attempt: its step, command, outcome and error fingerprint.
    :return: nothing (a return value is ignored).
    """
