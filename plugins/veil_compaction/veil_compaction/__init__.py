"""veil's compaction plugin (seed 000 "Context Compaction" and "Default Compaction").

Hooks implemented:

- ``fit_prompt``: observation masking, in blocks (:mod:`veil_compaction.masking`).
- ``plan_compaction``: when a compaction runs and what it folds (:mod:`veil_compaction.planning`):
  automatic full compaction over ``compaction.threshold`` x the window, keeping the newest
  ``compaction.keepRecentTurns`` steps; defaultCompaction's ``compactionCount`` percent.
- ``summarise``: the structured summary and veil's recorded section
  (:mod:`veil_compaction.summary`), for automatic full compaction (mode ``full``) and
  defaultCompaction (mode ``default``). The core carries the plan back to the stored history,
  checks the summary and stores it (:mod:`veil.core.prompt.compaction`).
- ``after_iteration`` and ``turn_end``: defaultCompaction's ``autoThreshold``
  (:mod:`veil_compaction.auto`).
- ``register_slash_commands``: ``/compact [instructions]``.
- ``register_commands``: ``veil compact [--session ID] [--instructions TEXT] [--json]``.

The logic lives in sibling modules; this module only wires hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

# The hooks import what they use when they are called: ``veil --help`` loads every plugin, and
# these modules bring numpy and pydantic with them (issue 30: nothing that may never be used is
# imported on the way to the first prompt). No module of this package may be named after a hook
# of it: importing ``veil_compaction.<name>`` later sets the package's attribute ``<name>`` to
# the module, and a plugin manager made after that would not find the hook (the summariser's
# module is summariser.py, not summarise.py).
if TYPE_CHECKING:  # pragma: no cover
    from veil import CompactionPlan, Message, PluginSession, SlashCommand, Summary

__all__ = [
    "register_settings",
    "after_iteration",
    "fit_prompt",
    "plan_compaction",
    "register_commands",
    "register_slash_commands",
    "summarise",
    "turn_end",
]

STATE_KEY = "veil_compaction"


@hookimpl
def fit_prompt(
    session: PluginSession, messages: list[Message], first_index: int | None
) -> list[int]:
    """Observation masking in blocks of ``compaction.observationMaskingBlock`` results, in
    place; returns the positions of the results it masked (the core takes their items out of
    the live set). The boundary (the first message index not masked yet) is kept in
    ``session.state["veil_compaction"]["maskedBefore"]`` as an index into the session's
    history, so a resumed session masks what it masked before; without ``first_index`` (the
    messages are not the session's history) each call starts from nothing."""
    from veil_compaction.masking import mask_in_blocks

    settings = session.config.settings.compaction
    layer_on = bool(getattr(session.veil, "context_layer_on", False))
    state = session.state.setdefault(STATE_KEY, {}) if first_index is not None else {}
    before = max(0, int(state.get("maskedBefore", 0)) - (first_index or 0))
    masked, boundary = mask_in_blocks(
        messages,
        settings.masking_turns(layer_on),
        settings.masking_block(layer_on),
        before,
    )
    positions = [
        k for k, (new, old) in enumerate(zip(masked, messages, strict=True)) if new is not old
    ]
    messages[:] = masked
    if first_index is not None:
        state["maskedBefore"] = max(int(state.get("maskedBefore", 0)), first_index + boundary)
    return positions


@hookimpl
def plan_compaction(
    session: PluginSession, messages: list[Message], kind: str, prompt_tokens: int | None
) -> CompactionPlan | None:
    """Seed 000's rules for when and what a compaction folds (:func:`veil_compaction.planning.plan`)."""
    from veil_compaction import planning

    return planning.plan(session, messages, kind, prompt_tokens)


@hookimpl
def summarise(
    session: PluginSession,
    messages: list[Message],
    previous: str | None,
    instructions: list[str],
    mode: str,
) -> Summary:
    """The summary of the folded ``messages`` (:func:`veil_compaction.summary.summarise`)."""
    from veil_compaction import summary

    return summary.summarise(session, messages, previous, instructions, mode)


@hookimpl
def after_iteration(session: PluginSession, iteration: int) -> None:
    """Check ``autoThreshold`` between tool batches."""
    from veil_compaction import auto

    auto.check(session)


@hookimpl
def turn_end(session: PluginSession, final_message: Any) -> None:
    """Check ``autoThreshold`` after the final answer (no ``after_iteration`` follows it)."""
    from veil_compaction import auto

    auto.check(session)


@hookimpl
def register_slash_commands(veil: Any) -> list[SlashCommand]:
    """``/compact [instructions]``."""
    from veil_compaction import commands

    return commands.slash_commands()


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil compact``."""
    from veil_compaction import commands

    commands.add_cli_commands(cli)


@hookimpl
def register_settings() -> dict[str, Any]:
    """Observation masking's fields of ``compaction`` (:class:`~veil_compaction.settings.MaskingSettings`)."""
    from veil_compaction.settings import MaskingSettings

    return {"compaction": MaskingSettings}
