"""Where a compaction cuts a history, and how its parts are measured (seed 000).

The core chooses what a compaction folds into the summary (:mod:`veil.core.prompt.compaction`), so that
memory extraction (``before_compaction``) and the summariser (``summarise``) see exactly the same
messages: :func:`choose_cut` for automatic full compaction (``compaction.keepRecentTurns``),
:func:`batch_end` for seed 000's defaultCompaction (``compactionCount``), and :func:`stored_cut`
to carry a cut in what is sent back to the stored history.

A *step* (DESIGN.md "Turn and step") is one assistant message together with the tool results that
answer its calls. Tool results always follow their assistant message directly, so a cut placed
right before a message that is not a tool result never separates a call from its result, however
many parallel calls the batch holds: such positions are the *boundaries* of a history.
"""

from __future__ import annotations

from collections.abc import Callable
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


# -- automatic full compaction ---------------------------------------------------------------

KEPT_SHARE = 0.5
"""Most of ``threshold x window`` the kept recent steps may take: fewer steps are kept when they
would exceed it (down to one), leaving the rest for the system prompt, the summary and growth."""


def _cut_keeping(messages: list[Message], keep_steps: int) -> int:
    starts = step_starts(messages)
    if len(starts) <= keep_steps:
        return 0
    cut = starts[-keep_steps]
    while cut > 0 and messages[cut - 1].get("role") == "user":
        cut -= 1  # the request that started these steps stays with them
    return cut


def choose_cut(
    messages: list[Message],
    keep_steps: int,
    count: Callable[[list[Message]], int] | None = None,
    max_kept_tokens: float | None = None,
) -> int:
    """Where to cut ``messages`` into a summarised head and a kept tail.

    Args:
        messages: what the core would send (oldest first, no system prompt).
        keep_steps: steps to keep (``compaction.keepRecentTurns``), at least 1.
        count: tokens of a message list; with ``max_kept_tokens``, fewer steps are kept (down to
            one) while the tail is larger than that.

    Returns:
        An index ``cut``: ``messages[:cut]`` is summarised, ``messages[cut:]`` is sent. It is
        always a boundary (never between a tool call and its results); user messages directly
        before the first kept step are kept with it. 0 means nothing can be summarised.
    """
    keep = max(1, keep_steps)
    while True:
        cut = _cut_keeping(messages, keep)
        if keep == 1 or count is None or max_kept_tokens is None:
            return cut
        if count(messages[cut:]) <= max_kept_tokens:
            return cut
        keep -= 1


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


# -- defaultCompaction -----------------------------------------------------------------------


def batch_end(messages: list[Message], start: int, summary_chars: int, percent: int) -> int:
    """End (exclusive) of the batch one defaultCompaction run summarises (seed 000, step 2).

    Args:
        messages: the session's full history (no system messages).
        start: ``compactSize`` (messages already summarised).
        summary_chars: characters of the current ``compactSummary`` (0 when none).
        percent: ``compactionCount``, 1-99.

    Returns:
        The smallest ``end`` such that the characters of ``messages[start:end]`` (see
        :func:`message_chars`) reach ``percent``% of ``summary_chars`` + the characters of
        ``messages[start:]``, taking at least one message, then moved forward past any tool
        results that follow (a batch of parallel calls is never split). ``start`` when there is
        nothing left to summarise.

    Example (seed 000): 100 messages of 10 characters, no summary, 50% -> 50.
    """
    n = len(messages)
    start = min(max(start, 0), n)
    if start >= n:
        return start
    total = summary_chars + sum(message_chars(m) for m in messages[start:])
    end, collected = start, 0
    while end < n and collected * 100 < percent * total:  # integers: no rounding at the edge
        collected += message_chars(messages[end])
        end += 1
    return next_boundary(messages, max(end, start + 1))
