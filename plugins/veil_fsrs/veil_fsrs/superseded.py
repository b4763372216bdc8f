"""Superseded content (issue 29, item 2): which tool results a later one makes stale.

An agent reads a file, edits it, and reads it again; it runs the tests, fixes something, and
runs them again. The older copy of the file and the older test run still sit in the prompt, and
almost everything they hold is either repeated by the newer one or out of date. Such a result
is *superseded*; :func:`veil_fsrs.levels.plan_levels` lets it leave first and keep at most the
lines that differ (the names the newer copy does not hold).

What a tool call read, changed or ran is read from its arguments:

* a tool with a path argument (``path``, ``file_path``, ``file``, ``filename``): a read of that
  file (a line range with ``offset`` / ``limit`` or ``view_range``), or a change to it when the
  editor's ``command`` is not ``view`` (SWE-agent, OpenHands) or the tool's name says it writes (``write``, ``edit``, ``create``, ``replace``, ``insert``,
  ``patch``, ``delete``);
* a shell command (``command`` or ``cmd``), parsed with :mod:`shlex`: ``cd DIR &&`` prefixes set
  the folder; ``cat`` / ``nl`` / ``head`` / ``tail`` / ``sed -n 'A,Bp'`` of one file (alone, or
  piped into ``head`` / ``tail`` / ``sed -n``) read it; ``sed -i``, ``tee``, ``>`` / ``>>`` and
  ``touch`` / ``rm`` / ``mv`` / ``cp`` change a file; anything else is a run, and the same
  command run again (same folder, same words) supersedes it.

A newer result supersedes an older one when it reads the same file and its lines cover the
older one's (a whole read covers every range), when it changed the file the older one read, or
when it ran the same command. Guessing wrong costs misses, never an error: a command that does
not parse is a run keyed by its text.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Words in a tool's name that say it changes the file its path names.
WRITE_WORDS = ("write", "edit", "create", "replace", "insert", "patch", "delete", "append")
#: Shell commands whose output is (part of) one file's text.
#: The ``command`` values of the file editor tool SWE-agent and OpenHands give their agents.
EDITOR_COMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit"})
READERS = frozenset({"cat", "nl", "head", "tail", "sed", "less", "more"})
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")
_SEPARATORS = frozenset({"&&", ";", "||", "\n"})


@dataclass(frozen=True)
class Source:
    """What one tool call's result is a copy of, or what it ran.

    Attributes:
        reads: the normalised path of the file whose text the result shows, or None.
        lines: the 1-based inclusive line range shown (``(a, b)``; ``b`` None: to the end;
            negative ``a``: the last ``-a`` lines), None for the whole file.
        run: the normalised command (folder and words) whose rerun supersedes it, or None.
        writes: normalised paths the call changed.
    """

    reads: str | None = None
    lines: tuple[int, int | None] | None = None
    run: str | None = None
    writes: tuple[str, ...] = ()


def _norm(path: str, folder: str) -> str:
    path = path.strip()
    if folder and not path.startswith("/"):
        path = posixpath.join(folder, path)
    return posixpath.normpath(path)


def _covers(newer: tuple[int, int | None] | None, older: tuple[int, int | None] | None) -> bool:
    if newer is None:
        return True
    if older is None:
        return False
    if newer == older:
        return True
    (a, b), (c, d) = newer, older
    if a < 0 or c < 0:  # a tail covers only the same tail (the file's length is unknown)
        return False
    return a <= c and (b is None or (d is not None and d <= b))


def supersedes(newer: Source, older: Source) -> bool:
    """Whether ``newer`` (a later call) makes ``older``'s result stale (see the module
    docstring)."""
    if older.reads is not None:
        if newer.reads == older.reads and _covers(newer.lines, older.lines):
            return True
        if older.reads in newer.writes:
            return True
    return older.run is not None and newer.run == older.run


def source_of(tool_name: str, arguments: Mapping[str, Any] | str | None) -> Source | None:
    """What a tool call with ``arguments`` read, changed or ran (None when it says nothing).

    Args:
        tool_name: the tool's name (``bash``, ``read_file``, ``Edit`` ...).
        arguments: its arguments, as a mapping or the JSON text of one.

    Returns:
        A :class:`Source`, or None (no path and no command, or arguments that are not JSON).
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    command = arguments.get("command", arguments.get("cmd"))
    path = next(
        (
            arguments[key]
            for key in ("path", "file_path", "file", "filename")
            if isinstance(arguments.get(key), str) and arguments[key].strip()
        ),
        None,
    )
    if path is not None and command in EDITOR_COMMANDS:  # SWE-agent / OpenHands' editor
        path = _norm(path, "")
        if command == "view":
            return Source(reads=path, lines=_range_argument(arguments))
        return Source(writes=(path,))
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        command = shlex.join(command)
    if isinstance(command, str) and command.strip():
        return shell_source(command)
    if path is None:
        return None
    path = _norm(path, "")
    name = tool_name.lower()
    if any(word in name for word in WRITE_WORDS):
        return Source(writes=(path,))
    return Source(reads=path, lines=_range_argument(arguments))


def _range_argument(arguments: Mapping[str, Any]) -> tuple[int, int | None] | None:
    view = arguments.get("view_range")
    if isinstance(view, list) and len(view) == 2 and all(isinstance(x, int) for x in view):
        a, b = view
        return (max(1, a), None if b < 0 else b)
    offset, limit = arguments.get("offset"), arguments.get("limit")
    if isinstance(offset, int) or isinstance(limit, int):
        start = offset if isinstance(offset, int) and offset > 0 else 1
        return (start, start + limit - 1 if isinstance(limit, int) and limit > 0 else None)
    return None


def shell_source(command: str) -> Source:
    """:class:`Source` of a shell command (see the module docstring); never raises."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace = " \t\r"  # newlines separate commands
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return Source(run=" ".join(command.split()))
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS or set(word) <= {";", "&", "\n"}:
            segments.append([])
        else:
            segments[-1].append(word)
    folder = ""
    kept: list[list[str]] = []
    for segment in segments:
        if not segment:
            continue
        if segment[0] == "cd" and len(segment) == 2:
            folder = _norm(segment[1], folder)
            continue
        kept.append(segment)
    writes: list[str] = []
    for segment in kept:
        writes.extend(_changed(segment, folder))
    if len(kept) == 1:
        read = _read(kept[0], folder)
        if read is not None:
            return Source(reads=read[0], lines=read[1], writes=tuple(writes))
    run = " && ".join(" ".join(s) for s in kept)
    return Source(run=f"{folder}$ {run}" if folder else run, writes=tuple(writes))


def _changed(segment: list[str], folder: str) -> list[str]:
    out: list[str] = []
    for i, word in enumerate(segment[:-1]):
        if word in (">", ">>", ">|") and segment[i + 1] not in ("&", "/dev/null"):
            out.append(_norm(segment[i + 1], folder))
    head = segment[0]
    args = [w for w in segment[1:] if not w.startswith("-")]
    if not args:
        return out
    if head == "sed" and any(w.startswith("-i") for w in segment[1:]):
        out.append(_norm(args[-1], folder))
    elif head in ("tee", "touch", "truncate", "rm", "mv"):
        out.extend(_norm(a, folder) for a in args)  # mv: the source is gone, the target new
    elif head == "cp":
        out.append(_norm(args[-1], folder))
    return out


def _read(segment: list[str], folder: str) -> tuple[str, tuple[int, int | None] | None] | None:
    """``(path, lines)`` when ``segment`` (one pipeline) shows one file's text."""
    if any(w in (">", ">>", "<<", "<") for w in segment):
        return None
    stages: list[list[str]] = [[]]
    for word in segment:
        if word == "|":
            stages.append([])
        else:
            stages[-1].append(word)
    first = _stage_read(stages[0])
    if first is None or first[0] is None:
        return None
    path, lines = first
    for stage in stages[1:]:  # cat f | head -n 20, nl f | sed -n '5,9p'
        narrowed = _stage_read([*stage, "-"])
        if narrowed is None or narrowed[0] != "-" or lines is not None:
            return None
        lines = narrowed[1]
    return _norm(path, folder), lines


def _stage_read(stage: list[str]) -> tuple[str | None, tuple[int, int | None] | None] | None:
    if not stage or stage[0] not in READERS:
        return None
    head, rest = stage[0], stage[1:]
    files = [w for w in rest if not w.startswith("-") or w == "-"]
    if head == "sed":
        if "-n" not in rest or len(files) != 2:
            return None
        match = _SED_RANGE.match(files[0])
        if match is None:
            return None
        a, b = match.groups()
        start = int(a)
        end = start if b is None else (None if b == "$" else int(b))
        return files[1], (start, end)
    if head in ("head", "tail"):
        count = _count(rest)
        files = [w for w in files if not w.isdigit()]
        if len(files) != 1 or count is None:
            return None
        return files[0], ((1, count) if head == "head" else (-count, None))
    if len(files) != 1:
        return None
    return files[0], None


def _count(rest: list[str]) -> int | None:
    """The line count of ``head`` / ``tail`` arguments (10 when none is given)."""
    for i, word in enumerate(rest):
        if word == "-n" and i + 1 < len(rest):
            return int(rest[i + 1]) if rest[i + 1].isdigit() else None
        if word.startswith("-n") and word[2:].isdigit():
            return int(word[2:])
        if word.startswith("-") and word[1:].isdigit():
            return int(word[1:])
    return 10


def superseded_by(sources: Iterable[tuple[str, Source]]) -> dict[str, str]:
    """For results in call order (``(item id, source)``), each superseded one's id -> the id
    of the newest result that supersedes it.

    Cost: one pass keeping, per file and per command, the results not yet superseded (an
    agent's session has a few hundred calls).
    """
    by_path: dict[str, list[tuple[str, Source]]] = {}
    by_run: dict[str, str] = {}
    out: dict[str, str] = {}
    for item_id, source in sources:
        for path in (*source.writes, *((source.reads,) if source.reads else ())):
            alive = []
            for older_id, older in by_path.get(path, ()):
                if older_id != item_id and supersedes(source, older):
                    out[older_id] = item_id
                else:
                    alive.append((older_id, older))
            by_path[path] = alive
        if source.run is not None:
            older_id = by_run.get(source.run)
            if older_id is not None and older_id != item_id:
                out[older_id] = item_id
            by_run[source.run] = item_id
        if source.reads is not None:
            by_path.setdefault(source.reads, []).append((item_id, source))
    # a result superseded by one that is itself superseded points at the newest
    for older_id, newer_id in list(out.items()):
        seen = {older_id}
        while newer_id in out and newer_id not in seen:
            seen.add(newer_id)
            newer_id = out[newer_id]
        out[older_id] = newer_id
    return out
