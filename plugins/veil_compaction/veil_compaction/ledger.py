"""The part of a full-compaction summary that veil records itself, by rule, from the tool calls.

A summary is only as good as the model that writes it: the bundled 135M model, asked for the
structured summary, answers with invented code (bench/RESULTS.md). What the agent must not lose
across a compaction (which files it read and changed, what it ran and how that ended, the errors
still open) is in the tool calls and results themselves, so veil appends it to every
compaction summary under :data:`HEADING`, whatever the model wrote:

* files modified: ``write`` / ``edit`` paths, and paths a shell command writes (``sed -i``,
  ``> file``, ``tee``, ``touch``, ``patch``, heredocs into a file);
* files read: other paths named by tool calls (``read`` / ``grep`` / ``ls`` arguments, paths in
  shell commands), newest first;
* recent commands: the last shell commands with their exit status (``<returncode>`` tags) or
  ``error`` when the result was an error;
* open errors: the last error line of each failing result (``...Error: ...``, ``FAILED ...``).

Each list is bounded (:data:`MAX_FILES`, :data:`MAX_COMMANDS`, :data:`MAX_ERRORS`, lines cut at
:data:`MAX_LINE_CHARS`), so the section stays under ~300 tokens. On the next compaction the
previous section is merged with the new one (newest first) and the model's copy of it, if it
made one, is dropped. Every compaction path appends it: automatic full compaction, manual
``/compact`` and ``autoThreshold`` (issue 19).
"""

from __future__ import annotations

import re
from typing import Any

from veil import Message, paths_in
from veil import content_text_with_parts as content_text
from veil import json_loads as loads

HEADING = "## Recorded by veil from the tool calls"
MAX_FILES = 15
MAX_COMMANDS = 5
MAX_ERRORS = 4
MAX_LINE_CHARS = 140

_READ_TOOLS = frozenset({"read", "grep", "ls"})
_WRITE_TOOLS = frozenset({"write", "edit"})
_REDIRECT = re.compile(r"(?<![<>&0-9])>{1,2}\s*([^\s;&|<>]+)")
_WRITES_ALL = re.compile(r"\bsed\s+(-\w*\s+)*-i|\btee\b|\btouch\b|\bpatch\b|\bgit\s+apply\b")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_ERROR_LINE = re.compile(
    r"^\s*(?:E\s+)?(?:[\w.]*(?:Error|Exception)\b.*|FAILED\b.*|error(?:\[\w+\])?:.*|fatal:.*)$",
    re.M,
)
_FIELDS = ("Files modified", "Files read", "Recent commands", "Open errors")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        parsed = loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _outcome(result: str) -> str:
    code = _RETURNCODE.search(result[:300])
    if code:
        return f"exit {code.group(1)}"
    if result.lstrip().lower().startswith(("error", "traceback")):
        return "error"
    return "ok"


def _command_files(command: str) -> tuple[list[str], list[str]]:
    """``(modified, read)`` paths of a shell command."""
    paths = paths_in(command)
    if _WRITES_ALL.search(command):
        return paths, []
    written = [p for target in _REDIRECT.findall(command) for p in paths_in(target)]
    return written, [p for p in paths if p not in written]


def record(messages: list[Message]) -> dict[str, list[str]]:
    """What :data:`HEADING` lists for ``messages`` (oldest first): each field's entries,
    newest first, not yet bounded."""
    results = {
        m.get("tool_call_id"): content_text(m.get("content"))
        for m in messages
        if m.get("role") == "tool"
    }
    modified: list[str] = []
    read: list[str] = []
    commands: list[str] = []
    errors: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            name = (call.get("function") or {}).get("name") or ""
            args = _arguments(call)
            result = results.get(call.get("id"), "")
            path = args.get("path") or args.get("file_path")
            if isinstance(path, str) and path:
                (modified if name in _WRITE_TOOLS else read).append(path)
            command = args.get("command")
            outcome = _outcome(result)
            if isinstance(command, str) and command.strip():
                wrote, looked = _command_files(command)
                modified += wrote
                read += looked
                first = command.strip().splitlines()[0]
                commands.append(f"`{_clip(first)}` ({outcome})")
            if outcome not in ("ok", "exit 0"):
                found = _ERROR_LINE.findall(result)
                if found:
                    errors.append(_clip(found[-1]))
    return {
        "Files modified": _newest_first(modified),
        "Files read": _newest_first(read),
        "Recent commands": commands[::-1],
        "Open errors": errors[::-1],
    }


def _newest_first(entries: list[str]) -> list[str]:
    return list(dict.fromkeys(reversed(entries)))


def parse(summary: str | None) -> dict[str, list[str]]:
    """The fields of the :data:`HEADING` section of ``summary`` (empty lists when absent)."""
    fields: dict[str, list[str]] = {name: [] for name in _FIELDS}
    if not summary or HEADING not in summary:
        return fields
    section = summary.split(HEADING, 1)[1]
    for line in section.splitlines():
        for name in _FIELDS:
            prefix = f"- {name}: "
            if line.startswith(prefix):
                sep = "; " if name in ("Recent commands", "Open errors") else ", "
                fields[name] = [e for e in line[len(prefix) :].split(sep) if e]
    return fields


def strip(summary: str) -> str:
    """``summary`` without a :data:`HEADING` section (the model may have copied the old one)."""
    if HEADING not in summary:
        return summary.rstrip()
    head, tail = summary.split(HEADING, 1)
    rest = tail.split("\n## ", 1)  # a heading after the section belongs to the model's text
    return (head.rstrip() + ("\n\n## " + rest[1] if len(rest) > 1 else "")).rstrip()


def with_ledger(summary: str, messages: list[Message], previous: str | None) -> str:
    """``summary`` (the model's) followed by the :data:`HEADING` section for ``messages``
    merged with the one in ``previous`` (the earlier summary); unchanged when neither has
    anything to record."""
    new, old = record(messages), parse(previous)
    limits = {
        "Files modified": MAX_FILES,
        "Files read": MAX_FILES,
        "Recent commands": MAX_COMMANDS,
        "Open errors": MAX_ERRORS,
    }
    lines = []
    for name in _FIELDS:
        if name == "Open errors" and new["Recent commands"]:
            merged = new[name]  # errors of the earlier part are settled or reported again
        else:
            merged = list(dict.fromkeys(new[name] + old[name]))
        if name == "Files read":
            merged = [p for p in merged if p not in new["Files modified"]]
        merged = merged[: limits[name]]
        if merged:
            sep = "; " if name in ("Recent commands", "Open errors") else ", "
            lines.append(f"- {name}: {sep.join(merged)}")
    text = strip(summary)
    if not lines:
        return text
    return f"{text}\n\n{HEADING}\n" + "\n".join(lines)
