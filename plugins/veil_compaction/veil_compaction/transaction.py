"""What every compaction shares: the settings it reads, its one write, its accounting and events."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from veil.core.context import SUMMARY_PREFIX
from veil.core.errors import ConfigError
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
