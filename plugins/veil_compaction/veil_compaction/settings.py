"""The fields veil_compaction adds to the ``compaction`` section of settings.json (registered
with ``register_settings``, :mod:`veil.core.plugin_settings`): observation masking.

The core declares the other ``compaction`` fields (``threshold``, ``keepRecentTurns``,
``maxConsecutiveFailures``: :class:`veil.core.settings.CompactionSettings`; this plugin's planner
reads the first two); the validated ``config.settings.compaction`` holds both.
"""

from __future__ import annotations

from pydantic import Field

from veil import SettingsSection

SEED_MASKING_TURNS = 10
"""``observationMaskingTurns`` when it is not set and the context layer is off (seed 000)."""
CONTEXT_LAYER_MASKING_TURNS = 0
"""``observationMaskingTurns`` when it is not set and the context layer is on: 0, masking off,
so eviction alone decides what leaves the prompt. Replay (bench/RESULTS.md, issue 18; 20 of the
84 mini-swe-agent files, every folder): at the same low-water mark, masking in blocks of 10 on
top of eviction missed 118 references against 75 without it (the masking baseline: 98) for the
same effective tokens (0.834 vs 0.805 of full history's). Without the context layer an unset
value is seed 000's 10."""
CONTEXT_LAYER_MASKING_BLOCK = 10
"""``observationMaskingBlock`` when it is not set and the context layer is on: chosen by
replaying the recorded sessions (bench/RESULTS.md, issue 18). Without the context layer an
unset block is 1, seed 000's rule."""


class MaskingSettings(SettingsSection):
    """Observation masking (seed 000): tool results older than ``observationMaskingTurns``
    (10; 0 = off) steps are masked.

    ``observation_masking_block`` (G, issue 18): masking waits until G results are due and then
    masks them all, so the prompt's prefix changes once per G results instead of at every step
    (provider prompt caches and llama.cpp's KV cache are reused in between). 1 is seed 000's
    rule.

    Unset values (None) resolve by whether the context layer is on: without it, seed 000's
    defaults (masking 10 turns, block 1); with it, the values chosen by replay
    (:data:`CONTEXT_LAYER_MASKING_TURNS`, :data:`CONTEXT_LAYER_MASKING_BLOCK`). Read them with
    :meth:`masking_turns` and :meth:`masking_block`."""

    observation_masking_turns: int | None = Field(default=None, ge=0)
    observation_masking_block: int | None = Field(default=None, ge=1)

    def masking_turns(self, context_layer_on: bool) -> int:
        """``observationMaskingTurns`` in effect (0: masking off)."""
        if self.observation_masking_turns is not None:
            return self.observation_masking_turns
        return CONTEXT_LAYER_MASKING_TURNS if context_layer_on else SEED_MASKING_TURNS

    def masking_block(self, context_layer_on: bool) -> int:
        """G in effect: the configured block, else 1 (seed 000) without the context layer and
        :data:`CONTEXT_LAYER_MASKING_BLOCK` with it."""
        if self.observation_masking_block is not None:
            return self.observation_masking_block
        return CONTEXT_LAYER_MASKING_BLOCK if context_layer_on else 1
