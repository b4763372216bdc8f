"""What every compaction shares: the settings it reads, its one write, its accounting and events."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from veil.core.context import SUMMARY_PREFIX, current_request
from veil.core.errors import CompactionRejected, ConfigError
from veil.core.settings import DefaultCompaction
from veil.core.types import Message


def default_compaction_settings(session: Any) -> DefaultCompaction:
    """The session's snapshot of agent.json's ``defaultCompaction`` (seed 000: snapshotted at
    creation; later edits of agent.json do not apply to the session).

    Raises:
        ConfigError: the snapshot holds a value out of range, naming the field.
    """
    raw = (getattr(session, "snapshot", None) or {}).get("defaultCompaction") or {}
    try:
        return DefaultCompaction.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"session {session.id}: snapshot defaultCompaction.{field}: {first['msg']}"
        ) from exc


def summary_messages(summary: str | None) -> list[Message]:
    """The system message the core injects for a summary (none when there is no summary)."""
    if not summary:
        return []
    return [{"role": "system", "content": SUMMARY_PREFIX + summary}]


def conversation_tokens(session: Any, summary: str | None, messages: list[Message]) -> int:
    """Tokens of the summary message plus ``messages`` (the session's tokenizer; no system
    prompt), used for the before / after figures of a compaction."""
    return int(session.count_tokens([*summary_messages(summary), *messages]))


def pinned_before(session: Any, size: int) -> list[Message]:
    """The current request's user messages before ``size``: what the core sends verbatim after
    the summary when ``compact_size`` is ``size`` (:func:`veil.core.context.pinned_requests`)."""
    history = session.messages
    return [history[i] for i in current_request(history) if i < size]


def check_shrinks(tokens_before: int, tokens_after: int) -> None:
    """Refuse a compaction that does not make what is sent smaller (issue 19: a summary longer
    than what it replaces was applied, and a small window then compacted every turn).

    Args:
        tokens_before: tokens of the summary and messages sent before the compaction.
        tokens_after: the same once the new summary would stand in for the compacted part.

    Raises:
        CompactionRejected: ``tokens_after >= tokens_before``; nothing has been written.
    """
    if tokens_after >= tokens_before:
        raise CompactionRejected(
            f"the summary would not shrink the prompt ({tokens_before} -> {tokens_after} "
            "tokens); the conversation is left as it was"
        )


def commit(session: Any, summary: str, new_size: int) -> None:
    """Store ``summary`` and ``compact_size = new_size`` together (one ``save_state`` write, one
    SQLite transaction); on failure the session keeps its previous values in memory too."""
    old = (session.compact_summary, session.compact_size)
    session.compact_summary, session.compact_size = summary, new_size
    try:
        session.save_state()
    except BaseException:
        session.compact_summary, session.compact_size = old
        raise


def usage_recorder(session: Any) -> Any:
    """A callback recording each summarising call's usage in the store with role ``compact``."""

    def record(completion: Any, seconds: float) -> None:
        store = getattr(getattr(session, "veil", None), "store", None)
        if store is None:
            return
        usage = completion.usage or {}
        store.record_usage(
            session.id,
            {
                "role": "compact",
                "model": completion.model,
                "provider": completion.provider,
                "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                "completion_tokens": int(usage.get("completion_tokens") or 0),
                "seconds": seconds,
            },
        )

    return record
