"""defaultCompaction's ``autoThreshold`` (seed 000 "Auto-compaction").

After every loop iteration (``after_iteration``, between tool batches) and when a run ends
(``turn_end``: the core does not call ``after_iteration`` after the final answer, and chat
sessions have no tool batches), compaction runs by itself once
``context_size / context_size_limit x 100`` reaches ``autoThreshold``.

``context_size`` is the last prompt's tokens (``session.last_prompt_tokens``, counted with the
model's tokenizer when the prompt was built) plus the messages added since that prompt (the
reply and its tool results). ``context_size_limit`` is the session model's window.

No loops: a compaction is never followed by another at the next check. If the context is still
at or above the threshold one iteration after a compaction (the estimate, the system prompt or
the kept messages keep it there), auto-compaction pauses, with one warning, until the context
falls below the threshold again.
"""

from __future__ import annotations

from typing import Any

from veil import (
    CompactResult,
    auto_compaction_stopped,
    conversation_tokens,
    default_compaction_settings,
    just_compacted,
    record_compaction_failure,
    run_default_compaction,
)

STATE_KEY = "veil_compaction"


def context_size(session: Any) -> int:
    """Estimated tokens of the next prompt: the last prompt plus what was appended since."""
    messages = session.messages
    last_reply = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if not session.last_prompt_tokens or last_reply is None:
        start = min(session.compact_size, len(messages))
        return conversation_tokens(session, session.compact_summary, messages[start:])
    return int(session.last_prompt_tokens) + int(session.count_tokens(messages[last_reply:]))


def usage_percent(session: Any) -> float:
    """``context_size / context_size_limit x 100`` (seed 000), the limit being the window."""
    return context_size(session) / max(1, session.context_window) * 100.0


def check(session: Any) -> CompactResult | None:
    """Run defaultCompaction (the core's :func:`veil.run_default_compaction`) when
    ``autoThreshold`` is reached; return its result, else None.

    Never raises: a failed or rejected compaction is reported as a ``warning`` event and the
    session is left as it was; after ``compaction.maxConsecutiveFailures`` in a row it is not
    tried again (:func:`veil.auto_compaction_stopped`).
    """
    if getattr(session, "closed", False):
        return None
    try:
        settings = default_compaction_settings(session)
    except Exception as exc:  # noqa: BLE001 - a bad snapshot must not break the turn
        session.emit("warning", text=str(exc))
        return None
    if not settings.enabled or settings.auto_threshold is None:
        return None
    state = session.state.setdefault(STATE_KEY, {})
    percent = usage_percent(session)
    over = percent >= settings.auto_threshold
    last = state.get("auto_step")
    if state.get("paused"):
        if not over:
            state.pop("paused", None)
        return None
    if last is not None and 0 <= session.step - last <= 1:
        if over and session.step != last:
            state["paused"] = True
            session.emit(
                "warning",
                text=(
                    f"context still at {percent:.0f}% (autoThreshold {settings.auto_threshold}%) "
                    "right after a compaction; auto-compaction pauses until it falls below"
                ),
            )
        return None
    if just_compacted(session) or not over:
        return None  # a full compaction built this iteration's prompt: not twice in a row
    if auto_compaction_stopped(session):
        return None  # said once when it stopped (veil.record_compaction_failure)
    try:
        result = run_default_compaction(session, trigger="auto")
    except Exception as exc:  # noqa: BLE001 - the turn goes on without compaction
        record_compaction_failure(session, "auto-compaction", str(getattr(exc, "message", exc)))
        session.save_state()
        return None
    if not result.already_up_to_date:
        state["auto_step"] = session.step
        session.save_state()
    return result
