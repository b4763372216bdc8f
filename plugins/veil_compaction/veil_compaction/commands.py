"""Front-end commands: ``/compact [instructions]`` in the REPL and ``veil compact`` for scripts.

Both call the core's :meth:`veil.core.app.Veil.compact` (front ends call the core, never this
plugin's functions), which runs defaultCompaction and asks this plugin's ``summarise`` for the
text.
"""

from __future__ import annotations

import json
from typing import Any

import click

from veil import SlashCommand, VeilError


def context_tokens(session: Any) -> int:
    """Tokens of what the session sends besides the system prompt: summary + messages from
    ``compact_size`` on (the session's tokenizer)."""
    start = min(session.compact_size, len(session.messages))
    from veil import conversation_tokens  # not needed by `veil --help`

    return conversation_tokens(session, session.compact_summary, session.messages[start:])


def compact_slash(session: Any, argument: str) -> str:
    """``/compact [instructions]``: run defaultCompaction on the REPL's session and say how many
    tokens the conversation takes before and after. Errors (COMPACTION_DISABLED...) are shown."""
    before = context_tokens(session)
    try:
        result = session.veil.compact(session.id, argument.strip() or None)
    except VeilError as exc:
        return f"/compact: {exc.code}: {exc.message}"
    # Veil.compact worked on a copy loaded from the store: bring this live session up to date,
    # or its next save would write the old summary back.
    stored = result["session"]
    session.compact_summary = stored["compactSummary"]
    session.compact_size = stored["compactSize"]
    if result["alreadyUpToDate"]:
        return f"already up to date: nothing new to compact ({before} tokens)"
    after = context_tokens(session)
    return (
        f"compacted {_messages(result['compactedCount'])} (compactSize {result['newSize']}): "
        f"{before} -> {after} tokens"
    )


def _messages(count: int) -> str:
    return f"{count} message" + ("" if count == 1 else "s")


def slash_commands() -> list[SlashCommand]:
    """The REPL commands of this plugin."""
    return [
        SlashCommand(
            "compact",
            "summarise the older part of the conversation (defaultCompaction); "
            "/compact TEXT adds instructions",
            compact_slash,
        )
    ]


def add_cli_commands(cli: click.Group) -> None:
    """Add ``veil compact`` to the command line."""

    @cli.command("compact")
    @click.option(
        "--session", "session_id", metavar="ID", help="Session id (default: the most recent)."
    )
    @click.option("--instructions", metavar="TEXT", help="Extra instructions for the summary.")
    @click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
    @click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True),
        help="Project root (default: current directory).",
    )
    @click.pass_obj
    def compact_cmd(
        state: Any,
        session_id: str | None,
        instructions: str | None,
        as_json: bool,
        project: str | None,
    ) -> None:
        """Run defaultCompaction on a stored session and print the result."""
        from veil import open_veil

        project = project or getattr(state, "project", None)
        disabled = tuple(getattr(state, "disabled", ()) or ())
        try:
            veil = open_veil(project, disable=disabled)
        except (VeilError, ImportError) as exc:
            raise click.ClickException(getattr(exc, "message", str(exc))) from exc
        try:
            session_id = session_id or veil.last_session_id()
            if session_id is None:
                raise click.ClickException("no open session to compact; start one with veil")
            result = veil.compact(session_id, instructions)
        except VeilError as exc:
            raise click.ClickException(f"{exc.code}: {exc.message}") from exc
        finally:
            veil.close()
        if as_json:
            click.echo(json.dumps(result, indent=2, default=str))
        elif result["alreadyUpToDate"]:
            click.echo(
                f"{result['sessionId']}: already up to date (compactSize {result['newSize']})"
            )
        else:
            click.echo(
                f"{result['sessionId']}: compacted {_messages(result['compactedCount'])} "
                f"(compactSize {result['newSize']})"
            )
