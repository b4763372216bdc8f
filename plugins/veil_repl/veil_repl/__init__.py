"""veil's REPL plugin: hooks only; prompt-toolkit and rich load when the REPL starts (see
repl.py), not when another command (``veil --help``, ``veil -p``) loads the plugin."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import Session, SlashCommand


@hookimpl
def run_interactive(veil: Any, session: Session) -> bool:
    """Run the REPL on ``session`` until /exit or Ctrl-D."""
    from veil_repl.repl import Repl

    Repl(veil, session).run()
    return True


@hookimpl
def render(event: Any) -> None:
    """Show events while a REPL is running (silent otherwise, e.g. under ``veil -p``). The
    display module is loaded only by a REPL (or a test): when it is not, nothing shows."""
    display = sys.modules.get("veil_repl.display")
    if display is not None and display.active is not None:
        display.active.show(event)


@hookimpl
def ask_permission(request: Any) -> str | None:
    """Ask whether a tool call may run, while a REPL is running (None otherwise: ``veil -p``
    and HTTP leave the call to the rules)."""
    from veil_repl import permission

    if permission.active is None:
        return None
    return permission.active.ask(request)


@hookimpl
def register_slash_commands(veil: Any) -> list[SlashCommand]:
    """/model, /sessions and /context (the REPL itself handles /help and /exit)."""
    from veil_repl import commands

    return commands.slash_commands(veil)
