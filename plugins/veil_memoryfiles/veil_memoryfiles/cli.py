"""``veil memory ...``: memory files from scripts (issue 4).

* ``veil memory write TEXT [--scope agent|global] [--agent NAME]`` prints the status word
  (``written``, ``skipped_empty``, ``skipped_duplicate``, or ``disabled`` when memory is off for
  the agent) and exits 0; ``TEXT`` ``-`` reads the text from standard input.
* ``veil memory show [--scope agent|global] [--agent NAME]`` prints the files' raw text.
* ``veil memory search QUERY [--json] [--limit N] [--agent NAME]`` prints the hits.
* ``veil memory trust [--scope agent|global] [--agent NAME]`` records what the files hold now
  (archives included) as written by veil: the user has read the repository-provided parts
  (issue 17) and vouches for them, so they stop being labelled in prompts.
* ``veil memory export DIR`` writes every memory file of the project (both scopes, every
  agent, archives) to ``DIR`` as Markdown, in the ``.veil/memory/`` layout; ``veil memory import
  DIR`` reads such a folder back, each file replacing the project's file of that name literally
  (as the HTTP PUT does). With a PostgreSQL store (``store.url``) the files live in the database
  and these move them to and from Markdown files; with SQLite they copy ``.veil/memory/``.
  Provenance travels with them: an export records what veil wrote in your own record (your
  key), so the files stay trusted on disk; an import trusts only what that record vouches for.

Every command takes ``--project DIR`` (default: the current directory). Bad configuration or a
refused name exits 1 with the error's message (no traceback).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from veil import BadRequest, VeilError
from veil_memoryfiles.errors import MemoryLimitExceeded

# the settings (pydantic) and the memory service load when a memory command runs, not when
# ``veil --help`` lists it (issue 30)
if TYPE_CHECKING:  # pragma: no cover
    from veil_memoryfiles.provenance import Provenance
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
        for path in svc.files_of(sc, archives=True):
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


@contextlib.contextmanager
def _service(project: str | None, agent: str | None) -> Iterator[MemoryService]:
    """The memory of ``project`` as ``agent`` sees it, where it lives: the shared store when
    ``store.url`` names one (a connection of its own, closed at the end), else disk."""
    from veil import load_config, open_shared_files
    from veil_memoryfiles.backend import DiskFiles, StoreFiles
    from veil_memoryfiles.service import MemoryService

    config = load_config(project or os.getcwd())
    name = agent or config.settings.default_agent
    shared = open_shared_files(config)
    if shared is None:
        yield MemoryService(config, name, DiskFiles(config.project_dir))
        return
    try:
        yield MemoryService(config, name, StoreFiles(config.project_dir, shared))
    finally:
        shared.close()


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
        with _service(project, agent) as svc:
            if text == "-":
                text = _read_stdin(svc.limits(scope).max_entry_bytes)
            click.echo(svc.write(text, scope).status)

    @memory.command("show")
    @click.option("--scope", type=_SCOPE, default=None, help="One scope (default: both).")
    @_common
    @_clean_errors
    def show(scope: str | None, agent: str | None, project: str | None) -> None:
        """Print the memory files as they are on disk."""
        with _service(project, agent) as svc:
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
        with _service(project, agent) as svc:
            done = svc.trust(scope)
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
        with _service(project, agent) as svc:
            hits = svc.search(query, limit)
            if as_json:
                found = [svc.hit_dict(h) for h in hits]
                click.echo(json.dumps(found, ensure_ascii=False, indent=2))
            else:
                click.echo(svc.format_hits(query, hits))

    @memory.command("export")
    @click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
    @_common
    @_clean_errors
    def export(folder: Path, agent: str | None, project: str | None) -> None:
        """Write every memory file to FOLDER as Markdown (the .veil/memory/ layout)."""
        with _service(project, agent) as svc:
            for shown in export_files(svc, folder):
                click.echo(f"exported {shown}")

    @memory.command("import")
    @click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
    @_common
    @_clean_errors
    def import_(folder: Path, agent: str | None, project: str | None) -> None:
        """Read memory files from FOLDER (the .veil/memory/ layout), each replacing the
        project's file of that name."""
        with _service(project, agent) as svc:
            for shown, untrusted in import_files(svc, folder):
                note = (
                    f" ({untrusted} part(s) not vouched for: veil memory trust)"
                    if untrusted
                    else ""
                )
                click.echo(f"imported {shown}{note}")

    return memory


def _relative(root: Path, path: Path) -> str:
    return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()


def export_files(svc: MemoryService, folder: Path) -> list[str]:
    """Write every memory file of the project (as :attr:`MemoryService.files` holds them) under
    ``folder`` in the ``.veil/memory/`` layout (atomic writes; folders created), and record the
    parts veil wrote in the user's own provenance record, so the files stay trusted on disk.
    Returns the names written.

    Raises:
        UnsafeVeilPath: a target or a folder on the way is a symbolic link. OSError."""
    from veil import atomic_write_bytes, refuse_links
    from veil_memoryfiles.paths import memory_root
    from veil_memoryfiles.provenance import Provenance

    root = memory_root(svc.project)
    local = Provenance(svc.project)
    out = []
    for path in svc.files.all_files():
        name = _relative(root, path)
        view = svc.files.view(path)
        target = folder.joinpath(*name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        refuse_links(Path(os.path.abspath(target)))
        atomic_write_bytes(target, view.text.encode("utf-8"))
        if svc.files.in_store:
            _vouch_locally(local, path, view)
        out.append(name)
    return out


def _vouch_locally(local: Provenance, path: Path, view: Any) -> None:
    # what the store says veil wrote goes into the user's own record, tagged with their key
    tags = _trusted_tags(local, path, view.doc, view.trust)
    if tags:
        local.record(tags)


def import_files(svc: MemoryService, folder: Path) -> list[tuple[str, int]]:
    """Replace the project's memory files with those under ``folder`` (``MEMORY.md`` and
    ``archive-*.md`` at its top and in ``agents/<name>/``; anything else is left out), each
    literally. What the user's own provenance record vouches for (veil wrote it, on disk, for
    them) is recorded as veil-written where the files now live; the rest is repository-provided
    until ``veil memory trust``. Returns ``(name, parts not vouched for)`` per file.

    Raises:
        UnsafeVeilPath: a file or folder in ``folder`` is a symbolic link. MemoryFileInvalid:
            a file is not UTF-8. BadRequest / UnsafePath: a name veil would not write."""
    from veil import read_bytes_nofollow, refuse_links
    from veil_memoryfiles.entries import parse
    from veil_memoryfiles.fileio import decode
    from veil_memoryfiles.paths import memory_root
    from veil_memoryfiles.provenance import Provenance

    root = memory_root(svc.project)
    local = Provenance(svc.project)
    out = []
    for source, name in _import_sources(folder):
        refuse_links(Path(os.path.abspath(source)))
        data = read_bytes_nofollow(source) or b""
        text = decode(data, source)
        path = root.joinpath(*name.split("/"))
        # trust as the user's own record says, with the tags of the file's place in memory
        doc = parse(text)
        trust = local.trust_of(path, doc)
        svc.files.overwrite(path, data, trusted=False)
        tags = _trusted_tags(svc.files.provenance, path, doc, trust)
        if tags:
            svc.files.provenance.record(tags)
        untrusted = (0 if trust.header else 1) + trust.entries.count(False)
        out.append((name, untrusted))
    return out


def _trusted_tags(prov: Provenance, path: Path, doc: Any, trust: Any) -> list[str]:
    key = prov.signing_key(create=True)
    if key is None:
        return []
    folder = prov.folder(path)
    tags = [
        prov.entry_tag(key, folder, e.date, e.content)
        for e, trusted in zip(doc.entries, trust.entries, strict=True)
        if trusted
    ]
    if trust.header and doc.header.strip():
        tags.append(prov.header_tag(key, folder, doc.header))
    return tags


def _import_sources(folder: Path) -> list[tuple[Path, str]]:
    """``(file, name)`` of the memory files under ``folder`` in the ``.veil/memory/`` layout."""
    from veil import validate_agent_name
    from veil_memoryfiles.paths import validate_file_name

    found = []
    for directory, prefix in [(folder, "")] + [
        (d, f"agents/{d.name}/")
        for d in sorted((folder / "agents").iterdir() if (folder / "agents").is_dir() else [])
        if d.is_dir() and not d.is_symlink()
    ]:
        if prefix:
            validate_agent_name(directory.name)
        for entry in sorted(directory.iterdir()):
            name = entry.name
            if not (name == "MEMORY.md" or (name.startswith("archive-") and name.endswith(".md"))):
                continue
            validate_file_name(name)
            found.append((entry, prefix + name))
    return found
