"""pi sessions: ``~/.pi/agent/sessions/--<cwd, / as ->--/<time>_<id>.jsonl``.

As pi-coding-agent 0.73 documents them (``docs/session-format.md``) and writes them
(``core/session-manager.js``): the first line is the ``session`` header (``version`` 1 to 3,
``cwd``), then one entry per line. Version 1 files are a plain sequence; from version 2 each
entry has an ``id`` and a ``parentId``, a tree in which the current leaf is the last entry
written (what pi resumes): the reader replays the path from the root to it, as pi's
``buildSessionContext`` does, and counts the entries of other branches as skipped.

On that path:

* ``message`` entries hold an ``AgentMessage``: ``user`` (the task, or later what the model
  read), ``assistant`` (a step: ``text`` and ``toolCall`` blocks; ``thinking`` is not replayed;
  one that ended in ``stopReason`` ``error`` or ``aborted`` is skipped, as pi leaves it out of
  the next prompt), ``toolResult`` (paired with its call by ``toolCallId``), ``bashExecution``
  (a command the user ran with ``!``, shown to the model as pi renders it unless excluded),
  ``custom`` / ``hookMessage`` (extension text the model reads);
* ``compaction`` entries are boundaries (their summary is not replayed as a message);
* ``branch_summary`` and ``custom_message`` entries are text the model reads;
* ``model_change``, ``thinking_level_change``, ``custom``, ``label``, ``session_info`` are
  bookkeeping, skipped and counted; other types are counted as unknown.
"""

from __future__ import annotations

from typing import Any

from veil.default_plugins.replay.trajectory import (
    Trajectory,
    TrajectoryBuilder,
    content_text,
    seconds,
)

BOOKKEEPING_TYPES = frozenset(
    {"model_change", "thinking_level_change", "custom", "label", "session_info"}
)
MESSAGE_TYPES = frozenset({"message", "compaction", "branch_summary", "custom_message"})

# pi's own wording around a branch summary (core/messages.js BRANCH_SUMMARY_PREFIX / SUFFIX).
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


def looks_like(records: list[Any]) -> bool:
    """Whether parsed JSONL ``records`` are a pi session: the first is a ``session`` header
    with an ``id``."""
    first = records[0] if records else None
    return (
        isinstance(first, dict)
        and first.get("type") == "session"
        and isinstance(first.get("id"), str)
        and ("cwd" in first or "version" in first)
    )


def _path(entries: list[dict[str, Any]], version: int) -> list[int]:
    """Indices of the entries from the root to the leaf (the last entry written)."""
    if version < 2 or not all(isinstance(e.get("id"), str) for e in entries):
        return list(range(len(entries)))  # version 1: the file order is the conversation
    by_id = {e["id"]: i for i, e in enumerate(entries)}
    path: list[int] = []
    seen: set[int] = set()
    current: int | None = len(entries) - 1 if entries else None
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        parent = entries[current].get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path


def read(path: str, records: list[Any]) -> Trajectory:
    """Read a pi session's parsed records (see the module docstring)."""
    builder = TrajectoryBuilder(path, "pi")
    tally = builder.records
    header = records[0] if records and isinstance(records[0], dict) else {}
    version = header.get("version") if isinstance(header.get("version"), int) else 1
    entries: list[dict[str, Any]] = []
    for record in records[1:]:
        if isinstance(record, dict):
            entries.append(record)
        else:
            tally.skip("not an object", known=False)
    on_path = _path(entries, version)
    chosen = set(on_path)
    left_out = len(entries) - len(chosen)
    if left_out:
        tally.skip("other branch", count=left_out)
    for i in on_path:
        entry = entries[i]
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("message"), dict):
            _message(builder, entry["message"], entry)
        elif kind == "compaction":
            builder.boundary()
        elif kind == "branch_summary":
            summary = entry.get("summary")
            if isinstance(summary, str) and summary:
                builder.user(f"{BRANCH_SUMMARY_PREFIX}{summary}{BRANCH_SUMMARY_SUFFIX}")
        elif kind == "custom_message":
            builder.user(content_text(entry.get("content")))
        else:
            label = kind if isinstance(kind, str) else "no type"
            tally.skip(label, known=label in BOOKKEEPING_TYPES or label in MESSAGE_TYPES)
    return builder.build()


def _usage_tokens(message: dict[str, Any]) -> int | None:
    """Prompt tokens of pi's ``usage``: input + cacheRead + cacheWrite."""
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    parts = [usage.get(k) for k in ("input", "cacheRead", "cacheWrite")]
    numbers = [p for p in parts if isinstance(p, int | float) and not isinstance(p, bool)]
    total = int(sum(numbers))
    return total if numbers and total > 0 else None


def _when(message: dict[str, Any], entry: dict[str, Any]) -> float | None:
    """A message's time: its ``timestamp`` in unix milliseconds, else the entry's ISO time."""
    stamp = message.get("timestamp")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return stamp / 1000.0
    return seconds(entry.get("timestamp"))


def _bash_text(message: dict[str, Any]) -> str:
    """A user's ``!`` command as pi shows it to the model (``bashExecutionToText``)."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(code, int) and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _message(builder: TrajectoryBuilder, message: dict[str, Any], entry: dict[str, Any]) -> None:
    role = message.get("role")
    tally = builder.records
    if role == "assistant":
        if message.get("stopReason") in ("error", "aborted"):
            tally.skip(f"assistant ({message['stopReason']})")
            return
        index = builder.step(_when(message, entry), _usage_tokens(message))
        content = message.get("content")
        if isinstance(content, str):
            builder.add(index, content)
            return
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                builder.add(index, content_text(block))
            elif block.get("type") == "toolCall":
                call_id = block.get("id") if isinstance(block.get("id"), str) else ""
                builder.add(
                    index, call=(call_id, str(block.get("name") or ""), block.get("arguments"))
                )
    elif role == "toolResult":
        call_id = message.get("toolCallId")
        builder.result(
            call_id if isinstance(call_id, str) else "", content_text(message.get("content"))
        )
    elif role == "user" or role in ("custom", "hookMessage"):
        builder.user(content_text(message.get("content")))
    elif role == "bashExecution":
        if message.get("excludeFromContext"):
            tally.skip("bashExecution (excluded from context)")
        else:
            builder.user(_bash_text(message))
    elif role == "branchSummary" and isinstance(message.get("summary"), str):
        builder.user(f"{BRANCH_SUMMARY_PREFIX}{message['summary']}{BRANCH_SUMMARY_SUFFIX}")
    elif role == "compactionSummary":
        builder.boundary()
    else:
        tally.skip(f"message {role}" if isinstance(role, str) else "message", known=False)
