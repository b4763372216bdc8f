"""Seed 000's defaultCompaction: a running ``compactSummary`` and a ``compactSize`` counter.

Each run collects the messages from ``compactSize`` on until their characters reach
``compactionCount``% of the uncompacted context (the summary's length plus the characters of the
messages not yet summarised), summarises them together with the existing summary, stores the new
summary and advances ``compactSize``. The core then sends the summary right after the system prompt
and only the messages from ``compactSize`` on.

What is collected and summarised is what the prompt holds of those messages (issue 19,
:func:`veil.core.context.prompt_view`): evicted contents stay their stubs, masked results their
mask, steps that left the prompt whole stay out, so a result long evicted is not read again. veil's
recorded section (files, commands, open errors: :mod:`veil_compaction.ledger`) is appended to the
summary, as on every compaction path, and a summary that would not shrink the prompt is refused
(:func:`veil_compaction.transaction.check_shrinks`). The user messages of the current exchange
are sent verbatim after the summary whatever it says (:func:`veil.core.context.pinned_requests`).

Model (seed 000 "Model resolution"): ``defaultCompaction.model`` unless ``"default"``, then the
session's own model, then the global ``main`` model; the global ``compact`` role is not used here.
"""

from __future__ import annotations

from typing import Any

from veil.core.context import prompt_view
from veil.core.errors import CompactionDisabled
from veil.core.types import CompactResult, Message
from veil_compaction.ledger import with_ledger
from veil_compaction.steps import message_chars, next_boundary
from veil_compaction.summarise import Summariser
from veil_compaction.transaction import (
    check_shrinks,
    commit,
    conversation_tokens,
    default_compaction_settings,
    pinned_before,
    usage_recorder,
)


def batch_end(messages: list[Message], start: int, summary_chars: int, percent: int) -> int:
    """End (exclusive) of the batch one defaultCompaction run summarises (seed 000, step 2).

    Args:
        messages: the session's full history (no system messages).
        start: ``compactSize`` (messages already summarised).
        summary_chars: characters of the current ``compactSummary`` (0 when none).
        percent: ``compactionCount``, 1-99.

    Returns:
        The smallest ``end`` such that the characters of ``messages[start:end]`` (see
        :func:`~veil_compaction.steps.message_chars`) reach ``percent``% of ``summary_chars`` +
        the characters of ``messages[start:]``, taking at least one message, then moved forward
        past any tool results that follow (a batch of parallel calls is never split). ``start``
        when there is nothing left to summarise.

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


def model_name(session: Any) -> tuple[str | None, str]:
    """The model name defaultCompaction asks for, and where it came from.

    Returns:
        ``(name, source)``: ``(defaultCompaction.model, "defaultCompaction.model")`` when set and
        not ``"default"``; else ``(session.model, "session")`` when the session has one; else
        ``(None, "main")`` (the global main model).
    """
    configured = default_compaction_settings(session).model
    if configured and configured != "default":
        return configured, "defaultCompaction.model"
    if session.model:
        return session.model, "session"
    return None, "main"


def run_default_compaction(
    session: Any, instructions: str | None = None, *, trigger: str = "manual"
) -> CompactResult:
    """Run one defaultCompaction on ``session``.

    Args:
        session: an open session.
        instructions: extra instructions for this run (``/compact TEXT``), appended after the
            agent's ``customInstructions``.
        trigger: ``"manual"`` or ``"auto"`` (``autoThreshold``), reported in the event.

    Returns:
        ``CompactResult(compacted_count, new_size, already_up_to_date, summary, tokens_before,
        tokens_after)`` (seed 000's ``compactedCount``, ``newSize``, ``alreadyUpToDate``).

    Raises:
        SessionClosed: the session is closed. CompactionDisabled: ``defaultCompaction.enabled``
        is false in the session's snapshot. ConfigError: the snapshot holds a bad value.
        CompactionRejected: the summary would not shrink the prompt (issue 19); unchanged.
        Whatever the model raises (ProviderError...): the session is then unchanged.
    """
    session.ensure_open()
    settings = default_compaction_settings(session)
    if not settings.enabled:
        raise CompactionDisabled(f"defaultCompaction is disabled for agent {session.agent!r}")
    history = session.messages
    start = min(session.compact_size, len(history))
    old_summary = session.compact_summary
    # what the prompt holds, not the raw history: an evicted result stays its stub (issue 19:
    # a 2 MB result long out of the prompt took 136 summariser calls to read again)
    indices, view = prompt_view(session) if start < len(history) else ([], [])
    if not view:
        return CompactResult(
            compacted_count=0, new_size=start, already_up_to_date=True, summary=old_summary
        )
    cut = batch_end(view, 0, len(old_summary or ""), settings.compaction_count)
    end = len(history) if cut >= len(view) or indices[cut] is None else int(indices[cut])
    part = view[:cut]
    name, _source = model_name(session)
    model = session.veil.llm.model_for("main", name)
    # the instructions go to the model as they are: a key pasted in them (or in the agent's
    # customInstructions) is redacted like everything else that reaches it
    redact = session.veil.redactor.text
    summariser = Summariser(
        model,
        [redact(settings.custom_instructions or ""), redact(instructions or "")],
        on_completion=usage_recorder(session),
    )
    tokens_before = conversation_tokens(
        session, old_summary, [*pinned_before(session, start), *view]
    )
    outcome = summariser.summarise(part, previous=old_summary)
    summary = with_ledger(outcome.text, part, old_summary)
    tokens_after = conversation_tokens(
        session, summary, [*pinned_before(session, end), *view[cut:]]
    )
    check_shrinks(tokens_before, tokens_after)
    commit(session, summary, end)
    session.emit(
        "compaction",
        text=(
            f"compacted {end - start} messages ({trigger} defaultCompaction, "
            f"{outcome.calls} model call(s)): {tokens_before} -> {tokens_after} tokens"
        ),
        tokensBefore=tokens_before,
        tokensAfter=tokens_after,
        mode="default",
        trigger=trigger,
        compactedCount=end - start,
        newSize=end,
        summaryCalls=outcome.calls,
    )
    return CompactResult(
        compacted_count=end - start,
        new_size=end,
        already_up_to_date=False,
        summary=summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
    )
