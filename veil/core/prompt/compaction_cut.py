"""Carrying a compaction's cut back to the stored history (the core's mechanism).

What a compaction folds is decided by the plugin that answers ``plan_compaction``
(``veil_compaction`` by default); its answer counts messages of what the prompt holds after the
summary (stubs, masks and pairing repairs included). This module maps such a cut onto an index
of the session's stored history (:func:`stored_cut`), and says which cuts keep every tool call
with its results (:func:`is_boundary`): a cut placed right before a message that is not a tool
result never separates a call from its result, however many parallel calls the batch holds.
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


def session_index(history: list[Message], start: int, sent: list[Message], cut: int) -> int:
    """Map a boundary ``cut`` in ``sent`` back to an index of the stored ``history``.

    ``sent`` is what the core sends after the summary: ``history[start:]`` with contents replaced
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


def stored_cut(
    history: list[Message],
    compact_size: int,
    messages: list[Message],
    cut: int,
    indices: list[int | None] | None,
) -> int:
    """The index of ``history`` (the stored messages) where the cut before ``messages[cut]``
    lands.

    Args:
        history: the session's stored messages.
        compact_size: messages of ``history`` already summarised (``messages`` starts after).
        messages: what is sent after the summary; ``cut`` a boundary in it.
        indices: the stored index of each of ``messages`` (None for a tool result made up to
            repair pairing), or None when unknown.

    Returns:
        With ``indices``, exactly ``indices[cut]`` (``messages[cut]`` is never a tool result,
        so it has one), or the history's end when everything is summarised. Without them,
        counted by :func:`session_index`, which is exact only when no step was left out of
        what is sent (issue 19: collapsed steps made that count land far too early, so the cut
        barely advanced and the same early turn was summarised again and again).
    """
    if indices is not None and len(indices) == len(messages):
        if cut >= len(messages):
            return len(history)
        if indices[cut] is not None:
            return int(indices[cut])
    return session_index(history, compact_size, messages, cut)
