"""``veil memory ...``: memory files from scripts (issue 4).

* ``veil memory write TEXT [--scope agent|global] [--agent NAME]`` prints the status word
  (``written``, ``skipped_empty``, ``skipped_duplicate``, or ``disabled`` when memory is off for
  the agent) and exits 0; ``TEXT`` ``-`` reads the text from standard input.
* ``veil memory show [--scope agent|global] [--agent NAME]`` prints the files' raw text.
* ``veil memory search QUERY [--json] [--limit N] [--agent NAME]`` prints the hits.
* ``veil memory trust [--scope agent|global] [--agent NAME]`` records what the files hold now
  (archives included) as written by veil: the user has read the repository-provided parts
  (issue 17) and vouches for them, so they stop being labelled in prompts.

Every command takes ``--project DIR`` (default: the current directory). Bad configuration or a
refused name exits 1 with the error's message (no traceback).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from veil.core.errors import BadRequest, VeilError
from veil_memoryfiles.errors import MemoryLimitExceeded

# the settings (pydantic) and the memory service load when a memory command runs, not when
# ``veil --help`` lists it (issue 30)
if TYPE_CHECKING:  # pragma: no cover
    from veil_memoryfiles.service import MemoryService

_SCOPE = click.Choice(["agent", "global"])


STDIN_SLACK_BYTES = 1 << 20
"""Bytes read from standard input beyond ``maxEntryBytes`` (leading and trailing whitespace is
trimmed before the entry is measured); anything longer is refused without reading it all."""


def _read_stdin(limit: int) -> str:
    # Bounded: `veil memory write - < huge.log` must not load the whole file to refuse it.
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stream (embedding callers): count characters as bytes
        data = sys.stdin.read(limit + STDIN_SLACK_BYTES + 1).encode("utf-8", "surrogatepass")
    else:
        data = stream.read(limit + STDIN_SLACK_BYTES + 1)
    if len(data) > limit + STDIN_SLACK_BYTES:
        raise MemoryLimitExceeded(
            f"content: standard input is over memory.maxEntryBytes ({limit} bytes); nothing was "
            "written"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"content: standard input is not UTF-8 (byte {exc.start})") from exc


def _untrusted_note(svc: MemoryService, scope: str | None) -> str | None:
    from veil_memoryfiles.paths import display_path

    parts = []
    for sc in svc.readable_scopes(scope):
        for path in svc.files(sc, archives=True):
            trust = svc.view(path).trust
            count = (0 if trust.header else 1) + trust.entries.count(False)
            if count:
                parts.append(f"{display_path(svc.project, path)}: {count}")
    if not parts:
        return None
    return (
        "veil: parts not written by veil (repository-provided; labelled as untrusted in "
        f"prompts): {', '.join(parts)}. After reading them, `veil memory trust` marks them as "
        "yours."
    )


def _service(project: str | None, agent: str | None) -> MemoryService:
    from veil.core.settings import load_config
    from veil_memoryfiles.service import MemoryService

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
        svc = _service(project, agent)
        if text == "-":
            text = _read_stdin(svc.limits(scope).max_entry_bytes)
        click.echo(svc.write(text, scope).status)

    @memory.command("show")
    @click.option("--scope", type=_SCOPE, default=None, help="One scope (default: both).")
    @_common
    @_clean_errors
    def show(scope: str | None, agent: str | None, project: str | None) -> None:
        """Print the memory files as they are on disk."""
        svc = _service(project, agent)
        click.echo(svc.read(scope))
        note = _untrusted_note(svc, scope)
        if note:
            click.echo(note, err=True)

    @memory.command("trust")
    @click.option("--scope", type=_SCOPE, default=None, help="One scope (default: both).")
    @_common
    @_clean_errors
    def trust(scope: str | None, agent: str | None, project: str | None) -> None:
        """Mark what the memory files hold now as written by veil (after reading it)."""
        done = _service(project, agent).trust(scope)
        if not done:
            click.echo("nothing to trust: veil wrote everything in these files")
        for shown, count in done:
            click.echo(f"trusted {shown} ({count} part{'s' if count != 1 else ''})")

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
