"""``veil memory ...``: memory files from scripts (issue 4).

* ``veil memory write TEXT [--scope agent|global] [--agent NAME]`` prints the status word
  (``written``, ``skipped_empty``, ``skipped_duplicate``, or ``disabled`` when memory is off for
  the agent) and exits 0; ``TEXT`` ``-`` reads the text from standard input.
* ``veil memory show [--scope agent|global] [--agent NAME]`` prints the files' raw text.
* ``veil memory search QUERY [--json] [--limit N] [--agent NAME]`` prints the hits.

Every command takes ``--project DIR`` (default: the current directory). Bad configuration or a
refused name exits 1 with the error's message (no traceback).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from veil.core.errors import VeilError
from veil.core.settings import load_config
from veil_memoryfiles.service import MemoryService

_SCOPE = click.Choice(["agent", "global"])


def _service(project: str | None, agent: str | None) -> MemoryService:
    config = load_config(project or os.getcwd())
    return MemoryService(config, agent or config.settings.default_agent)


def _clean_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    # VeilError (ConfigError, UnsafePath, MemoryBusy...) -> one line on stderr, exit 1.
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except VeilError as exc:
            raise click.ClickException(exc.message) from exc

    return wrapper


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--agent", default=None, help="Agent name (default: settings defaultAgent).")(
        fn
    )
    fn = click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="Project root holding .veil/ (default: current directory).",
    )(fn)
    return fn


def add_memory_commands(cli: click.Group) -> click.Group:
    """Add the ``memory`` group (write / show / search) to ``cli`` and return it."""

    @cli.group("memory")
    def memory() -> None:
        """Read, write and search the MEMORY.md files of this project."""

    @memory.command("write")
    @click.argument("text")
    @click.option("--scope", type=_SCOPE, default="agent", show_default=True)
    @_common
    @_clean_errors
    def write(text: str, scope: str, agent: str | None, project: str | None) -> None:
        """Append TEXT as a dated entry; print the status word."""
        if text == "-":
            text = sys.stdin.read()
        click.echo(_service(project, agent).write(text, scope).status)

    @memory.command("show")
    @click.option("--scope", type=_SCOPE, default=None, help="One scope (default: both).")
    @_common
    @_clean_errors
    def show(scope: str | None, agent: str | None, project: str | None) -> None:
        """Print the memory files as they are on disk."""
        click.echo(_service(project, agent).read(scope))

    @memory.command("search")
    @click.argument("query")
    @click.option("--json", "as_json", is_flag=True, help="Print the hits as a JSON array.")
    @click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
    @_common
    @_clean_errors
    def search(
        query: str, as_json: bool, limit: int, agent: str | None, project: str | None
    ) -> None:
        """Keyword search (BM25) over the entries of the readable scopes."""
        svc = _service(project, agent)
        hits = svc.search(query, limit)
        if as_json:
            click.echo(json.dumps([svc.hit_dict(h) for h in hits], ensure_ascii=False, indent=2))
        else:
            click.echo(svc.format_hits(query, hits))

    return memory
