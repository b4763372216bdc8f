"""The ``memory`` section of the system prompt (seed 000, "Reading memory": automatic injection).

What goes in, in this order of priority when space is short (the section never exceeds the cap):

1. a short introduction and the headings (always);
2. the header (hand-written text before the first date comment) of the agent's and the global
   MEMORY.md, when memory is enabled for the agent (agent.json overriding settings.json);
3. the project's instruction files (``memory.instructionFiles``, default ``AGENTS.md`` and
   ``CLAUDE.md`` at the project root), read-only: veil never writes them. They are shown even
   when memory is disabled (they are the project's instructions, not memory); set
   ``instructionFiles`` to ``[]`` to leave them out;
4. entries of both scopes, newest first (by date, then agent before global, then later in the
   file), until the space runs out. Entries are never cut: the first that does not fit and every
   older one are left out, and a line says how many ("N older entries not shown ...; use
   memory_search"). Headers and instruction files too long for what is left are cut at a line
   boundary with a note naming the file to read for the rest.

The cap is ``memory.injectionShare`` (default 0.10, DESIGN.md "Memory injection") x the model's
context window, in tokens (:func:`~veil_memoryfiles.tokens.count_tokens`). Within a scope the
entries shown are listed newest first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from veil.core.settings import Config
from veil_memoryfiles.entries import Entry, MemoryDocument, parse
from veil_memoryfiles.errors import MemoryFileInvalid
from veil_memoryfiles.fileio import read_text
from veil_memoryfiles.paths import Scope, display_path, file_path
from veil_memoryfiles.tokens import count_tokens

log = logging.getLogger(__name__)

INTRO = (
    "# Memory\n\n"
    "Memory files kept across sessions, read at session start. Add a fact with memory_write; "
    "find older entries with memory_search; read a whole file with memory_read."
)
INSTRUCTIONS_HEADING = "# Project instructions (read-only)"
_NOTE_RESERVE = "_99999 older entries not shown (agent: 99999, global: 99999); use memory_search._"
_SCOPE_TITLES = {"agent": "Agent memory", "global": "Global memory"}


@dataclass
class InjectionResult:
    """The memory section and what it holds.

    Attributes:
        text: the section (Markdown); never more than ``cap`` tokens.
        tokens: its size in tokens; cap: the cap in tokens.
        shown: entries shown per scope; omitted: entries left out per scope.
        truncated: display paths of headers / instruction files that were cut.
        instruction_files: display paths of the instruction files read.
    """

    text: str
    tokens: int
    cap: int
    shown: dict[str, int] = field(default_factory=dict)
    omitted: dict[str, int] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    instruction_files: list[str] = field(default_factory=list)


@dataclass
class _Source:
    scope: Scope
    label: str
    doc: MemoryDocument


def instruction_file_paths(cwd: Path, names: list[str]) -> list[Path]:
    """Existing instruction files among ``names`` (relative to the project root ``cwd``).

    Names that are absolute or climb out with ``..`` are skipped with a warning in the log.
    """
    out = []
    root = Path(cwd).resolve()
    for name in names:
        pure = PurePath(name)
        if pure.is_absolute() or ".." in pure.parts or "\x00" in name:
            log.warning(
                "memory.instructionFiles: %r skipped: must be a path inside the project", name
            )
            continue
        path = root / pure
        try:
            inside = root in path.resolve().parents
        except OSError:
            inside = False
        if inside and path.is_file():
            out.append(path)
    return out


def _fit_lines(
    text: str, budget: int, note: Callable[[int], str], count: Callable[[str], int]
) -> str:
    # Longest prefix of whole lines that, with the note saying how many lines were cut, fits.
    if count(text) <= budget:
        return text
    lines = text.split("\n")
    lo, hi = 0, len(lines) - 1
    best = ""
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = "\n".join(lines[:mid] + [note(len(lines) - mid)])
        if count(candidate) <= budget:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def _hard_cut(text: str, cap: int, count: Callable[[str], int]) -> str:
    # Last resort when even the fixed parts exceed the cap (a tiny context window).
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _entry_block(e: Entry) -> str:
    return f"<!-- {e.date} -->\n{e.content}"


def build_memory_section(
    config: Config,
    agent: str,
    cwd: Path,
    context_window: int,
    count: Callable[[str], int] = count_tokens,
) -> InjectionResult | None:
    """Build the memory section for ``agent`` (see the module docstring for what goes in).

    Args:
        config: the project's configuration (memory settings, project root).
        agent: the session's agent name.
        cwd: the project root, where instruction files are looked for.
        context_window: the main model's context window in tokens.
        count: token counter (default: the core's, or an estimate).

    Returns:
        The section, or None when there is nothing to show (no memory, no instruction file).

    Raises:
        ConfigError / UnsafePath: a bad agent.json or agent name.
    """
    mem = config.memory_for(agent)
    cap = max(0, int(mem.injection_share * context_window))
    project = config.project_dir

    sources: list[_Source] = []
    if mem.enabled:
        for scope in ("agent", "global"):
            path = file_path(project, scope, agent)
            try:
                text = read_text(path)
            except (MemoryFileInvalid, OSError) as exc:
                # A broken file must not stop every model call: say so in the prompt instead.
                log.warning("memory injection: %s", exc)
                text = f"[this memory file could not be read: {exc}]"
            if text and text.strip():
                label = f"## {_SCOPE_TITLES[scope]} ({display_path(project, path)})"
                sources.append(_Source(scope, label, parse(text)))
    instructions = []
    for path in instruction_file_paths(cwd, list(mem.instruction_files)):
        try:
            text = path.read_bytes().decode("utf-8", errors="replace").strip()
        except OSError as exc:
            log.warning("memory injection: %s skipped: %s", path, exc)
            continue
        if text:
            instructions.append((display_path(Path(cwd).resolve(), path), text))
    if not sources and not instructions:
        return None

    result = InjectionResult(text="", tokens=0, cap=cap)
    result.instruction_files = [name for name, _ in instructions]
    used = count(INTRO) + count(_NOTE_RESERVE) + 4
    used += sum(count(s.label) + 2 for s in sources)
    if instructions:
        used += count(INSTRUCTIONS_HEADING) + 2 + sum(count(f"## {n}") + 2 for n, _ in instructions)

    headers: dict[str, str] = {}
    for s in sources:
        header = s.doc.header.strip()
        if header:
            where = display_path(project, file_path(project, s.scope, agent))
            shown = _fit_lines(
                header,
                cap - used,
                lambda n, w=where: f"[... {n} more header lines not shown; memory_read {w}]",
                count,
            )
            if shown != header:
                result.truncated.append(where)
            headers[s.scope] = shown
            used += count(shown) + 2
    shown_instructions = []
    for name, text in instructions:
        shown = _fit_lines(
            text, cap - used, lambda n, w=name: f"[... {n} more lines not shown; read {w}]", count
        )
        if shown != text:
            result.truncated.append(name)
        shown_instructions.append((name, shown))
        used += count(shown) + 2

    scope_rank = {"agent": 1, "global": 0}
    ranked = sorted(
        ((s.scope, e) for s in sources for e in s.doc.entries),
        key=lambda pair: (pair[1].date, scope_rank[pair[0]], pair[1].index),
        reverse=True,
    )
    included: list[tuple[str, Entry]] = []
    for scope, e in ranked:
        cost = count(_entry_block(e)) + 2
        if used + cost > cap:
            break
        included.append((scope, e))
        used += cost

    def assemble(chosen: list[tuple[str, Entry]]) -> str:
        parts = [INTRO] if sources else []
        for s in sources:
            parts.append(s.label)
            if headers.get(s.scope):
                parts.append(headers[s.scope])
            parts.extend(_entry_block(e) for scope, e in chosen if scope == s.scope)
        omitted = {
            s.scope: len(s.doc.entries) - sum(1 for scope, _ in chosen if scope == s.scope)
            for s in sources
        }
        if sum(omitted.values()):
            detail = ", ".join(f"{k}: {v}" for k, v in omitted.items() if v)
            parts.append(
                f"_{sum(omitted.values())} older entries not shown ({detail}); use memory_search._"
            )
        if shown_instructions:
            parts.append(INSTRUCTIONS_HEADING)
            for name, text in shown_instructions:
                parts.append(f"## {name}")
                if text:
                    parts.append(text)
        return "\n\n".join(parts)

    text = assemble(included)
    # Token counts of parts do not add up exactly; drop the oldest shown entries until it fits.
    while count(text) > cap and included:
        included.pop()
        text = assemble(included)
    if count(text) > cap:
        text = _hard_cut(text, cap, count)
        result.truncated.append("(whole section)")
    result.text = text
    result.tokens = count(text)
    for s in sources:
        n = sum(1 for scope, _ in included if scope == s.scope)
        result.shown[s.scope] = n
        result.omitted[s.scope] = len(s.doc.entries) - n
    return result
