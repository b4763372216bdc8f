"""Memory written since a session started, told to the model without touching the system
message (issue 29).

The ``memory`` section of the system prompt is built once per session, at its start (seed 000:
memory is "included in the system prompt at session start"), and kept for the session's whole
life, resumed or loaded again for an HTTP turn included: the system message is the first thing
every provider caches, and one changed byte in it makes the whole prompt uncached. What is
written to the memory files afterwards (by ``memory_write``, ``/remember``, extraction before a
compaction, another session, an HTTP ``PUT`` or a hand edit) reaches the model as the
``memory_updates`` section instead: volatile and anchored, so it is sent in the context note
that veil refreshes at a change moment (an eviction pass, a masking block, a compaction) and
that otherwise keeps its place, cached (:class:`veil.core.types.PromptSection`).

The section lists the entries that were not in the files when the session started, newest first,
quoted under the repository-provided label when veil did not write them (as the ``memory``
section shows them), within :data:`UPDATES_SHARE` of the memory injection cap, and says how many
entries of the start have left the files since (archived by ``maxLines``, or removed by hand).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from veil import Config
from veil_memoryfiles.entries import Entry
from veil_memoryfiles.injection import _entry_block, _read_sources
from veil_memoryfiles.paths import MEMORY_FILE, scope_dir
from veil_memoryfiles.tokens import count_tokens
from veil_memoryfiles.trust import REPOSITORY_LABEL, quote

UPDATES_ORDER = 101
"""Where the section stands among the prompt's sections: right after ``memory`` (100)."""

UPDATES_SHARE = 0.5
"""Share of the memory injection cap (``memory.injectionShare`` x the window) the updates may
take; newer entries past it are counted, not shown."""

UPDATES_INTRO = (
    "# Memory written since this session started\n\n"
    "The memory section of the system prompt shows the memory files as they were when this "
    "session started; these entries were added since (newest first)."
)


def entry_key(scope: str, entry: Entry) -> str:
    """A short stable key of a memory entry: its scope, date and content (SHA-256, 16 hex
    digits). The same entry keeps its key when older ones move to the archive."""
    digest = hashlib.sha256(f"{scope}\0{entry.date}\0{entry.content}".encode()).hexdigest()
    return digest[:16]


def _files(config: Config, files: Any) -> Any:
    """``files``, or the project's files on disk when None."""
    if files is not None:
        return files
    from veil_memoryfiles.backend import DiskFiles

    return DiskFiles(config.project_dir)


def current_entries(config: Config, agent: str, files: Any = None) -> list[tuple[str, Entry, bool]]:
    """Every entry of the agent's and the global MEMORY.md as ``(scope, entry, trusted)``
    (``trusted``: veil wrote it); none when memory is disabled for the agent or a file cannot
    be read (the ``memory`` section says so).

    Args:
        files: where the memory files live (:func:`veil_memoryfiles.backend.files_for`; None:
            on disk)."""
    if not config.memory_enabled(agent):
        return []
    return [
        (source.scope, entry, source.entry_trusted[entry.index])
        for source in _read_sources(config, agent, _files(config, files))
        if source.error is None
        for entry in source.doc.entries
    ]


def files_signature(config: Config, agent: str, files: Any = None) -> list[Any]:
    """What the updates depend on, cheap to read at every model call: for each of the agent's
    and the global MEMORY.md, ``files.signature(path)`` (on disk: its path, modification time
    in ns, size and inode; in a shared store: its name and version; ``[path, None]`` when it is
    missing). A write changes it.

    Args:
        files: where the memory files live (None: on disk)."""
    where = _files(config, files)
    return [
        where.signature(scope_dir(config.project_dir, scope, agent) / MEMORY_FILE)
        for scope in ("agent", "global")
    ]


def updates_text(
    entries: list[tuple[str, Entry, bool]],
    start: set[str],
    cap: int,
    count: Callable[[str], int] = count_tokens,
) -> str | None:
    """The ``memory_updates`` section for ``entries`` (the files now) against ``start`` (the
    keys of the entries when the session started, :func:`entry_key`), or None when nothing
    changed.

    Args:
        entries: :func:`current_entries`.
        start: keys of the entries at the session's start.
        cap: most tokens the section may take (entries are never cut: the first that does not
            fit and every older one are counted instead).
        count: token counter.
    """
    now = {entry_key(scope, entry): (scope, entry, trusted) for scope, entry, trusted in entries}
    new = [now[key] for key in now if key not in start]
    gone = len(start - now.keys())
    if not new and not gone:
        return None
    rank = {"agent": 1, "global": 0}
    new.sort(key=lambda c: (c[1].date, rank[c[0]], c[1].index), reverse=True)
    parts = [UPDATES_INTRO]
    used = count(UPDATES_INTRO)
    shown = 0
    for scope, entry, trusted in new:
        where = "agent memory" if scope == "agent" else "global memory"
        block = _entry_block(entry)
        if not trusted:
            block = f"({where}, {REPOSITORY_LABEL})\n{quote(block)}"
        else:
            block = f"({where})\n{block}"
        cost = count(block) + 2
        if used + cost > cap:
            break
        parts.append(block)
        used += cost
        shown += 1
    if shown < len(new):
        parts.append(f"_{len(new) - shown} more new entries not shown; use memory_read._")
    if gone:
        parts.append(
            f"_{gone} entries of the memory section are no longer in the files (archived by "
            "memory.maxLines, or removed)._"
        )
    return "\n\n".join(parts)


__all__ = [
    "UPDATES_ORDER",
    "UPDATES_SHARE",
    "current_entries",
    "entry_key",
    "files_signature",
    "updates_text",
]
