"""Configuration: ``.veil/settings.json``, ``.veil/agents/<name>/agent.json``, ``auth.json`` and
``VEIL_*`` environment variables, validated with pydantic / pydantic-settings.

Field names and defaults follow seed 000 (``memory``, ``compaction``, ``models``, ``providers``,
``routing``, ``defaultCompaction``) and DESIGN.md's reference defaults (``context``,
``convergence``). JSON keys are the seed's camelCase names; Python attributes are snake_case.

Each file is validated on its own so that an error names the file and the field, e.g.
``.veil/settings.json: compaction.threshold: Input should be less than or equal to 1``.
Environment variables override settings.json: ``VEIL_COMPACTION__THRESHOLD=0.9`` (nested fields
joined by ``__``, snake_case names). ``auth.json`` is read from ``~/.veil/auth.json`` (or
``$VEIL_HOME/auth.json``) and then ``.veil/auth.json``; what the project's files may change is
decided by :mod:`veil.core.trust` (a key only ever goes to the endpoint named beside it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from veil.core.errors import ConfigError, UnsafePath
from veil.core.paths import veil_file
from veil.core.trust import (
    check_project_options,
    check_project_provider_consent,
    env_setting_paths,
    leaf_paths,
    merge_auth_layers,
    pop_project_provider_consent,
    providers_in_use,
    refuse_project_consent,
)

DEFAULT_AGENT = "default"
MIN_HTTP_TOKEN_CHARS = 16
"""Shortest bearer token ``veil serve`` accepts (16 characters of ``secrets.token_urlsafe`` carry
96 bits; a short token can be guessed by whoever reaches the port)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names of this machine's loopback interface."""
AGENT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


class _Model(BaseModel):
    """Base for every config section: camelCase JSON keys, snake_case attributes, no unknown keys."""

    model_config = ConfigDict(alias_generator=_camel, populate_by_name=True, extra="forbid")


class ModelRole(_Model):
    """One model role (``models.main`` / ``models.compact``, seed 000).

    ``model`` is the provider's model name (``anthropic/claude-4-6-sonnet``); ``context_window``
    (tokens) overrides what litellm knows; ``options`` are passed to the completion call
    (``temperature``, ``max_tokens``...).
    """

    model: str = Field(min_length=1)
    context_window: int | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)


class Models(_Model):
    """Model roles: ``main`` answers the user; ``compact`` summarises (falls back to ``main``)."""

    main: ModelRole | None = None
    compact: ModelRole | None = None


class Provider(_Model):
    """A provider in auth.json (seed 000): ``type`` is a litellm provider name (``openai``,
    ``anthropic``, ``ollama``, ``openrouter``...), ``base_url`` its endpoint, ``api_key`` its key
    (never printed: it is a :class:`~pydantic.SecretStr`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        from veil.core.providers import KNOWN_PROVIDER_TYPES

        if value not in KNOWN_PROVIDER_TYPES:
            raise ValueError(
                f"unknown provider type {value!r}; use a litellm provider such as "
                "openai, anthropic, ollama, openrouter, gemini, mistral, groq"
            )
        return value

    @field_validator("api_key")
    @classmethod
    def _key_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty key would make litellm fall back to a key from the environment.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is empty; leave the field out to use the provider's own variable")
        return value


class Routing(_Model):
    """Which provider answers (``default``) and which are tried next, in order (``fallback``)."""

    default: str | None = None
    fallback: list[str] = Field(default_factory=list)


MAX_ENTRY_BYTES = 16 * 1024
"""Default ``memory.maxEntryBytes``: 16 KiB of UTF-8, about 4,000 tokens, far more than a
focused fact ("Project uses port 5051.") and small enough that one write cannot flood a file."""
MAX_FILE_BYTES = 256 * 1024
"""Default ``memory.maxFileBytes``: 256 KiB per MEMORY.md, roughly what ``maxLines`` 500 allows
with lines of 500 characters; the injected section is capped separately (``injectionShare``)."""


class MemorySettings(_Model):
    """``memory`` (seed 000 "Configuring memory"): ``enabled`` true, ``maxLines`` 500.

    ``instruction_files``: project files read (never written) into the memory section, so users
    of other agents keep their context. ``injection_share``: the cap of the injected section, as a
    share of the model's context window (default 10%). ``max_entry_bytes``: UTF-8 bytes of one
    written entry (16 KiB; a larger write is refused, nothing written). ``max_file_bytes``: bytes
    of a MEMORY.md after a write (256 KiB); like ``maxLines``, crossing it moves the oldest
    whole entries to ``archive-YYYY-MM.md``.
    """

    enabled: bool = True
    max_lines: int = Field(default=500, ge=1)
    max_entry_bytes: int = Field(default=MAX_ENTRY_BYTES, ge=1)
    max_file_bytes: int = Field(default=MAX_FILE_BYTES, ge=1)
    instruction_files: list[str] = Field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])
    injection_share: float = Field(default=0.10, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _entry_fits_a_file(self) -> MemorySettings:
        if self.max_entry_bytes > self.max_file_bytes:
            raise ValueError(
                f"maxEntryBytes ({self.max_entry_bytes}) must not exceed maxFileBytes "
                f"({self.max_file_bytes}): an entry that large could never be written"
            )
        return self


class AgentMemory(_Model):
    """``memory`` in agent.json: overrides settings.json for that agent (None = inherit)."""

    enabled: bool | None = None
    max_lines: int | None = Field(default=None, ge=1)
    max_entry_bytes: int | None = Field(default=None, ge=1)
    max_file_bytes: int | None = Field(default=None, ge=1)


SEED_COMPACTION_THRESHOLD = 0.85
SEED_MASKING_TURNS = 10
CONTEXT_LAYER_COMPACTION_THRESHOLD = 1.0
"""``compaction.threshold`` when it is not set and the context layer is on (a scorer and an
eviction policy loaded): eviction keeps the prompt under it, so it is also the share of the
window eviction fills (less the tool schemas and the completion reserve); full compaction is
the fallback when eviction cannot keep the prompt in the window. Replay (bench/RESULTS.md,
issue 18; 22 of the 84 mini-swe-agent files, masking off, the low-water mark's cache cap):
1.0 gave 0.828 x full history's effective tokens and 378 misses, 0.85 gave 0.747 and 514 (the
masking baseline: 1.72 and 319): long sessions need the whole budget to hold their references.
Without the context layer an unset threshold is seed 000's 0.85."""
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


class CompactionSettings(_Model):
    """``compaction`` (seed 000): ``threshold`` 0.85 in [0.1, 1.0] x the context window triggers
    full compaction; tool results older than ``observationMaskingTurns`` (10; 0 = off) steps are
    masked.

    ``observation_masking_block`` (G, issue 18): masking waits until G results are due and then
    masks them all, so the prompt's prefix changes once per G results instead of at every step
    (provider prompt caches and llama.cpp's KV cache are reused in between). 1 is seed 000's
    rule.

    Unset values (None) resolve by whether the context layer is on: without it, seed 000's
    defaults hold exactly (threshold 0.85, masking 10 turns, block 1); with it, the values
    chosen by replay (:data:`CONTEXT_LAYER_COMPACTION_THRESHOLD`,
    :data:`CONTEXT_LAYER_MASKING_TURNS`, :data:`CONTEXT_LAYER_MASKING_BLOCK`). Read them with
    :meth:`trigger`, :meth:`masking_turns` and :meth:`masking_block`."""

    threshold: float | None = Field(default=None, ge=0.1, le=1.0)
    observation_masking_turns: int | None = Field(default=None, ge=0)
    observation_masking_block: int | None = Field(default=None, ge=1)
    keep_recent_turns: int = Field(default=4, ge=1)
    max_consecutive_failures: int = Field(default=3, ge=1)
    """``maxConsecutiveFailures`` (issue 19): automatic compaction (full, and defaultCompaction's
    ``autoThreshold``) stops for the session, with a warning, after this many compactions in a
    row failed or were rejected (a summary that does not shrink the prompt, an empty one, a
    model error); a manual ``/compact`` is never blocked and, when it succeeds, starts it again.
    3 is the circuit breaker Claude Code's auto-compaction added in v2.1.76 ("stops after 3
    attempts", anthropics/claude-code issue 34278): one failure may be a passing provider
    error, a second a coincidence; a third means every further try only spends the
    summariser's tokens (the small-window loop of issue 19 compacted 17 times in one turn)."""

    def trigger(self, context_layer_on: bool) -> float:
        """The full-compaction threshold in effect, a share of the context window."""
        if self.threshold is not None:
            return self.threshold
        return CONTEXT_LAYER_COMPACTION_THRESHOLD if context_layer_on else SEED_COMPACTION_THRESHOLD

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


class DefaultCompaction(_Model):
    """``defaultCompaction`` in agent.json (seed 000): snapshotted into each session at creation."""

    enabled: bool = True
    compaction_count: int = Field(default=50, ge=1, le=99)
    auto_threshold: int | None = Field(default=None, ge=1, le=99)
    model: str = "default"
    custom_instructions: str | None = None


class PluginSettings(_Model):
    """``plugins``: names to block (``disable``) or, when ``load`` is set, the only ones loaded."""

    disable: list[str] = Field(default_factory=list)
    load: list[str] | None = None


class LoopSettings(_Model):
    """``loop``: the agent loop's limits.

    ``max_iterations``: model calls per user message (25). ``bash_timeout``: seconds (120).
    ``tool_output_chars``: cap of one tool result sent to the model, in characters (30,000).
    ``read_lines``: lines the read tool returns when no range is given (2,000).
    ``completion_reserve``: tokens of the window kept free for the reply (1,024).
    """

    max_iterations: int = Field(default=25, ge=1, le=1000)
    bash_timeout: float = Field(default=120.0, gt=0)
    tool_output_chars: int = Field(default=30_000, ge=200)
    read_lines: int = Field(default=2000, ge=1)
    completion_reserve: int = Field(default=1024, ge=0)
    system_prompt: str | None = None


class ScoreWeights(_Model):
    """Weights of the five signals (DESIGN.md reference defaults; they sum to 1)."""

    recency: float = Field(default=0.25, ge=0)
    frequency: float = Field(default=0.15, ge=0)
    relevance: float = Field(default=0.30, ge=0)
    structure: float = Field(default=0.15, ge=0)
    cognitive: float = Field(default=0.15, ge=0)


class InitialStability(_Model):
    """Initial FSRS stability per item kind, in days (DESIGN.md reference defaults)."""

    episodic: float = Field(default=0.02, gt=0)
    fact: float = Field(default=0.083, gt=0)
    procedural: float = Field(default=0.25, gt=0)
    decision: float = Field(default=0.5, gt=0)


class ControllerSettings(_Model):
    """Pressure-threshold controller: start 1.0 within [0.98, 1.0], step 0.01; down on >= 3
    evictions within 60 s; up after 300 s without eviction or when an evicted item is asked for
    again within 1,800 s.

    The low-water mark (issue 18): a pass that starts because the prompt passed ``threshold`` x
    the budget frees room down to ``low_water`` x the budget, so the next steps only append and
    the prompt's prefix (what provider prompt caches and llama.cpp's KV cache reuse) stays put
    until the next pass. ``low_water`` (0.6) moves by ``low_water_step`` (0.05) within
    [``low_water_min``, ``low_water_max``] ([0.6, 0.9]) on the same signals as the threshold:
    down on a burst of passes (each pass re-sends the whole prompt uncached, so passes that come
    often should free more), up on a calm period and when an evicted item is asked for again
    (it freed too much). It never exceeds the threshold in effect. With ``cache_price`` (what
    the provider bills cached input, 0.1 of the uncached price; None: off) a pass also caps the
    mark where the session would cost more per step than sending its whole history
    (``veil_fsrs.controller.cache_cap``): a session just over the budget frees more per pass, a
    long one keeps more. Defaults chosen by replay
    (bench/RESULTS.md, issue 18; 20 of the 84 mini-swe-agent files, masking off, effective
    tokens at a cache price of 0.1 / misses): 0.9 gave 1.218 x full history's / 54, 0.75
    1.011 / 55, 0.6 0.805 / 75, 0.5 (down to 0.4) 0.717 / 131; the masking baseline 1.863 / 98. DESIGN.md's reference defaults are 0.7 within [0.6, 0.85]; replaying
    the recorded sessions (bench/RESULTS.md) showed that misses follow how full the prompt is
    kept (at an 8k budget, each 5% of the budget left empty costs ~10% more misses; [0.95, 1.0]
    in steps of 0.05 gave 462 misses, [0.98, 1.0] in steps of 0.01 433), so veil evicts at the
    budget and lowers the threshold a little when evictions come in bursts. Eviction stays
    under the full-compaction trigger either way (:func:`veil.core.context.build_prompt`).
    """

    threshold: float = Field(default=1.0, gt=0, le=1)
    min: float = Field(default=0.98, gt=0, le=1)
    max: float = Field(default=1.0, gt=0, le=1)
    step: float = Field(default=0.01, gt=0, le=0.5)
    burst_count: int = Field(default=3, ge=1)
    burst_window: float = Field(default=60.0, gt=0)
    calm_period: float = Field(default=300.0, gt=0)
    rerequest_window: float = Field(default=1800.0, gt=0)
    low_water: float = Field(default=0.9, gt=0, le=1)
    low_water_min: float = Field(default=0.6, gt=0, le=1)
    low_water_max: float = Field(default=0.9, gt=0, le=1)
    low_water_step: float = Field(default=0.05, gt=0, le=0.5)
    cache_price: float | None = Field(default=0.1, ge=0, le=1)

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
                f"{self.low_water}, {self.low_water_max} (defaults: 0.6, 0.9, 0.9)"
            )
        return self


class TurnWeights(_Model):
    """Eviction weight per turn kind (DESIGN.md); 0 = never an eviction candidate."""

    intent: float = Field(default=0.0, ge=0)
    correction: float = Field(default=0.0, ge=0)
    decision: float = Field(default=0.1, ge=0)
    action: float = Field(default=0.6, ge=0)
    status: float = Field(default=0.7, ge=0)
    exploration: float = Field(default=0.8, ge=0)


class ContextSettings(_Model):
    """``context``: scoring and eviction (seed 002; DESIGN.md reference defaults).

    ``budget_tokens``: tokens the kept messages may take (None: the model's window minus the
    completion reserve and the system prompt). ``decay`` is FSRS-6's w20 (0.1542).
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
    ``elide_repeats``: over budget, first replace runs of lines that a newer message repeats
    by a marker (lossless; :mod:`veil.core.elision`).
    ``rescue_embeddings``: how turns get the embeddings the rescue of old turns compares
    (``background`` on a worker thread, ``sync`` at capture, ``off``; see
    :mod:`veil_fsrs.turn_embeddings`).
    ``stale_recency``: eviction stage 1 takes single-use items whose retrievability fell below
    it (0.9 = older than their own stability). ``pointer_tokens``: what the stub left for an
    evicted item costs, in tokens (7-9 for veil's warm stubs), so eviction counts what it frees.
    ``page_in``: an eviction pass may bring back items it evicted earlier when they now add more
    names than what they would replace (veil_fsrs' re-selection; ``EvictionPlan.to_live``).
    """

    weights: ScoreWeights = Field(default_factory=ScoreWeights)
    pinned_boost: float = Field(default=0.5, ge=0)
    procedural_factor: float = Field(default=1.2, ge=0)
    by_hand_factor: float = Field(default=1.5, ge=0)
    decay: float = Field(default=0.1542, gt=0, le=1)
    initial_stability: InitialStability = Field(default_factory=InitialStability)
    live_cap_days: float = Field(default=7.0, gt=0)
    durable_cap_days: float = Field(default=365.0, gt=0)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    turn_weights: TurnWeights = Field(default_factory=TurnWeights)
    protected_turns: int = Field(default=12, ge=0)
    protected_results: int = Field(default=2, ge=0)
    coverage: bool = True
    mention_power: float = Field(default=2.0, ge=0, le=8, allow_inf_nan=False)
    page_in: bool = True
    rescue_cosine: float = Field(default=0.7, ge=0, le=1)
    stale_recency: float = Field(default=0.9, gt=0, le=1)
    pointer_tokens: int = Field(default=9, ge=0)
    rescue_embeddings: Literal["background", "sync", "off"] = "background"
    elide_repeats: bool = True
    budget_tokens: int | None = Field(default=None, gt=0)


DESIGN_REFERENCE_CONTEXT: dict[str, Any] = {
    "controller": {"threshold": 0.7, "min": 0.6, "max": 0.85, "step": 0.05},
    "protectedResults": 12,
}
"""``context`` settings where DESIGN.md's reference defaults differ from veil's own (veil's were
retuned with ``veil replay``; see :class:`ControllerSettings` and bench/RESULTS.md)."""


def design_reference_context(extra: dict[str, Any] | None = None) -> ContextSettings:
    """:class:`ContextSettings` with DESIGN.md's reference values
    (:data:`DESIGN_REFERENCE_CONTEXT`), then ``extra`` (camelCase keys; a dict value is merged
    into the reference one)."""
    base: dict[str, Any] = {
        k: dict(v) if isinstance(v, dict) else v for k, v in DESIGN_REFERENCE_CONTEXT.items()
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return ContextSettings.model_validate(base)


class ConvergenceSettings(_Model):
    """``convergence`` thresholds (DESIGN.md): soft warning when one fingerprint repeats 3 times,
    stronger at 5 consecutive failures, halt at 15 attempts without progress."""

    soft_repeats: int = Field(default=3, ge=1)
    strong_failures: int = Field(default=5, ge=1)
    halt_without_progress: int = Field(default=15, ge=1)


class HttpSettings(_Model):
    """``http``: ``veil serve`` binds ``host``:``port`` (127.0.0.1:5051); any other address needs
    ``token`` (or ``VEIL_HTTP_TOKEN``), at least :data:`MIN_HTTP_TOKEN_CHARS` characters; bodies
    over ``max_body_bytes`` (1 MiB) get 413."""

    host: str = "127.0.0.1"
    port: int = Field(default=5051, ge=1, le=65535)
    token: SecretStr | None = None
    max_body_bytes: int = Field(default=1_048_576, ge=1)

    @field_validator("token")
    @classmethod
    def _token_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_http_token(value.get_secret_value())
        return value


def check_http_token(token: str) -> str:
    """Return ``token`` if it is long enough to guard ``veil serve``.

    Raises:
        ValueError: shorter than :data:`MIN_HTTP_TOKEN_CHARS` characters (message says how to
            make one).
    """
    if len(token) < MIN_HTTP_TOKEN_CHARS:
        raise ValueError(
            f"must be at least {MIN_HTTP_TOKEN_CHARS} characters, got {len(token)} (a short "
            "token can be guessed); make one with: python -c "
            "'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or URL host, ``[::1]`` brackets allowed) is this
    machine's loopback interface: ``127.0.0.1``, ``localhost`` or ``::1``."""
    return host.strip("[]").lower() in LOOPBACK_HOSTS


class SecuritySettings(_Model):
    """``security``: ``redact_secrets`` (true) replaces credentials with ``[redacted:NAME]``
    before anything is stored, captured or sent back (:mod:`veil.core.redaction`). Only the
    user may turn it off (``VEIL_SECURITY__REDACT_SECRETS=false``): a project's settings.json
    that says ``false`` is refused, since a cloned repository could ship one."""

    redact_secrets: bool = True


class PermissionSettings(_Model):
    """``permissions``: which tool calls run, which are refused, which ask first
    (:mod:`veil.core.permissions` has the rules and their order).

    ``mode``: ``ask`` (default: ``bash``, ``write``, ``edit`` and plugin tools ask; reads never
    do), ``acceptEdits`` (file edits inside the project run, except under ``.git/`` and
    ``.veil/``; the rest asks), ``allow`` (every
    call runs; ``--yes``) or ``deny`` (whatever would ask is refused: unattended runs that may
    only do what ``allow`` lists). ``allow`` / ``deny``: rules ``tool`` or ``tool(pattern)``
    (``bash(pytest*)``, ``bash(npm run test:*)``, ``edit(src/*)``, ``read(.env*)``); a deny rule
    wins over everything. A project's settings.json may add deny rules and narrow the mode, but
    neither allow rules nor a wider mode (:func:`veil.core.permissions.merge_permission_layers`).
    """

    mode: Literal["ask", "acceptEdits", "allow", "deny"] = "ask"
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _rules_parse(cls, value: list[str]) -> list[str]:
        from veil.core.permissions import check_rules

        return check_rules(value)


class EmbeddingSettings(_Model):
    """``embeddings``: ``local`` (all-MiniLM-L6-v2 in-process) or ``ollama`` on 127.0.0.1.

    ``ollama_url`` must be an http(s) URL on the loopback interface whichever file or variable
    sets it: what is embedded is the project's content, and veil sends none of it off the machine
    (checked when settings load, so a project file cannot redirect it).
    """

    provider: Literal["local", "ollama"] = "local"
    ollama_model: str = "nomic-embed-text"
    ollama_url: str = "http://127.0.0.1:11434"

    @field_validator("ollama_url")
    @classmethod
    def _loopback_url(cls, value: str) -> str:
        from urllib.parse import urlparse

        try:
            parsed = urlparse(value)
            host = parsed.hostname or ""
        except ValueError:
            host, parsed = "", None
        if parsed is None or parsed.scheme not in ("http", "https") or not is_loopback(host):
            raise ValueError(
                f"{value!r} must be an http URL on 127.0.0.1, localhost or [::1] (the texts "
                "embedded are the project's content; veil sends nothing off this machine)"
            )
        return value


class Settings(BaseSettings):
    """Everything in ``.veil/settings.json`` (all sections optional), with ``VEIL_*`` overrides."""

    model_config = SettingsConfigDict(
        env_prefix="VEIL_",
        env_nested_delimiter="__",
        alias_generator=_camel,
        populate_by_name=True,
        extra="forbid",
        case_sensitive=False,
    )

    models: Models = Field(default_factory=Models)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    loop: LoopSettings = Field(default_factory=LoopSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    convergence: ConvergenceSettings = Field(default_factory=ConvergenceSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    default_agent: str = Field(
        default=DEFAULT_AGENT, validation_alias=AliasChoices("defaultAgent", "default_agent")
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment first: VEIL_* variables override what settings.json says.
        return (env_settings, init_settings)


# The same fields as a plain model: validating settings.json alone (no environment) lets an error
# name the file; pydantic-settings would otherwise mix VEIL_* variables into the same validation.
SettingsFile = create_model(
    "SettingsFile",
    __base__=_Model,
    **{name: (f.annotation, f) for name, f in Settings.model_fields.items()},
)


class AgentConfig(_Model):
    """``.veil/agents/<name>/agent.json``: the agent's model, prompt, memory and defaultCompaction."""

    model: str | None = None
    system_prompt: str | None = None
    memory: AgentMemory = Field(default_factory=AgentMemory)
    default_compaction: DefaultCompaction = Field(default_factory=DefaultCompaction)


class AuthConfig(_Model):
    """``auth.json`` (seed 000): providers with credentials, routing, optional model roles."""

    providers: dict[str, Provider] = Field(default_factory=dict)
    routing: Routing = Field(default_factory=Routing)
    models: Models = Field(default_factory=Models)

    @model_validator(mode="after")
    def _routing_names_known(self) -> AuthConfig:
        names = [self.routing.default] if self.routing.default else []
        for where, name in [("routing.default", n) for n in names] + [
            (f"routing.fallback.{i}", n) for i, n in enumerate(self.routing.fallback)
        ]:
            if name not in self.providers:
                known = ", ".join(sorted(self.providers)) or "none"
                raise ValueError(f"{where}: unknown provider {name!r} (providers: {known})")
        return self


def _format_errors(source: str, err: ValidationError, *, env: bool = False) -> str:
    parts = []
    for e in err.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")  # pydantic's wording for validator errors
        if env and loc:
            variable = "VEIL_" + "__".join(_snake(str(p)) for p in e["loc"]).upper()
            parts.append(f"{source}: {variable} ({loc}): {msg}")
        else:
            parts.append(f"{source}: {loc}: {msg}" if loc else f"{source}: {msg}")
    return "; ".join(parts)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def read_json_file(path: Path) -> dict[str, Any]:
    """Read a JSON object from ``path``; a missing file is ``{}``.

    Raises:
        ConfigError: the file is not UTF-8 JSON or not an object (message names the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    return data


def validate_agent_name(name: str) -> str:
    """Return ``name`` if it is a safe agent name (letters, digits, ``_ . -``; no ``..``).

    Raises:
        UnsafePath: the name could leave ``.veil/agents/`` or ``.veil/memory/agents/``.
    """
    if not isinstance(name, str) or not AGENT_NAME_RE.match(name) or ".." in name:
        raise UnsafePath(
            f"agent name {name!r} is not allowed: use letters, digits, '_', '.', '-' "
            "(no path separators, '..' or NUL)"
        )
    return name


def user_config_dir() -> Path:
    """``$VEIL_HOME`` or ``~/.veil``: where the user's ``auth.json`` lives."""
    return Path(os.environ.get("VEIL_HOME") or Path.home() / ".veil")


@dataclass
class Config:
    """All configuration of one project, loaded and validated.

    Attributes:
        project_dir: the project root (where ``.veil/`` lives).
        settings: the merged :class:`Settings` (settings.json + ``VEIL_*``).
        auth: the merged :class:`AuthConfig`.
        settings_file: path of settings.json (may not exist).
        project_providers: names of the providers whose entry comes from the project's
            ``.veil/auth.json`` (:func:`veil.core.trust.merge_auth_layers`); their requests get
            only project-safe options and never a key from the environment.
        settings_from_project: dotted snake_case paths (``http.host``) that settings.json sets
            and no ``VEIL_*`` variable overrides.
    """

    project_dir: Path
    settings: Settings
    auth: AuthConfig
    settings_file: Path
    project_providers: frozenset[str] = frozenset()
    settings_from_project: frozenset[str] = frozenset()
    _agents: dict[str, AgentConfig] = field(default_factory=dict, repr=False)
    _redactor: Any = field(default=None, repr=False, compare=False)

    def setting_from_project(self, path: str) -> bool:
        """Whether the value at ``path`` (``http.token``) comes from the project's settings.json
        rather than from a ``VEIL_*`` variable or the default."""
        return path in self.settings_from_project

    @property
    def veil_dir(self) -> Path:
        """``<project>/.veil``."""
        return self.project_dir / ".veil"

    @property
    def models(self) -> Models:
        """Model roles; settings.json wins over auth.json role by role."""
        return Models(
            main=self.settings.models.main or self.auth.models.main,
            compact=self.settings.models.compact or self.auth.models.compact,
        )

    @property
    def redactor(self) -> Any:
        """The project's :class:`veil.core.redaction.Redactor` (``security.redactSecrets``,
        the secrets of the auth files, settings and environment), built on first use."""
        if self._redactor is None:
            from veil.core.redaction import redactor_for

            self._redactor = redactor_for(self)
        return self._redactor

    def agent_file(self, name: str) -> Path:
        """Path of ``.veil/agents/<name>/agent.json`` (name validated, no symlink on the way).

        Raises:
            UnsafePath: a bad agent name. UnsafeVeilPath: a symbolic link under ``.veil/``.
        """
        return veil_file(self.project_dir, "agents", validate_agent_name(name), "agent.json")

    def agent(self, name: str) -> AgentConfig:
        """Load and validate an agent's agent.json (defaults when it does not exist).

        Raises:
            ConfigError: naming the file and field; UnsafePath: a bad agent name.
        """
        if name not in self._agents:
            path = self.agent_file(name)
            data = read_json_file(path)
            try:
                self._agents[name] = AgentConfig.model_validate(data)
            except ValidationError as exc:
                raise ConfigError(_format_errors(str(path), exc)) from exc
        return self._agents[name]

    def memory_for(self, agent: str) -> MemorySettings:
        """Memory settings for ``agent``: agent.json's ``memory`` overrides settings.json.

        Raises:
            ConfigError: the merged ``maxEntryBytes`` exceeds ``maxFileBytes`` (names agent.json).
        """
        base = self.settings.memory
        over = self.agent(agent).memory
        update = {
            name: getattr(over, name)
            for name in ("enabled", "max_lines", "max_entry_bytes", "max_file_bytes")
            if getattr(over, name) is not None
        }
        merged = base.model_copy(update=update)
        if merged.max_entry_bytes > merged.max_file_bytes:
            raise ConfigError(
                f"{self.agent_file(agent)}: memory.maxEntryBytes ({merged.max_entry_bytes}) "
                f"must not exceed memory.maxFileBytes ({merged.max_file_bytes})"
            )
        return merged

    def memory_enabled(self, agent: str) -> bool:
        """Whether memory (memory_write and the pre-compaction extractor) is on for ``agent``."""
        return self.memory_for(agent).enabled


def _refuse_weaker_security(path: Path, data: dict[str, Any]) -> None:
    """A project file may not turn secret redaction off: a cloned repository could ship one
    that makes tool output with credentials land verbatim in the store and in MEMORY.md, which
    teams commit. The user turns it off in the environment.

    Raises:
        ConfigError: ``security.redactSecrets`` is false in ``path``.
    """
    security = data.get("security")
    if not isinstance(security, dict):
        return
    for key in ("redactSecrets", "redact_secrets"):
        if security.get(key) is False:
            raise ConfigError(
                f"{path}: security.{key}: a project file may not turn secret redaction off "
                "(a cloned repository could ship it); set VEIL_SECURITY__REDACT_SECRETS=false "
                "in your environment instead"
            )


def user_settings_file() -> Path:
    """``$VEIL_HOME/settings.json`` or ``~/.veil/settings.json``: the user's own settings, under
    every project's (same sections as ``.veil/settings.json``)."""
    return user_config_dir() / "settings.json"


def _with_user_settings(project: dict[str, Any], project_path: Path) -> dict[str, Any]:
    """The user's settings.json with the project's on top, section by section, except
    ``permissions``, where the project may only add deny rules and narrow the mode
    (:func:`veil.core.permissions.merge_permission_layers`).

    Raises:
        ConfigError: the user's file is invalid, or the project's widens permissions (each
            message names its file).
    """
    from veil.core.permissions import merge_permission_layers

    path = user_settings_file()
    user = read_json_file(path)
    try:
        SettingsFile.model_validate(user)
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(path), exc)) from exc
    merged = dict(user)
    for key, value in project.items():
        if key == "permissions":
            continue
        base = merged.get(key)
        merged[key] = (
            {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        )
    permissions = merge_permission_layers(
        user.get("permissions") or {}, project.get("permissions") or {}, project_path
    )
    if permissions:
        merged["permissions"] = permissions
    return merged


def load_config(project_dir: str | Path | None = None) -> Config:
    """Load ``.veil/settings.json``, ``VEIL_*`` variables and the auth files of a project.

    Args:
        project_dir: the project root; default the current directory.

    Raises:
        ConfigError: a file is unreadable or a field is wrong; the message names file and field.
    """
    root = Path(project_dir or os.getcwd()).resolve()
    settings_file = veil_file(root, "settings.json")  # no symlink inside .veil/ (issue 17)
    user_auth = user_config_dir() / "auth.json"
    # veil run in the home folder: the "project's" .veil is the user's own folder
    users_own = _same_file(user_config_dir(), root / ".veil")
    data = read_json_file(settings_file)
    try:
        SettingsFile.model_validate(data)  # the file alone, so errors name the file
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(settings_file), exc)) from exc
    _refuse_weaker_security(settings_file, data)
    if not users_own:
        check_project_options(settings_file, data, user_auth)
    merged = data if users_own else _with_user_settings(data, settings_file)
    try:
        settings = Settings(**merged)
    except ValidationError as exc:
        raise ConfigError(_format_errors("environment", exc, env=True)) from exc
    if not users_own:
        # a VEIL_PERMISSIONS__DENY variable replaces the files' lists; the project's deny
        # rules still hold (only the user can allow, anyone can refuse)
        project_deny = (data.get("permissions") or {}).get("deny") or []
        settings.permissions.deny = list(dict.fromkeys([*settings.permissions.deny, *project_deny]))
    token = os.environ.get("VEIL_HTTP_TOKEN")
    if token:
        try:
            check_http_token(token)
        except ValueError as exc:
            raise ConfigError(f"environment: VEIL_HTTP_TOKEN (http.token): {exc}") from exc
        settings.http.token = SecretStr(token)
    from_env = env_setting_paths(dict(os.environ))
    from_project = {
        path
        for path in leaf_paths(data if not users_own else {})
        if not any(path == e or path.startswith(e + ".") for e in from_env)
    }
    auth, project_providers = _load_auth(user_auth, veil_file(root, "auth.json"), root)
    return Config(
        project_dir=root,
        settings=settings,
        auth=auth,
        settings_file=settings_file,
        project_providers=project_providers,
        settings_from_project=frozenset(from_project),
    )


def _load_auth(
    user_file: Path, project_file: Path, root: Path
) -> tuple[AuthConfig, frozenset[str]]:
    """The user's auth.json, then the project's under :mod:`veil.core.trust`'s rules; each
    validation error names the file that brought the value. A provider of the project's file
    that would receive requests needs the user's consent (issue 17)."""
    user = read_json_file(user_file)
    allowed = pop_project_provider_consent(user, user_file)
    try:
        AuthConfig.model_validate(user)
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(user_file), exc)) from exc
    if _same_file(user_file, project_file):  # veil run in the home folder: one file, the user's
        return AuthConfig.model_validate(user), frozenset()
    project = read_json_file(project_file)
    refuse_project_consent(project, project_file, user_file)
    check_project_options(project_file, project, user_file)
    merged, owned = merge_auth_layers(user, project, user_file, project_file)
    try:
        auth = AuthConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(project_file), exc)) from exc
    used = providers_in_use(auth.routing.default, auth.routing.fallback, auth.providers)
    check_project_provider_consent(
        used, owned, root, project_file, user_file, allowed, dict(os.environ)
    )
    return auth, owned


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False
