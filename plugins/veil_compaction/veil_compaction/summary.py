"""The ``summarise`` hook's answer: which model summarises, and the text it gives.

The core chooses what a compaction folds, checks the summary and stores it
(:mod:`veil.core.prompt.compaction`); this module writes the text: the structured summary of
:class:`~veil_compaction.summariser.Summariser` (every request fits the summarising model's
window), followed by the section veil records itself from the tool calls
(:mod:`veil_compaction.ledger`), on every path (automatic full compaction, manual ``/compact``,
``autoThreshold``). Each summarising call's usage is recorded in the store with role
``compact``.

Models (seed 000):

* mode ``"full"`` (automatic full compaction): the ``compact`` model role when configured, else
  the session's own main model ("the compact role falls back to main");
* mode ``"default"`` (defaultCompaction, "Model resolution"): ``defaultCompaction.model`` unless
  ``"default"``, then the session's own model, then the global ``main`` model; the global
  ``compact`` role is not used.
"""

from __future__ import annotations

from typing import Any

from veil import Message, Summary, default_compaction_settings
from veil_compaction.ledger import with_ledger
from veil_compaction.summariser import Summariser


def compaction_model(session: Any) -> Any:
    """The model that summarises for full compaction: ``models.compact`` when configured, else the
    session's own main model (seed 000: "the compact role falls back to main")."""
    llm = session.veil.llm
    if session.config.models.compact is not None:
        return llm.model_for("compact")
    return llm.model_for("compact", session.model)


def model_name(session: Any) -> tuple[str | None, str]:
    """The model name defaultCompaction asks for, and where it came from.

    Returns:
        ``(name, source)``: ``(defaultCompaction.model, "defaultCompaction.model")`` when set and
        not ``"default"``; else ``(session.model, "session")`` when the session has one; else
        ``(None, "main")`` (the global main model).

    Raises:
        ConfigError: the session's snapshot of ``defaultCompaction`` holds a bad value.
    """
    configured = default_compaction_settings(session).model
    if configured and configured != "default":
        return configured, "defaultCompaction.model"
    if session.model:
        return session.model, "session"
    return None, "main"


def summary_model(session: Any, mode: str) -> Any:
    """The model that summarises in ``mode`` (``"full"`` or ``"default"``; see the module
    docstring)."""
    if mode == "full":
        return compaction_model(session)
    name, _source = model_name(session)
    return session.veil.llm.model_for("main", name)


def usage_recorder(session: Any) -> Any:
    """A callback recording each summarising call's usage in the store with role ``compact``."""

    def record(completion: Any, seconds: float) -> None:
        usage = completion.usage or {}
        session.veil.record_usage(
            session.id,
            role="compact",
            model=completion.model,
            provider=completion.provider,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
        )

    return record


def summarise(
    session: Any,
    messages: list[Message],
    previous: str | None,
    instructions: list[str],
    mode: str,
) -> Summary:
    """The summary of ``messages`` merged with ``previous``, with veil's recorded section.

    Args:
        session: the session being compacted (read only: nothing is written to it).
        messages: what is folded, oldest first.
        previous: the session's current summary, or None.
        instructions: extra instructions (already redacted), appended to the system prompts.
        mode: ``"full"`` or ``"default"``: which model summarises.

    Returns:
        ``Summary(text, calls)``: the model's summary followed by
        :data:`veil_compaction.ledger.HEADING`'s section, and the model calls made.

    Raises:
        ConfigError: the model's window is too small to summarise with, or the snapshot holds a
            bad value. ProviderError (or whatever the model raises): a call failed or gave an
            empty summary.
    """
    summariser = Summariser(
        summary_model(session, mode), instructions, on_completion=usage_recorder(session)
    )
    outcome = summariser.summarise(messages, previous=previous)
    return Summary(text=with_ledger(outcome.text, messages, previous), calls=outcome.calls)
