"""veil's compaction plugin (seed 000 "Context Compaction" and "Default Compaction").

Hooks implemented:

- ``compact``: mode ``masking`` (observation masking), ``full`` (automatic full compaction at
  ``compaction.threshold``), ``default`` (defaultCompaction, manual through ``Veil.compact``).
- ``after_iteration`` and ``turn_end``: defaultCompaction's ``autoThreshold``.
- ``register_slash_commands``: ``/compact [instructions]``.
- ``register_commands``: ``veil compact [--session ID] [--instructions TEXT] [--json]``.

The logic lives in sibling modules; this module only wires hooks.
"""

from __future__ import annotations

from typing import Any

from veil.core.types import CompactRequest, CompactResult, SlashCommand
from veil.hookspecs import hookimpl
from veil_compaction import auto, commands, failures
from veil_compaction.default import run_default_compaction
from veil_compaction.full import run_full_compaction
from veil_compaction.masking import mask_in_blocks

__all__ = ["compact", "after_iteration", "turn_end", "register_slash_commands", "register_commands"]


@hookimpl
def compact(session: Any, request: CompactRequest) -> CompactResult | None:
    """Answer the core's compaction request by mode (see the module docstring).

    Mode ``full`` never raises: a failed or rejected summary is reported as a ``warning``
    event, nothing is changed, and None lets the turn go on; after
    ``compaction.maxConsecutiveFailures`` failures in a row it is not tried again
    (:mod:`veil_compaction.failures`). Mode ``default`` raises SessionClosed,
    CompactionDisabled, ConfigError, CompactionRejected or the model's error, leaving the
    session unchanged.
    """
    if request.mode == "masking":
        return CompactResult(messages=_mask(session, request))
    if request.mode == "full":
        if failures.stopped(session):
            return None
        try:
            result = run_full_compaction(session, request.messages, request.indices)
        except Exception as exc:  # noqa: BLE001 - the turn must go on; nothing was changed
            failures.failed(session, "full compaction", str(getattr(exc, "message", exc)))
            return None
        if result is not None:
            failures.succeeded(session)
        return result
    if request.mode == "default":
        result = run_default_compaction(session, request.instructions)
        if not result.already_up_to_date:
            failures.succeeded(session)  # a manual /compact that worked starts auto again
            session.save_state()
        return result
    return None


STATE_KEY = "veil_compaction"


def _mask(session: Any, request: CompactRequest) -> list:
    """Observation masking in blocks of ``compaction.observationMaskingBlock`` results. The
    boundary (the first message index not masked yet) is kept in
    ``session.state["veil_compaction"]["maskedBefore"]`` as an index into the session's
    history, so a resumed session masks what it masked before; without ``first_index`` (the
    messages are not the session's history) each call starts from nothing."""
    settings = session.config.settings.compaction
    layer_on = bool(getattr(session.veil, "context_layer_on", False))
    first = request.first_index
    state = session.state.setdefault(STATE_KEY, {}) if first is not None else {}
    before = max(0, int(state.get("maskedBefore", 0)) - (first or 0))
    masked, boundary = mask_in_blocks(
        request.messages,
        settings.masking_turns(layer_on),
        settings.masking_block(layer_on),
        before,
    )
    if first is not None:
        state["maskedBefore"] = max(int(state.get("maskedBefore", 0)), first + boundary)
    return masked


@hookimpl
def after_iteration(session: Any, iteration: int) -> None:
    """Check ``autoThreshold`` between tool batches."""
    auto.check(session)


@hookimpl
def turn_end(session: Any, final_message: Any) -> None:
    """Check ``autoThreshold`` after the final answer (no ``after_iteration`` follows it)."""
    auto.check(session)


@hookimpl
def register_slash_commands(veil: Any) -> list[SlashCommand]:
    """``/compact [instructions]``."""
    return commands.slash_commands()


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil compact``."""
    commands.add_cli_commands(cli)
