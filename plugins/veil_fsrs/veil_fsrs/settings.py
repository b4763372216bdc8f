"""The fields veil_fsrs adds to the ``context`` section of settings.json (registered with
``register_settings``, :mod:`veil.core.plugin_settings`): the scorer's weights and modifiers,
FSRS decay and caps, and the eviction policy's controller, turn weights and protected window.

The core owns the ``context`` fields it reads itself (``budgetTokens``, ``initialStability``,
``pageIn``, ``elideRepeats``, ``rescueEmbeddings``: :class:`veil.core.settings.ContextSettings`);
the validated ``config.settings.context`` holds both. Both plugins of this distribution
(``veil_fsrs``, the scorer, and ``veil_fsrs_evict``, the eviction policy) read these fields; the
scorer's module registers them, and it is asked even when blocked, so blocking the scorer keeps
the eviction policy's settings.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from veil import SettingsSection


class ScoreWeights(SettingsSection):
    """Weights of the five signals (DESIGN.md reference defaults; they sum to 1)."""

    recency: float = Field(default=0.25, ge=0)
    frequency: float = Field(default=0.15, ge=0)
    relevance: float = Field(default=0.30, ge=0)
    structure: float = Field(default=0.15, ge=0)
    cognitive: float = Field(default=0.15, ge=0)


class ControllerSettings(SettingsSection):
    """Pressure-threshold controller: start 1.0 within [0.98, 1.0], step 0.01; down on >= 3
    evictions within 60 s; up after 300 s without eviction or when an evicted item is asked for
    again within 1,800 s.

    The low-water mark (issue 18): a pass that starts because the prompt passed ``threshold`` x
    the budget frees room down to ``low_water`` x the budget, so the next steps only append and
    the prompt's prefix (what provider prompt caches and llama.cpp's KV cache reuse) stays put
    until the next pass. By default the mark is fixed at 0.7 (``low_water``, ``low_water_min``
    and ``low_water_max`` all 0.7). Widening [``low_water_min``, ``low_water_max``] lets it move
    by ``low_water_step`` (0.05) on the same signals as the threshold: up on a calm period and
    when an evicted item is asked for again (it freed too much); and with ``cache_price`` (what
    the provider bills cached input, 0.1 of the uncached price; None: off) a pass caps it where
    the session would cost more per step than sending its whole history
    (``veil_fsrs.controller.cache_cap``). It never exceeds the threshold in effect.
    ``cache_allowance`` (1) scales what the cap lets a step cost against the whole history's.

    Why fixed at 0.7 (issue 29, bench/RESULTS.md; the 79 of the 84 mini-swe-agent recordings
    with steps, effective tokens at a cache price of 0.1 / identifier misses / line misses): the
    adaptive mark of the earlier default (0.9 capped within [0.6, 0.9]) kept the prompt full and
    re-sent it uncached at every pass; at budget 8,000 it cost 0.653x full history's with
    869 / 1,053 misses, the fixed 0.7 costs 0.581x with 926 / 1,112. On ten of the files (subset
    0) across budgets, a fixed 0.6 gave the lowest curve (0.445 / 329 lines at 4,000, 0.562 / 137
    at 6,000, 0.664 / 61 at 8,000), 0.7 next (0.494 / 251, 0.633 / 102), the adaptive mark last
    (0.537 / 233, 0.679 / 90, 0.770 / 46), and 0.5 worse than 0.6 (0.430 / 419 at 4,000); 0.7 keeps
    budget 8,000 under masking in blocks' misses (1,056 / 1,430), which 0.6 would not on that
    subset's ratios (+34%).

    The threshold: DESIGN.md's reference defaults are 0.7 within [0.6, 0.85]; replaying
    the recorded sessions (bench/RESULTS.md) showed that misses follow how full the prompt is
    kept (at an 8k budget, each 5% of the budget left empty costs ~10% more misses; [0.95, 1.0]
    in steps of 0.05 gave 462 misses, [0.98, 1.0] in steps of 0.01 433), so veil evicts at the
    budget and lowers the threshold a little when evictions come in bursts. Eviction stays
    under the full-compaction trigger either way (:func:`veil.core.prompt.context.build_prompt`).
    """

    threshold: float = Field(default=1.0, gt=0, le=1)
    min: float = Field(default=0.98, gt=0, le=1)
    max: float = Field(default=1.0, gt=0, le=1)
    step: float = Field(default=0.01, gt=0, le=0.5)
    burst_count: int = Field(default=3, ge=1)
    burst_window: float = Field(default=60.0, gt=0)
    calm_period: float = Field(default=300.0, gt=0)
    rerequest_window: float = Field(default=1800.0, gt=0)
    low_water: float = Field(default=0.7, gt=0, le=1)
    low_water_min: float = Field(default=0.7, gt=0, le=1)
    low_water_max: float = Field(default=0.7, gt=0, le=1)
    low_water_step: float = Field(default=0.05, gt=0, le=0.5)
    cache_price: float | None = Field(default=0.1, ge=0, le=1)
    cache_allowance: float = Field(default=1.0, gt=0, le=10)

    @model_validator(mode="after")
    def _ordered(self) -> ControllerSettings:
        if not self.min <= self.threshold <= self.max:
            raise ValueError(
                f"need min <= threshold <= max, got min {self.min}, threshold {self.threshold}, "
                f"max {self.max} (defaults: 0.98, 1.0, 1.0; set min and max with threshold)"
            )
        if not self.low_water_min <= self.low_water <= self.low_water_max:
            raise ValueError(
                f"need lowWaterMin <= lowWater <= lowWaterMax, got {self.low_water_min}, "
                f"{self.low_water}, {self.low_water_max} (defaults: 0.7, 0.7, 0.7)"
            )
        return self


class TurnWeights(SettingsSection):
    """Eviction weight per turn kind (DESIGN.md); 0 = never an eviction candidate."""

    intent: float = Field(default=0.0, ge=0)
    correction: float = Field(default=0.0, ge=0)
    decision: float = Field(default=0.1, ge=0)
    action: float = Field(default=0.6, ge=0)
    status: float = Field(default=0.7, ge=0)
    exploration: float = Field(default=0.8, ge=0)


TARGET_TOKENS = 8_000
"""The prompt size a pass aims at when no budget is set and the model's window is larger: the
default budget's size. With a 128,000-token window and no budget, the 79 recorded sessions with
steps cost 0.587x full history's effective tokens (cached input at 0.1x) with 880 identifier and
1,054 line misses under the fixed low-water mark of 0.7 (issue 29's target: at most 0.8x; it
was 0.660x with 811 / 975 under the earlier adaptive mark). A larger target would miss less for
more cost; bench/RESULTS.md, issue 29, has the frontier to choose from."""


class FsrsContextSettings(SettingsSection):
    """The ``context`` fields of veil_fsrs (seed 002; DESIGN.md reference defaults).

    ``decay`` is FSRS-6's w20 (0.1542).
    ``protected_turns``: the last N turns are never picked by stages 1-3 (DESIGN.md: 12);
    ``protected_results``: the same for tool results of steps after ``current - N`` (2: the
    newest step's results; replay tuning, bench/RESULTS.md: protecting more left less room
    for the results that bring new names).
    ``coverage``: stages 2-3 keep the groups that bring the most new identifiers per token
    (:mod:`veil_fsrs.coverage`) instead of ranking by eviction score alone.
    ``mention_power``: in that choice a new identifier counts ``m ** mention_power``, where
    ``m`` is how many of the session's items mention it (its messages, tool results and
    memory items): the names a session keeps coming back to are the ones its next action
    uses. 0 counts every new identifier once (replay tuning, bench/RESULTS.md: 2).
    ``stale_recency``: eviction stage 1 takes single-use items whose retrievability fell below
    it (0.9 = older than their own stability). ``pointer_tokens``: what the stub left for an
    evicted item costs, in tokens (7-9 for veil's warm stubs), so eviction counts what it frees.
    ``rescue_cosine``: how similar (cosine of turn embeddings) an old turn must be to the
    current request for the rescue to keep it.

    Levels (issue 29, :mod:`veil_fsrs.levels`): with ``levels`` on (the default) a pass chooses
    for each item whole, an *excerpt* (the lines whose names the agent is likely to use next,
    verbatim) or a pointer stub; off, the stages of :mod:`veil_fsrs.eviction` move whole items.
    ``excerpt_whole_share``: an excerpt costing at least this share of its item is shown whole.
    ``shallow_reach``: a pass first tries to change only the newest items whose size is this
    many times what it must free (0: every pass chooses every level again).
    ``retention_weight``: how much the scorer's retention weighs a line's value (0: the names
    alone). ``superseded``: an older copy of a file or an older run of a command that a later
    tool result supersedes (:mod:`veil_fsrs.superseded`) leaves first and keeps at most the
    lines that differ (off: only the names' ownership does it). ``target_tokens``: the
    prompt size a pass aims at when no budget is set and the model's window is larger
    (:data:`TARGET_TOKENS`; None: the window; the window stays the hard limit).
    """

    weights: ScoreWeights = Field(default_factory=ScoreWeights)
    pinned_boost: float = Field(default=0.5, ge=0)
    procedural_factor: float = Field(default=1.2, ge=0)
    by_hand_factor: float = Field(default=1.5, ge=0)
    decay: float = Field(default=0.1542, gt=0, le=1)
    live_cap_days: float = Field(default=7.0, gt=0)
    durable_cap_days: float = Field(default=365.0, gt=0)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    turn_weights: TurnWeights = Field(default_factory=TurnWeights)
    protected_turns: int = Field(default=12, ge=0)
    protected_results: int = Field(default=2, ge=0)
    coverage: bool = True
    mention_power: float = Field(default=2.0, ge=0, le=8, allow_inf_nan=False)
    rescue_cosine: float = Field(default=0.7, ge=0, le=1)
    stale_recency: float = Field(default=0.9, gt=0, le=1)
    pointer_tokens: int = Field(default=9, ge=0)
    levels: bool = True
    excerpt_whole_share: float = Field(default=0.6, gt=0, le=1, allow_inf_nan=False)
    shallow_reach: float = Field(default=0.0, ge=0, le=100, allow_inf_nan=False)
    retention_weight: float = Field(default=0.25, ge=0, le=2, allow_inf_nan=False)
    superseded: bool = True
    target_tokens: int | None = Field(default=TARGET_TOKENS, gt=0)


DESIGN_REFERENCE_CONTEXT: dict[str, Any] = {
    "controller": {"threshold": 0.7, "min": 0.6, "max": 0.85, "step": 0.05},
    "protectedResults": 12,
}
"""``context`` settings where DESIGN.md's reference defaults differ from veil's own (veil's were
retuned with ``veil replay``; see :class:`ControllerSettings` and bench/RESULTS.md)."""


def design_reference_context(extra: dict[str, Any] | None = None) -> FsrsContextSettings:
    """:class:`FsrsContextSettings` with DESIGN.md's reference values
    (:data:`DESIGN_REFERENCE_CONTEXT`), then ``extra`` (camelCase keys; a dict value is merged
    into the reference one).

    Raises:
        pydantic.ValidationError: a value out of range or a key veil_fsrs does not have.
    """
    base: dict[str, Any] = {
        k: dict(v) if isinstance(v, dict) else v for k, v in DESIGN_REFERENCE_CONTEXT.items()
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return FsrsContextSettings.model_validate(base)
