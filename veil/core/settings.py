"""Configuration: ``.veil/settings.json``, ``.veil/agents/<name>/agent.json``, ``auth.json`` and
``VEIL_*`` environment variables, validated with pydantic / pydantic-settings.

Field names and defaults follow seed 000 (``memory``, ``compaction``, ``models``, ``providers``,
``routing``, ``defaultCompaction``) and DESIGN.md's reference defaults (``context``,
``convergence``). JSON keys are the seed's camelCase names; Python attributes are snake_case.

The core's :class:`Settings` holds the sections and fields the core reads itself; plugins add
theirs with the ``register_settings`` hook (:mod:`veil.core.plugin_settings`), and
:func:`load_config` validates every section, the core's and the plugins', the same way.

Each file is validated on its own so that an error names the file and the field, e.g.
``.veil/settings.json: compaction.threshold: Input should be less than or equal to 1``.
Environment variables override settings.json: ``VEIL_COMPACTION__THRESHOLD=0.9`` (nested fields
joined by ``__``, snake_case names). ``auth.json`` is read from ``~/.veil/auth.json`` (or
``$VEIL_HOME/auth.json``) and then ``.veil/auth.json``; what the project's files may change is
decided by :mod:`veil.core.safety.trust` (a key only ever goes to the endpoint named beside it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError

from veil.core.errors import ConfigError, UnsafePath
from veil.core.jsonio import MAX_DEPTH, TOO_DEEP, JSONTooDeep
from veil.core.jsonio import loads as json_loads
from veil.core.safety.paths import veil_file
from veil.core.safety.trust import (
    check_project_options,
    check_project_provider_consent,
    display_path,
    env_setting_paths,
    leaf_paths,
    merge_auth_layers,
    pop_project_provider_consent,
    providers_in_use,
    refuse_project_consent,
)
from veil.core.settings_env import (
    EnvValueNotJson,
    expected_shape,
    is_scalar_list,
    not_json_error,
    split_list,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.plugin_settings import PluginSections

DEFAULT_AGENT = "default"
MIN_HTTP_TOKEN_CHARS = 16
"""Shortest bearer token ``veil serve`` accepts (16 characters of ``secrets.token_urlsafe`` carry
96 bits; a short token can be guessed by whoever reaches the port)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names of this machine's loopback interface."""
AGENT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A valid agent name: 1 to 64 letters, digits, ``_``, ``.`` or ``-``, not starting with a
punctuation mark (it names a folder under ``.veil/agents/``)."""


def _not_a_credential(value: str) -> str:
    """A model name as a file or variable gives it, refused when it is a credential
    (:func:`veil.core.safety.redaction.is_credential`, formats only: the project's known
    secrets are checked where a session takes its model, :meth:`veil.core.app.Veil.check_model_name`).

    Raises:
        ValueError: without the value (pydantic's error then names the file and field, and
            :func:`_format_errors` leaves the input out).
    """
    from veil.core.safety.redaction import NOT_A_MODEL_NAME, is_credential

    if is_credential(value):
        raise ValueError(NOT_A_MODEL_NAME)
    return value


ModelName = Annotated[str, AfterValidator(_not_a_credential)]
"""A model name in a settings file, auth.json or agent.json: a credential pasted there is refused
when the file is loaded, before a session stores it or a request (or litellm's warning) carries it."""

CALL_OWNED_OPTIONS = frozenset({"model", "messages", "tools", "stream"})
"""Completion arguments veil sets on every call: an option of that name would replace them (the
checked model name, the prompt veil fitted, the tools offered)."""


def _no_call_owned_options(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """``models.<role>.options`` without the arguments veil owns (:data:`CALL_OWNED_OPTIONS`).

    Raises:
        ValueError: naming the first such key (its value is not quoted: it may be a key).
    """
    for key in value or {}:
        if key in CALL_OWNED_OPTIONS:
            raise ValueError(
                f"{key!r} is not an option: veil sets it on every call (name the model in "
                "models.<role>.model)"
            )
    return value


ModelOptions = Annotated[dict[str, Any], AfterValidator(_no_call_owned_options)]
"""``models.<role>.options``: passed to the completion call as they are, but for the
arguments veil sets itself (:data:`CALL_OWNED_OPTIONS`)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


class SettingsSection(BaseModel):
    """Base of every settings section, the core's and the plugins' (``register_settings``):
    camelCase JSON keys, snake_case attributes, no unknown keys, no NaN or infinite number
    (Python's JSON reader accepts ``NaN``; a NaN threshold compares false with everything, and
    pydantic's range check reported it as "less than or equal to 1")."""

    model_config = ConfigDict(
        alias_generator=_camel, populate_by_name=True, extra="forbid", allow_inf_nan=False
    )


_Model = SettingsSection


class ModelRole(_Model):
    """One model role (``models.main`` / ``models.compact``, seed 000).

    ``model`` is the provider's model name (``anthropic/claude-4-6-sonnet``); ``context_window``
    (tokens) overrides what litellm knows; ``options`` are passed to the completion call
    (``temperature``, ``max_tokens``...).
    """

    model: ModelName = Field(min_length=1)
    context_window: int | None = Field(default=None, gt=0)
    options: ModelOptions = Field(default_factory=dict)


class Models(_Model):
    """Model roles: ``main`` answers the user; ``compact`` summarises (falls back to ``main``).

    The roles in effect, every layer merged (:attr:`Config.models`): each role names its model.
    """

    main: ModelRole | None = None
    compact: ModelRole | None = None


class ModelRoleLayer(_Model):
    """``models.<role>`` as one layer gives it (an auth.json, a settings.json, ``VEIL_MODELS__*``
    variables): every field may be left out, so ``{"contextWindow": 16000}`` in settings.json
    adds a window to the model auth.json names. :func:`merge_model_role` combines two layers."""

    model: ModelName | None = Field(default=None, min_length=1)
    context_window: int | None = Field(default=None, gt=0)
    options: ModelOptions | None = None


class ModelLayers(_Model):
    """``models`` as one layer gives it (:class:`ModelRoleLayer` per role)."""

    main: ModelRoleLayer | None = None
    compact: ModelRoleLayer | None = None


MODEL_ROLES = ("main", "compact")


def merge_model_role(
    base: ModelRoleLayer | None, over: ModelRoleLayer | None
) -> ModelRoleLayer | None:
    """``over``'s role on top of ``base``'s, field by field.

    ``model`` and ``contextWindow`` are taken from ``over`` when it gives them, ``options`` are
    merged key by key (``over`` wins). When the two layers name different models, ``over``
    redefines the role and is taken whole: a window and options describe the model they were
    set for, and options of one file (an ``api_key``, an ``api_base``) never go with a model
    another file names (:mod:`veil.core.safety.trust`).

    Returns:
        the merged layer, or None when neither gives the role.
    """
    if base is None or over is None:
        return over if base is None else base
    if over.model is not None and base.model is not None and over.model != base.model:
        return over
    options = None
    if base.options is not None or over.options is not None:
        options = {**(base.options or {}), **(over.options or {})}
    return ModelRoleLayer(
        model=over.model or base.model,
        context_window=over.context_window or base.context_window,
        options=options,
    )


def merge_model_roles(
    settings: ModelLayers, auth: ModelLayers, *, where: Mapping[str, str] | None = None
) -> Models:
    """The roles in effect: settings.json and ``VEIL_MODELS__*`` (``settings``) over auth.json
    (``auth``), field by field (:func:`merge_model_role`).

    Args:
        settings: the settings layer (settings.json files and variables, already merged).
        auth: the auth layer (the user's and the project's auth.json, already merged).
        where: role -> the files and variables that give it, for the error message.

    Raises:
        ConfigError: a role is given (a window, options) but no layer names its model; the
            message names where the role was given and where the model may be set.
    """
    roles: dict[str, ModelRole | None] = {}
    for role in MODEL_ROLES:
        layer = merge_model_role(getattr(auth, role), getattr(settings, role))
        if layer is None:
            roles[role] = None
            continue
        if layer.model is None:
            given = ", ".join(
                _camel(f) for f in ("context_window", "options") if getattr(layer, f) is not None
            )
            source = (where or {}).get(role)
            raise ConfigError(
                f"models.{role}.model: not set: models.{role} gives {given}"
                + (f" (in {source})" if source else "")
                + f' but no file names its model; add "model" to models.{role} in '
                f"{display_path(user_auth_file())} or .veil/settings.json, "
                f"or set VEIL_MODELS__{role.upper()}__MODEL"
            )
        roles[role] = ModelRole(
            model=layer.model, context_window=layer.context_window, options=layer.options or {}
        )
    return Models(**roles)


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
        from veil.core.models.providers import KNOWN_PROVIDER_TYPES

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

    The core owns the fields an agent's agent.json may override (:meth:`Config.memory_for`:
    the core reads them to merge the two files, and ``enabled`` to decide whether compaction
    extracts memories); veil_memoryfiles adds ``instructionFiles`` and ``injectionShare``
    (``veil_memoryfiles.settings``). ``max_entry_bytes``: UTF-8 bytes of one
    written entry (16 KiB; a larger write is refused, nothing written). ``max_file_bytes``: bytes
    of a MEMORY.md after a write (256 KiB); like ``maxLines``, crossing it moves the oldest
    whole entries to ``archive-YYYY-MM.md``.
    """

    enabled: bool = True
    max_lines: int = Field(default=500, ge=1)
    max_entry_bytes: int = Field(default=MAX_ENTRY_BYTES, ge=1)
    max_file_bytes: int = Field(default=MAX_FILE_BYTES, ge=1)

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
CONTEXT_LAYER_COMPACTION_THRESHOLD = 1.0
"""``compaction.threshold`` when it is not set and the context layer is on (a scorer and an
eviction policy loaded): eviction keeps the prompt under it, so it is also the share of the
window eviction fills (less the tool schemas and the completion reserve); full compaction is
the fallback when eviction cannot keep the prompt in the window. Replay (bench/RESULTS.md,
issue 18; 22 of the 84 mini-swe-agent files, masking off, the low-water mark's cache cap):
1.0 gave 0.828 x full history's effective tokens and 378 misses, 0.85 gave 0.747 and 514 (the
masking baseline: 1.72 and 319): long sessions need the whole budget to hold their references.
Without the context layer an unset threshold is seed 000's 0.85."""


class CompactionSettings(_Model):
    """``compaction`` (seed 000): ``threshold`` 0.85 in [0.1, 1.0] x the context window triggers
    full compaction, which keeps the newest ``keepRecentTurns`` steps.

    The core owns ``threshold`` (also the size eviction keeps the prompt under) and the circuit
    breaker; ``keepRecentTurns`` is read by veil_compaction's planner (``plan_compaction``) but
    stays here so that the section's keys, their order in errors and ``veil settings``, and its
    ``VEIL_COMPACTION__*`` variables are unchanged. veil_compaction adds observation masking
    (``observationMaskingTurns``, ``observationMaskingBlock``: ``veil_compaction.settings``).

    An unset ``threshold`` (None) resolves by whether the context layer is on: without it,
    seed 000's 0.85; with it, the value chosen by replay
    (:data:`CONTEXT_LAYER_COMPACTION_THRESHOLD`). Read it with :meth:`trigger`."""

    threshold: float | None = Field(default=None, ge=0.1, le=1.0)
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


class DefaultCompaction(_Model):
    """``defaultCompaction`` in agent.json (seed 000): snapshotted into each session at creation."""

    enabled: bool = True
    compaction_count: int = Field(default=50, ge=1, le=99)
    auto_threshold: int | None = Field(default=None, ge=1, le=99)
    model: ModelName = "default"
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


class InitialStability(_Model):
    """Initial FSRS stability per item kind, in days (DESIGN.md reference defaults)."""

    episodic: float = Field(default=0.02, gt=0)
    fact: float = Field(default=0.083, gt=0)
    procedural: float = Field(default=0.25, gt=0)
    decision: float = Field(default=0.5, gt=0)


class ContextSettings(_Model):
    """``context``: the fields of scoring and eviction the core reads (seed 002; DESIGN.md
    reference defaults). veil_fsrs adds its scorer's and eviction policy's fields (weights,
    decay, controller, turn weights, protected window...: ``veil_fsrs.settings``).

    ``budget_tokens``: tokens the kept messages may take (None: the model's window minus the
    completion reserve and the system prompt). ``initial_stability``: the FSRS stability an
    item gets when captured, by kind (days). ``elide_repeats`` (off): over budget, first replace
    runs of lines that a newer message repeats by a marker (lossless; default plugin
    ``veil.elision``, :mod:`veil.default_plugins.elision.repeats`; blocked, nothing is elided).
    Off since issue 29: with excerpts, a superseded copy already keeps only the lines that
    differ, and elision's rewrites of old messages at each pass break the cached prefix. Replay of the 84 recordings at budget 8,000 (bench/RESULTS.md, issue 29):
    on 0.739x full history's effective tokens, 834 identifier / 1,030 line misses; off 0.653x,
    869 / 1,053 (cached input at 0.1 of the price).
    ``rescue_embeddings``: how turns get the embeddings the rescue of old turns compares
    (``background`` on a worker thread, ``sync`` at capture, ``off``; see
    :mod:`veil_fsrs.turn_embeddings`).
    ``page_in``: an eviction pass may bring back items it evicted earlier when they now add more
    names than what they would replace (veil_fsrs' re-selection; ``EvictionPlan.to_live``).
    """

    initial_stability: InitialStability = Field(default_factory=InitialStability)
    page_in: bool = True
    rescue_embeddings: Literal["background", "sync", "off"] = "background"
    elide_repeats: bool = False
    budget_tokens: int | None = Field(default=None, gt=0)


class HttpSettings(_Model):
    """``http``: the core owns ``token`` (it reads it to redact it, and ``VEIL_HTTP_TOKEN``
    overrides it), at least :data:`MIN_HTTP_TOKEN_CHARS` characters; veil_http adds where
    ``veil serve`` listens (``host``, ``port``, ``maxBodyBytes``: ``veil_http.settings``)."""

    token: SecretStr | None = None

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
    before anything is stored, captured or sent back (:mod:`veil.core.safety.redaction`). Only the
    user may turn it off (``VEIL_SECURITY__REDACT_SECRETS=false``): a project's settings.json
    that says ``false`` is refused, since a cloned repository could ship one."""

    redact_secrets: bool = True


class PermissionSettings(_Model):
    """``permissions``: which tool calls run, which are refused, which ask first
    (:mod:`veil.core.safety.permissions` has the rules and their order).

    ``mode``: ``ask`` (default: ``bash``, ``write``, ``edit`` and plugin tools ask; reads never
    do), ``acceptEdits`` (file edits inside the project run, except under ``.git/`` and
    ``.veil/``; the rest asks), ``allow`` (every
    call runs; ``--yes``) or ``deny`` (whatever would ask is refused: unattended runs that may
    only do what ``allow`` lists). ``allow`` / ``deny``: rules ``tool`` or ``tool(pattern)``
    (``bash(pytest*)``, ``bash(npm run test:*)``, ``edit(src/*)``, ``read(.env*)``); a deny rule
    wins over everything. A project's settings.json may add deny rules and narrow the mode, but
    neither allow rules nor a wider mode (:func:`veil.core.safety.permissions.merge_permission_layers`).
    """

    mode: Literal["ask", "acceptEdits", "allow", "deny"] = "ask"
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _rules_parse(cls, value: list[str]) -> list[str]:
        from veil.core.safety.permissions import check_rules

        return check_rules(value)


class EmbeddingSettings(_Model):
    """``embeddings``: ``local`` (all-MiniLM-L6-v2 in-process) or ``ollama`` on 127.0.0.1.

    ``ollama_url`` must be an http(s) URL on the loopback interface whichever file or variable
    sets it: what is embedded is the project's content, and veil sends none of it off the machine
    (checked when settings load, so a project file cannot redirect it).
    """

    provider: Literal["local", "ollama"] = "local"
    ollama_model: ModelName = "nomic-embed-text"
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


class StoreSettings(_Model):
    """``store``: where veil keeps sessions, items, the event log and (on PostgreSQL) memory
    files.

    ``url`` unset: the project's ``.veil/context.db`` (SQLite). ``postgresql://user:password@host
    :port/database``: a PostgreSQL server with pgvector, shared by every veil process pointed at
    it (docs/teams.md); set by you only (``~/.veil/settings.json``, ``VEIL_STORE__URL``
    or ``--store``): a project's settings.json may not set it, since a cloned repository could
    send the project's history to a server of its choosing. ``project``: the name this project's
    rows go under in a shared store (default: the project folder's name; also yours only, so a
    clone cannot write into another project's memory). ``pool_size``: most connections one veil
    process opens. ``synchronous_commit``: wait for the server's log flush at every commit
    (off: the durability of the SQLite store's WAL, see
    :class:`veil.core.store.postgres.PgDatabase`).
    """

    url: SecretStr | None = None
    project: str | None = Field(default=None, min_length=1, max_length=200)
    pool_size: int = Field(default=10, ge=1, le=1000)
    synchronous_commit: bool = False

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        text = value.get_secret_value().strip()
        if not text:
            return None
        scheme = text.split(":", 1)[0].lower()
        if scheme not in ("postgresql", "postgres") or "://" not in text:
            raise ValueError(
                "must be a postgresql://user:password@host:port/database URL (leave it unset "
                "for the project's own .veil/context.db)"
            )
        return SecretStr(text)

    @field_validator("project")
    @classmethod
    def _plain_project(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(ord(c) < 32 for c in value)):
            raise ValueError("must be a name without control characters")
        return value

    def project_name(self, project_dir: Path) -> str:
        """The project's name in a shared store: ``project``, else the project folder's name."""
        return self.project or project_dir.name or "default"


class Settings(BaseSettings):
    """The core's sections of ``.veil/settings.json`` (all optional), with ``VEIL_*`` overrides.

    The core owns the sections and fields it reads itself: ``models``, ``plugins``, ``loop``,
    ``security``, ``permissions``, ``embeddings``, ``defaultAgent``, and the core's fields of
    ``memory``, ``compaction``, ``context`` and ``http``. Plugins register their own sections,
    or fields added to one of these, with ``register_settings``
    (:mod:`veil.core.plugin_settings`); :func:`veil.core.plugin_settings.settings_models` builds the class that holds
    both, which :func:`load_config` validates.
    """

    model_config = SettingsConfigDict(
        env_prefix="VEIL_",
        env_nested_delimiter="__",
        alias_generator=_camel,
        populate_by_name=True,
        extra="forbid",
        case_sensitive=False,
    )

    models: ModelLayers = Field(default_factory=ModelLayers)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    loop: LoopSettings = Field(default_factory=LoopSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
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
        return (_EnvByAlias(settings_cls), init_settings)


class _EnvByAlias(EnvSettingsSource):
    """``VEIL_*`` variables keyed as settings.json's values are.

    pydantic-settings keys what the file gives (init values) by a field's alias
    (``defaultAgent``, ``rateLimits``) and what variables give by its name (``default_agent``);
    both keys then stand side by side and validation takes the alias, so the file won over
    the variable for every field whose name has two words. Keyed by alias too, the two merge
    and the variable wins. (Nested values: :func:`_by_field_name`.)
    """

    def __call__(self) -> dict[str, Any]:
        """The variables' values by field alias.

        Raises:
            ConfigError: a variable for a list or object field holds text that is not the
                JSON it needs (:mod:`veil.core.settings_env`), naming the variable.
        """
        fields = self.settings_cls.model_fields
        try:
            values = super().__call__()
        except SettingsError as exc:
            if isinstance(exc.__cause__, EnvValueNotJson):
                raise not_json_error(exc.__cause__, self.env_vars) from None
            raise
        return {
            (fields[key].alias or key) if key in fields else key: v for key, v in values.items()
        }

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:
        """A variable's text for a list or object field: JSON, or for a list of plain values
        also items separated by commas (:func:`veil.core.settings_env.split_list`).

        Raises:
            EnvValueNotJson: neither (a ValueError; :meth:`__call__` names the variable).
        """
        try:
            return super().decode_complex_value(field_name, field, value)
        except (ValueError, RecursionError) as exc:
            reason = TOO_DEEP if isinstance(exc, RecursionError) else str(exc)
        annotation = field.annotation if field is not None else None
        # a value that starts with "[" was meant as JSON: say why it is not, do not split it
        if (
            isinstance(value, str)
            and not value.lstrip().startswith("[")
            and is_scalar_list(annotation)
        ):
            return split_list(value)
        raise EnvValueNotJson(field_name, str(value), expected_shape(annotation), reason)


CORE_SECTIONS: dict[str, type[SettingsSection]] = {
    name: f.annotation
    for name, f in Settings.model_fields.items()
    if isinstance(f.annotation, type) and issubclass(f.annotation, SettingsSection)
}
"""The core's sections by attribute name; a plugin registering one adds fields to it."""


class AgentConfig(_Model):
    """``.veil/agents/<name>/agent.json``: the agent's model, prompt, memory and defaultCompaction."""

    model: ModelName | None = None
    system_prompt: str | None = None
    memory: AgentMemory = Field(default_factory=AgentMemory)
    default_compaction: DefaultCompaction = Field(default_factory=DefaultCompaction)


class AuthConfig(_Model):
    """``auth.json`` (seed 000): providers with credentials, routing, optional model roles."""

    providers: dict[str, Provider] = Field(default_factory=dict)
    routing: Routing = Field(default_factory=Routing)
    models: ModelLayers = Field(default_factory=ModelLayers)

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


def _format_errors(
    source: str,
    err: ValidationError,
    *,
    env: bool = False,
    unimportable: Iterable[tuple[str, str]] = (),
    model: type[BaseModel] | None = None,
) -> str:
    """``source: dotted.field: message; ...`` (``source: VEIL_X__Y (x.y): message`` with
    ``env``). An unknown key is explained against ``model`` (the class that validated:
    :func:`veil.core.settings_unknown.unknown_key_message`: a section no installed plugin
    registers, or a field the section lacks, with did-you-mean); an unknown top-level key also
    says which plugins could not be imported to register their sections (``unimportable``:
    ``(name, error)``), since one of them may own it."""
    from veil.core.settings_unknown import unknown_key_message

    parts = []
    unimportable = list(unimportable)
    for e in err.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")  # pydantic's wording for validator errors
        if e["type"] == "extra_forbidden" and model is not None:
            msg = unknown_key_message(model, e["loc"], env=env) or msg
        if unimportable and e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
            broken = ", ".join(f"{name} ({why})" for name, why in unimportable)
            msg += f"; one of these plugins may, but could not be imported: {broken}"
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
        ConfigError: the file is not UTF-8 JSON, not an object, or nested more than
            :data:`veil.core.jsonio.MAX_DEPTH` levels (message names the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json_loads(text, max_depth=MAX_DEPTH) if text.strip() else {}
    except json.JSONDecodeError as exc:
        at = "" if isinstance(exc, JSONTooDeep) else f" at line {exc.lineno}"
        raise ConfigError(f"{path}: invalid JSON{at}: {exc.msg}") from exc
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
        settings: the merged settings (settings.json + ``VEIL_*``): an instance of the
            :class:`Settings` subclass :func:`veil.core.plugin_settings.settings_models` built with the plugins'
            sections, read as ``settings.<section>``.
        auth: the merged :class:`AuthConfig`.
        settings_file: path of settings.json (may not exist).
        project_providers: names of the providers whose entry comes from the project's
            ``.veil/auth.json`` (:func:`veil.core.safety.trust.merge_auth_layers`); their requests get
            only project-safe options and never a key from the environment.
        settings_from_project: dotted snake_case paths (``http.host``) that settings.json sets
            and no ``VEIL_*`` variable overrides.
        section_owners: plugin section (or core section plugins add fields to) -> the
            plugins that registered it (``register_settings``).
    """

    project_dir: Path
    settings: Settings
    auth: AuthConfig
    settings_file: Path
    project_providers: frozenset[str] = frozenset()
    settings_from_project: frozenset[str] = frozenset()
    section_owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
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
        """The model roles in effect: settings.json and ``VEIL_MODELS__*`` over auth.json, field
        by field (:func:`merge_model_roles`).

        Raises:
            ConfigError: a role names no model in any layer (:func:`load_config` checks it
                first, naming where the role was given).
        """
        return merge_model_roles(self.settings.models, self.auth.models)

    @property
    def redactor(self) -> Any:
        """The project's :class:`veil.core.safety.redaction.Redactor` (``security.redactSecrets``,
        the secrets of the auth files, settings and environment), built on first use."""
        if self._redactor is None:
            from veil.core.safety.redaction import redactor_for

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
                agent = AgentConfig.model_validate(data)
            except ValidationError as exc:
                raise ConfigError(_format_errors(str(path), exc)) from exc
            self._refuse_known_secret_models(path, agent)
            self._agents[name] = agent
        return self._agents[name]

    def _refuse_known_secret_models(self, path: Path, agent: AgentConfig) -> None:
        """Refuse an agent.json whose model names hold a secret this project knows (a key of
        auth.json or the environment in no known format; the formats were refused by
        :data:`ModelName` already).

        Raises:
            ConfigError: naming ``path`` and the field, without the value.
        """
        from veil.core.safety.redaction import NOT_A_MODEL_NAME

        fields = [
            ("model", agent.model),
            ("defaultCompaction.model", agent.default_compaction.model),
        ]
        for where, model in fields:
            if model is not None and self.redactor.known_only(model) != model:
                raise ConfigError(f"{path}: {where}: {NOT_A_MODEL_NAME}")

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


def _refuse_project_store(path: Path, data: dict[str, Any]) -> None:
    """A project file may not choose the store: a cloned repository could send the project's
    history and memory to a server of its choosing (``store.url``) or write into another
    project's rows of the user's shared store (``store.project``).

    Raises:
        ConfigError: ``store.url`` or ``store.project`` is set in ``path``.
    """
    store = data.get("store")
    if not isinstance(store, dict):
        return
    for key in ("url", "project"):
        if store.get(key) is not None:
            raise ConfigError(
                f"{path}: store.{key}: a project file may not choose the store (a cloned "
                f"repository could ship it); set VEIL_STORE__{key.upper()} in your environment, "
                "store in ~/.veil/settings.json, or pass --store"
            )


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


def user_auth_file() -> Path:
    """``$VEIL_HOME/auth.json`` or ``~/.veil/auth.json``: the user's providers and keys."""
    return user_config_dir() / "auth.json"


def user_settings_file() -> Path:
    """``$VEIL_HOME/settings.json`` or ``~/.veil/settings.json``: the user's own settings, under
    every project's (same sections as ``.veil/settings.json``)."""
    return user_config_dir() / "settings.json"


def _with_user_settings(
    project: dict[str, Any], project_path: Path, sections: PluginSections
) -> dict[str, Any]:
    """The user's settings.json with the project's on top, section by section, except
    ``permissions``, where the project may only add deny rules and narrow the mode
    (:func:`veil.core.safety.permissions.merge_permission_layers`).

    Raises:
        ConfigError: the user's file is invalid, or the project's widens permissions (each
            message names its file).
    """
    from veil.core.safety.permissions import merge_permission_layers

    path = user_settings_file()
    user = read_json_file(path)
    _validate_file(path, user, sections)
    merged = dict(user)
    for key, value in project.items():
        if key == "permissions":
            continue
        base = merged.get(key)
        if key == "models" and isinstance(base, dict) and isinstance(value, dict):
            merged[key] = _merge_model_dicts(base, value)
            continue
        merged[key] = (
            {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        )
    permissions = merge_permission_layers(
        user.get("permissions") or {}, project.get("permissions") or {}, project_path
    )
    if permissions:
        merged["permissions"] = permissions
    return merged


def _merge_model_dicts(user: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    """The ``models`` sections of the user's and the project's settings.json (both validated),
    role by role and field by field (:func:`merge_model_role`), keyed by field name."""
    out = dict(user)
    for role, value in project.items():
        base = user.get(role)
        if role in MODEL_ROLES and isinstance(base, dict) and isinstance(value, dict):
            layer = merge_model_role(
                ModelRoleLayer.model_validate(base), ModelRoleLayer.model_validate(value)
            )
            out[role] = layer.model_dump(exclude_none=True) if layer is not None else None
        else:
            out[role] = value
    return out


def _validate_file(path: Path, data: dict[str, Any], sections: PluginSections) -> None:
    """Validate one settings file alone, with the plugins' sections.

    Raises:
        ConfigError: naming the file and each wrong field.
    """
    from veil.core.plugin_settings import settings_models

    file_cls = settings_models(sections)[1]
    try:
        file_cls.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            _format_errors(str(path), exc, unimportable=sections.unimportable, model=file_cls)
        ) from exc


def _by_field_name(model: type[BaseModel], data: Any) -> Any:
    """``data`` (validated settings.json content) with every key that is a field's alias
    (``rateLimits``, ``keepRecentTurns``) written as the field's name, in nested sections too.

    pydantic-settings keys what ``VEIL_*`` variables set inside a section by field name; a
    file's camelCase key beside it clashed (``VEIL_COMPACTION__KEEP_RECENT_TURNS`` with the
    file's ``compaction.keepRecentTurns`` was refused as an extra input). Written by name, the
    two merge and the variable wins, as for one-word fields. (Top-level keys: the settings
    source re-keys them by alias, and :class:`_EnvByAlias` does the same for variables.)
    """
    if not isinstance(data, dict):
        return data
    by_alias = {f.alias or name: name for name, f in model.model_fields.items()}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = by_alias.get(key, key)
        field_info = model.model_fields.get(name)
        sub = _model_in(field_info.annotation) if field_info is not None else None
        out[name] = _by_field_name(sub, value) if sub is not None else value
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model of a field's annotation (``ModelRole | None`` -> ``ModelRole``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [
        a
        for a in getattr(annotation, "__args__", ())
        if isinstance(a, type) and issubclass(a, BaseModel)
    ]
    return models[0] if len(models) == 1 else None


def load_config(
    project_dir: str | Path | None = None, *, plugins: Iterable[tuple[str, Any]] = ()
) -> Config:
    """Load ``.veil/settings.json``, ``VEIL_*`` variables and the auth files of a project.

    Every installed plugin is asked for its sections (``register_settings``, also a blocked
    one: :mod:`veil.core.plugin_settings`), and each section is validated with its owner's
    model.

    Args:
        project_dir: the project root; default the current directory.
        plugins: ``(name, plugin object)`` pairs that are not installed entry points but will
            be registered (``open_veil``'s ``extra_plugins``; tests), asked for sections too.

    Raises:
        ConfigError: a file is unreadable or a field is wrong (the message names file and
            field; an unknown key says which section or field was meant); two plugins register
            one section (naming both); a ``VEIL_<SECTION>__...`` variable names a section no
            installed plugin registers.
    """
    from veil.core.plugin_settings import collect_sections, installed_plugins, settings_models
    from veil.core.settings_unknown import check_env_sections

    found, unimportable = installed_plugins(plugins)
    sections = collect_sections(found, CORE_SECTIONS, unimportable)
    settings_cls = settings_models(sections)[0]
    root = Path(project_dir or os.getcwd()).resolve()
    settings_file = veil_file(root, "settings.json")  # no symlink inside .veil/ (issue 17)
    user_auth = user_config_dir() / "auth.json"
    # veil run in the home folder: the "project's" .veil is the user's own folder
    users_own = _same_file(user_config_dir(), root / ".veil")
    data = read_json_file(settings_file)
    _validate_file(settings_file, data, sections)  # the file alone, so errors name the file
    _refuse_weaker_security(settings_file, data)
    if not users_own:
        _refuse_project_store(settings_file, data)
        check_project_options(settings_file, data, user_auth)
    merged = data if users_own else _with_user_settings(data, settings_file, sections)
    check_env_sections(os.environ, settings_cls)  # else ignored: pydantic-settings skips them
    try:
        settings = settings_cls(**_by_field_name(settings_cls, merged))
    except ValidationError as exc:
        raise ConfigError(
            _format_errors(
                "environment",
                exc,
                env=True,
                unimportable=sections.unimportable,
                model=settings_cls,
            )
        ) from exc
    _merge_env_model_roles(settings, settings_cls, merged)
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
    project_auth = veil_file(root, "auth.json")
    auth, project_providers = _load_auth(user_auth, project_auth, root)
    try:
        merge_model_roles(settings.models, auth.models)
    except ConfigError:  # again, naming where each role was given
        files = [user_auth, project_auth, user_settings_file(), settings_file]
        merge_model_roles(settings.models, auth.models, where=_role_sources(files))
    return Config(
        project_dir=root,
        settings=settings,
        auth=auth,
        settings_file=settings_file,
        project_providers=project_providers,
        settings_from_project=frozenset(from_project),
        section_owners=dict(sections.owners),
    )


def _merge_env_model_roles(
    settings: Settings, settings_cls: type[Settings], files: dict[str, Any]
) -> None:
    """Redo ``settings.models`` as the files' roles (``files``: the settings.json files, merged)
    under the ``VEIL_MODELS__*`` variables' roles by :func:`merge_model_role`, as the layers
    below merge. pydantic-settings merges a variable into the files' values key by key, so a
    variable naming another model kept the file's window and options for it; with
    :func:`merge_model_role` the variable's model gets only what the variables give it.
    (Values were validated when ``settings`` was built.)"""
    env_models = _EnvByAlias(settings_cls)().get("models")
    file_models = files.get("models")
    if not isinstance(env_models, dict) or not isinstance(file_models, dict):
        return
    for role in MODEL_ROLES:
        env_role, file_role = env_models.get(role), file_models.get(role)
        if isinstance(env_role, dict) and isinstance(file_role, dict):
            layer = merge_model_role(
                ModelRoleLayer.model_validate(file_role), ModelRoleLayer.model_validate(env_role)
            )
            setattr(settings.models, role, layer)


def _role_sources(files: Iterable[Path]) -> dict[str, str]:
    """Role -> the files (of ``files``, read again) and ``VEIL_MODELS__<ROLE>__*`` variables that
    give ``models.<role>``, joined for a message (``.veil/settings.json, VEIL_MODELS__MAIN__...``)."""
    where: dict[str, list[str]] = {role: [] for role in MODEL_ROLES}
    for path in dict.fromkeys(files):
        try:
            models = read_json_file(path).get("models")
        except ConfigError:
            continue
        for role in MODEL_ROLES:
            if isinstance(models, dict) and models.get(role):
                where[role].append(display_path(path))
    for name, value in os.environ.items():
        for role in MODEL_ROLES:
            if value and name.upper().startswith(f"VEIL_MODELS__{role.upper()}"):
                where[role].append(name)
    return {role: ", ".join(sources) for role, sources in where.items() if sources}


def _load_auth(
    user_file: Path, project_file: Path, root: Path
) -> tuple[AuthConfig, frozenset[str]]:
    """The user's auth.json, then the project's under :mod:`veil.core.safety.trust`'s rules; each
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
