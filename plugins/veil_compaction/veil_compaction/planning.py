"""When a compaction runs and what it folds (seed 000): ``plan_compaction``'s answers.

The core offers what the prompt holds of the history after the summary and carries the answer
back to the stored history (:mod:`veil.core.prompt.compaction`); this module decides:

- automatic full compaction (kinds ``"prompt"`` and ``"refused"``): once the prompt exceeds
  ``compaction.threshold`` x the window (or the provider refused it as too long), fold all but
  the newest ``compaction.keepRecentTurns`` steps (:func:`choose_cut`), fewer when those alone
  take over :data:`KEPT_SHARE` of the threshold;
- seed 000's defaultCompaction (kinds ``"manual"`` and ``"auto"``): fold the oldest messages
  until their characters reach ``compactionCount`` percent of the uncompacted context
  (:func:`batch_end`).

A *step* (DESIGN.md "Turn and step") is one assistant message together with the tool results that
answer its calls. Tool results always follow their assistant message directly, so a cut placed
right before a message that is not a tool result never separates a call from its result, however
many parallel calls the batch holds: such positions are the *boundaries* of a history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from veil import (
    CompactionPlan,
    Message,
    content_text_with_parts,
    default_compaction_settings,
)

KEPT_SHARE = 0.5
"""Most of ``threshold x window`` the kept recent steps may take: fewer steps are kept when they
would exceed it (down to one), leaving the rest for the system prompt, the summary and growth."""


def next_boundary(messages: list[Message], index: int) -> int:
    """The first boundary at or after ``index`` (the batch grows to take its remaining results)."""
    index = max(index, 0)
    while index < len(messages) and messages[index].get("role") == "tool":
        index += 1
    return index


def step_starts(messages: list[Message]) -> list[int]:
    """Indices of the assistant messages (each starts a step), in order."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def message_chars(message: Message) -> int:
    """Characters of one message, as seed 000's defaultCompaction counts them.

    The content's characters plus, for each tool call, the characters of its name and JSON
    arguments (what the model must read again). No per-message overhead.
    """
    chars = len(content_text_with_parts(message.get("content")))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        chars += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return chars


# -- automatic full compaction ---------------------------------------------------------------


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


# -- the hook's answer -----------------------------------------------------------------------


def full_trigger_tokens(session: Any) -> float:
    """``compaction.threshold`` in effect x the session's window: the prompt size (tokens, tool
    schemas included) above which automatic full compaction runs."""
    settings = session.config.settings.compaction
    layer_on = bool(getattr(session.veil, "context_layer_on", False))
    return settings.trigger(layer_on) * session.context_window


def plan(
    session: Any, messages: list[Message], kind: str, prompt_tokens: int | None
) -> CompactionPlan | None:
    """The plan for ``plan_compaction`` (see :func:`veil.hookspecs.plan_compaction`).

    Kind ``"prompt"``: None while ``prompt_tokens`` is at most :func:`full_trigger_tokens`.
    Kinds ``"prompt"`` and ``"refused"``: fold up to :func:`choose_cut` with
    ``compaction.keepRecentTurns`` steps kept, at most :data:`KEPT_SHARE` of the trigger.
    Kinds ``"manual"`` and ``"auto"``: fold up to :func:`batch_end` with ``compactionCount``
    percent of the characters of the summary and ``messages``.

    Raises:
        ConfigError: the session's snapshot of ``defaultCompaction`` holds a bad value.
    """
    if kind in ("manual", "auto"):
        percent = default_compaction_settings(session).compaction_count
        return CompactionPlan(batch_end(messages, 0, len(session.compact_summary or ""), percent))
    if kind not in ("prompt", "refused"):
        return None  # a kind this version does not know: leave it to another plugin
    trigger = full_trigger_tokens(session)
    if kind == "prompt" and (prompt_tokens is None or prompt_tokens <= trigger):
        return None
    keep = session.config.settings.compaction.keep_recent_turns
    return CompactionPlan(choose_cut(messages, keep, session.count_tokens, trigger * KEPT_SHARE))
