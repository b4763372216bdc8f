"""veil's REPL plugin: hooks only; prompt-toolkit loads when the REPL starts (see repl.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.core.types import SlashCommand
from veil.hookspecs import hookimpl
from veil_repl import display

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


@hookimpl
def run_interactive(veil: Any, session: Session) -> bool:
    """Run the REPL on ``session`` until /exit or Ctrl-D."""
    from veil_repl.repl import Repl

    Repl(veil, session).run()
    return True


@hookimpl
def render(event: Any) -> None:
    """Show events while a REPL is running (silent otherwise, e.g. under ``veil -p``)."""
    if display.active is not None:
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
