"""Automatic full compaction (seed 000 "Context Compaction", step 2).

When the prompt still exceeds ``compaction.threshold`` x the window after masking and eviction,
the core asks for mode ``full``: the older part of what would be sent is summarised with the
``compact`` model role (falling back to the session's main model), the summary is stored as the
session's ``compact_summary`` with ``compact_size`` moved past the summarised messages, and the
most recent ``compaction.keepRecentTurns`` steps are sent after it. Memory extraction
(``before_compaction``) runs first, outside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from veil.core.types import CompactResult, Message
from veil_compaction.ledger import with_ledger
from veil_compaction.steps import session_index, step_starts
from veil_compaction.summarise import Summariser
from veil_compaction.transaction import (
    check_shrinks,
    commit,
    conversation_tokens,
    default_compaction_settings,
    pinned_before,
    usage_recorder,
)

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


def compaction_model(session: Any) -> Any:
    """The model that summarises for full compaction: ``models.compact`` when configured, else the
    session's own main model (seed 000: "the compact role falls back to main")."""
    llm = session.veil.llm
    if session.config.models.compact is not None:
        return llm.model_for("compact")
    return llm.model_for("compact", session.model)


def extract_memories(session: Any, part: list[Message]) -> None:
    """Call ``before_compaction`` when memory is enabled for the agent (seed 000: extraction is
    skipped when memory is disabled). An extractor's failure is reported, not raised: what it
    wrote stays, and the compaction goes on."""
    if not session.config.memory_enabled(session.agent):
        return
    try:
        session.veil.pm.hook.before_compaction(session=session, messages=list(part))
    except Exception as exc:  # noqa: BLE001 - extraction must not block compaction
        session.emit("warning", text=f"memory extraction before compaction failed: {exc}")


def stored_cut(session: Any, messages: list[Message], cut: int, indices: Any) -> int:
    """The index of ``session.messages`` where the cut before ``messages[cut]`` lands.

    With ``indices`` (the stored index of each sent message, :class:`CompactRequest`), exactly
    ``indices[cut]`` (``messages[cut]`` is never a tool result, so it has one), or the history's
    end when everything is summarised. Without them, counted by
    :func:`~veil_compaction.steps.session_index`, which is exact only when no step was left out
    of what is sent (issue 19: collapsed steps made that count land far too early, so the cut
    barely advanced and the same early turn was summarised again and again)."""
    history = session.messages
    if indices is not None and len(indices) == len(messages):
        if cut >= len(messages):
            return len(history)
        if indices[cut] is not None:
            return int(indices[cut])
    return session_index(history, session.compact_size, messages, cut)


def run_full_compaction(
    session: Any, messages: list[Message], indices: list[int | None] | None = None
) -> CompactResult | None:
    """Summarise the older part of ``messages`` and return what to send instead.

    Args:
        session: the session (``messages`` are its ``messages[compact_size:]`` as prepared by the
            core: masked, evicted content stubbed, collapsed steps left out, pairing repaired).
        messages: what the core would send after the system prompt and summary.
        indices: the stored index of each of ``messages`` (:func:`stored_cut`).

    Returns:
        ``CompactResult(messages=<kept tail>, compacted_count, new_size, summary, tokens_before,
        tokens_after)``; None when ``defaultCompaction.enabled`` is false (DESIGN.md "Decisions")
        or when nothing can be summarised (the recent steps are all there is).

    Raises:
        CompactionRejected: the summary (with veil's recorded section) would not make the
            prompt smaller (issue 19); nothing was written.
        Whatever the summarising model raises; the session is then unchanged (the summary and
        ``compact_size`` are only written after the summary succeeded).
    """
    if not default_compaction_settings(session).enabled:
        return None
    settings = session.config.settings.compaction
    layer_on = bool(getattr(session.veil, "context_layer_on", False))
    budget = settings.trigger(layer_on) * session.context_window * KEPT_SHARE
    cut = choose_cut(messages, settings.keep_recent_turns, session.count_tokens, budget)
    if cut <= 0:
        return None
    part, kept = messages[:cut], messages[cut:]
    old_summary, old_size = session.compact_summary, session.compact_size
    new_size = stored_cut(session, messages, cut, indices)
    if new_size <= old_size:
        return None
    tokens_before = conversation_tokens(
        session, old_summary, [*pinned_before(session, old_size), *messages]
    )

    extract_memories(session, part)  # before the transaction: its writes stay either way
    outcome = Summariser(
        compaction_model(session), on_completion=usage_recorder(session)
    ).summarise(part, previous=old_summary)
    summary = with_ledger(outcome.text, part, old_summary)
    tokens_after = conversation_tokens(session, summary, [*pinned_before(session, new_size), *kept])
    check_shrinks(tokens_before, tokens_after)
    commit(session, summary, new_size)

    compacted = new_size - old_size
    session.emit(
        "compaction",
        text=(
            f"compacted {compacted} messages into a summary "
            f"({outcome.calls} model call(s)): {tokens_before} -> {tokens_after} tokens"
        ),
        tokensBefore=tokens_before,
        tokensAfter=tokens_after,
        mode="full",
        compactedCount=compacted,
        newSize=new_size,
        summaryCalls=outcome.calls,
    )
    return CompactResult(
        messages=list(kept),
        compacted_count=compacted,
        new_size=new_size,
        summary=summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
    )
