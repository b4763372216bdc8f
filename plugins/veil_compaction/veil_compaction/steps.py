"""Where a history may be cut, and how its parts are measured.

A *step* (DESIGN.md "Turn and step") is one assistant message together with the tool results that
answer its calls. Tool results always follow their assistant message directly, so a cut placed
right before a message that is not a tool result never separates a call from its result, however
many parallel calls the batch holds: such positions are the *boundaries* of a history.
"""

from __future__ import annotations

from typing import Any

from veil.core.types import Message


def is_tool(message: Message) -> bool:
    """Whether ``message`` is a tool result (``role == "tool"``)."""
    return message.get("role") == "tool"


def is_boundary(messages: list[Message], index: int) -> bool:
    """Whether cutting ``messages`` before ``index`` keeps every batch whole.

    ``0`` and ``len(messages)`` are boundaries; otherwise the message at ``index`` must not be a
    tool result.
    """
    return index <= 0 or index >= len(messages) or not is_tool(messages[index])


def next_boundary(messages: list[Message], index: int) -> int:
    """The first boundary at or after ``index`` (the batch grows to take its remaining results)."""
    index = max(index, 0)
    while index < len(messages) and is_tool(messages[index]):
        index += 1
    return index


def step_starts(messages: list[Message]) -> list[int]:
    """Indices of the assistant messages (each starts a step), in order."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def content_text(content: Any) -> str:
    """The text of a message ``content``: a str, None, or OpenAI content parts (text parts joined;
    other parts shown as ``[<type>]``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text", "")))
                else:
                    parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return str(content)


def message_chars(message: Message) -> int:
    """Characters of one message, as seed 000's defaultCompaction counts them.

    The content's characters plus, for each tool call, the characters of its name and JSON
    arguments (what the model must read again). No per-message overhead.
    """
    chars = len(content_text(message.get("content")))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        chars += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return chars


def session_index(history: list[Message], start: int, sent: list[Message], cut: int) -> int:
    """Map a boundary ``cut`` in ``sent`` back to an index of the stored ``history``.

    ``sent`` is what the core passes to ``compact``: ``history[start:]`` with contents replaced
    (masking, eviction stubs) and tool results dropped or added to repair pairing. Neither change
    touches a non-tool message, so the k-th non-tool message of ``sent`` is the k-th non-tool
    message of ``history[start:]``; the cut lands right before it (or at the end).

    Returns:
        An index in ``[start, len(history)]`` that is a boundary of ``history``.
    """
    wanted = sum(1 for m in sent[:cut] if not is_tool(m))
    if cut >= len(sent):
        return len(history)
    seen = 0
    for idx in range(start, len(history)):
        if is_tool(history[idx]):
            continue
        if seen == wanted:
            return idx
        seen += 1
    return len(history)
