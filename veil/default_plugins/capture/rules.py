"""The ``veil.capture`` default plugin's rules: every turn and every tool result becomes a
context item.

Rules (no model involved, deterministic):

* a user message -> kind ``correction`` when it opens like a correction ("no,", "actually",
  "that's wrong", "don't"...), else ``intent`` (the task). Both weigh zero for eviction. Its
  tags become the task's tags (``session.note_task``), against which items are scored; an
  assistant turn's join them (``session.note_turn``).
* an assistant message -> its turn kind: ``decision`` (says it decided / will use / chose),
  ``action`` (calls write / edit / bash), ``exploration`` (calls read / grep / ls / recall), else
  ``status``. The model can relabel the current turn with ``veil_turn_meta``.
* a tool result -> ``procedural`` for a command that passed (how to do something), else
  ``episodic``; targets = the path argument plus paths and symbols found in the text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from veil import (
    CaptureEvent,
    ContextItem,
    content_identifiers,
    context_ops,
    distinct_runs,
    extract_tags,
    extract_targets,
    tags_text,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession

_CORRECTION = re.compile(
    r"^\s*(no\b|nope\b|actually\b|wrong\b|that'?s (not|wrong)|don'?t\b|do not\b|stop\b|instead\b|"
    r"not that\b|you (broke|missed|forgot)\b)",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(i (will|'ll) use|i decided|decided to|let'?s go with|we should use|the fix is|"
    r"i chose|going with|plan:)\b",
    re.IGNORECASE,
)
TAG_CHARS = 4_000
"""Characters of a tool result its tags are taken from (with the tool's name, command and path)."""
ACTION_TOOLS = frozenset({"write", "edit", "bash", "memory_write"})
EXPLORATION_TOOLS = frozenset(
    {"read", "grep", "ls", "veil_recall", "veil_history", "memory_search"}
)


def user_kind(text: str) -> str:
    """``correction`` or ``intent`` for a user message (see module docstring)."""
    return "correction" if _CORRECTION.match(text or "") else "intent"


def assistant_kind(content: str, tool_names: list[str]) -> str:
    """Turn kind of an assistant message from its text and the tools it calls."""
    if _DECISION.search(content or ""):
        return "decision"
    if any(n in ACTION_TOOLS for n in tool_names):
        return "action"
    if any(n in EXPLORATION_TOOLS for n in tool_names):
        return "exploration"
    return "status"


def assistant_text(message: dict) -> str:
    """The content of an assistant message's turn item: its text, then one
    ``name(arguments)`` line per tool call."""
    return (message.get("content") or "") + "".join(
        f"\n{tc['function']['name']}({tc['function'].get('arguments', '')})"
        for tc in message.get("tool_calls") or []
    )


def capture_event(session: PluginSession, event: CaptureEvent) -> list[ContextItem]:
    """Items for one capture event (none for the ``tool_call`` phase: the call's arguments
    stay in the assistant message, which is its own item)."""
    stab = session.config.settings.context.initial_stability
    msg = event.message
    if event.phase == "user":
        text = msg.get("content") or ""
        runs = distinct_runs(text)  # one scan for the tags, targets and identifiers
        tags = extract_tags(tags_text(text, runs))
        session.note_task(tags)  # the message sets the task: its tags are the task's tags
        return [
            ContextItem(
                content=text,
                kind=user_kind(text),
                source="user",
                tags=tags,
                targets=extract_targets(text, runs=runs),
                stability=stab.decision,
                identifiers=content_identifiers(text, runs=runs),
            )
        ]
    if event.phase == "assistant":
        text = msg.get("content") or ""
        names = [tc["function"]["name"] for tc in msg.get("tool_calls") or []]
        rendered = assistant_text(msg)
        if not rendered.strip():
            return []
        kind = assistant_kind(text, names)
        runs = distinct_runs(rendered)
        tags = extract_tags(tags_text(rendered, runs))
        targets = extract_targets(rendered, runs=runs)
        session.note_turn(tags)
        context_ops.touch_related(session, targets)
        return [
            ContextItem(
                content=rendered,
                kind=kind,
                source="assistant",
                tags=tags,
                targets=targets,
                stability=getattr(stab, kind, stab.episodic),
                identifiers=content_identifiers(rendered, runs=runs),
            )
        ]
    if event.phase == "tool_result":
        text = msg.get("content") or ""
        args = event.arguments or {}
        targets = []
        path = args.get("path") or (event.result.meta.get("path") if event.result else None)
        if isinstance(path, str) and path:
            targets.append(path)
        runs = distinct_runs(text)  # one scan for the tags, targets and identifiers
        targets += [t for t in extract_targets(text, runs=runs) if t not in targets]
        outcome = event.result.outcome if event.result else None
        procedural = event.tool_name == "bash" and outcome == "pass"
        kind = "procedural" if procedural else "episodic"
        command = args.get("command") if isinstance(args.get("command"), str) else ""
        # the tags read the first TAG_CHARS characters (all of them: the runs, shorter)
        head = tags_text(text, runs) if len(text) <= TAG_CHARS else text[:TAG_CHARS]
        return [
            ContextItem(
                content=text,
                kind=kind,
                source="tool_result",
                tags=extract_tags(f"{event.tool_name} {command} {path or ''} {head}"),
                targets=targets[:32],
                stability=stab.procedural if procedural else stab.episodic,
                outcome=outcome,
                identifiers=content_identifiers(text, runs=runs),
            )
        ]
    return []
