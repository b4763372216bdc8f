"""Request and response bodies of the HTTP plugin's own routes (pydantic models).

The route table (:mod:`veil_http.api`) validates requests with these models and builds every JSON
answer through them, and ``/openapi.json`` is generated from their JSON Schemas, so the document
and the behaviour cannot drift apart. Field names on the wire are camelCase, as in seed 000's
compact response (``sessionId``, ``compactedCount``...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from veil import AGENT_NAME_RE


def _integral(value: Any) -> Any:
    """JSON Schema counts ``95.0`` as an integer; strict pydantic does not, so convert it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]
"""An integer as JSON Schema means it: ``5`` and ``5.0``, never ``"5"`` or ``true``."""


class Body(BaseModel):
    """A JSON request body: strict types (``"5"`` is no integer, ``true`` no number), unknown
    fields refused, so a typo is a 422 naming the field rather than a silent default."""

    model_config = ConfigDict(
        strict=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class Query(BaseModel):
    """Query-string parameters (values arrive as text, so types are converted)."""

    model_config = ConfigDict(extra="ignore")


class Out(BaseModel):
    """A JSON answer (camelCase on the wire)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# -- requests --------------------------------------------------------------------------------


class CreateSession(Body):
    """``POST /sessions``: both fields optional (the default agent and its configured model)."""

    agent: str | None = Field(
        default=None,
        pattern=AGENT_NAME_RE.pattern,
        description="agent name (.veil/agents/<name>/agent.json); default settings defaultAgent",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="model for this session, overriding agent.json's",
    )


class PostMessage(Body):
    """``POST /sessions/{session_id}/messages``: the user's message."""

    content: str = Field(min_length=1, description="the user's message text")


class CompactBody(Body):
    """``POST /sessions/{session_id}/compact``: optional extra summary instructions."""

    instructions: str | None = Field(
        default=None, description="appended to the compaction prompt (like /compact TEXT)"
    )


class RecallBody(Body):
    """``POST /sessions/{session_id}/recall``."""

    query: str = Field(min_length=1, description="what to look for")
    limit: JsonInt = Field(default=10, ge=1, le=100, description="most hits returned")
    tags: list[str] | None = Field(default=None, description="restrict to items with these tags")


class ListSessionsQuery(Query):
    """``GET /sessions`` query."""

    limit: int = Field(default=50, ge=1, le=500, description="most sessions returned")


class ContextQuery(Query):
    """``GET /sessions/{session_id}/context`` query."""

    tier: Literal["live", "warm", "cold"] | None = Field(
        default=None, description="only items of this tier (default: all three)"
    )


# -- answers ---------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    """The ``error`` member of every error answer."""

    code: str = Field(description="stable upper-case code, e.g. SESSION_NOT_FOUND")
    message: str = Field(description="what went wrong, naming the field or id")


class ErrorOut(BaseModel):
    """Every 4xx / 5xx answer: ``{"error": {"code", "message"}}``."""

    error: ErrorDetail


class SessionOut(Out):
    """A session (``Session.to_dict()``): no API key is ever part of it."""

    id: str
    agent: str
    model: str | None
    title: str | None
    created_at: float = Field(description="Unix time, seconds")
    closed: bool
    message_count: int = Field(ge=0)
    compact_size: int = Field(ge=0, description="seed 000 compactSize: messages summarised")
    compact_summary: str | None = Field(description="seed 000 compactSummary")
    snapshot: dict[str, Any] = Field(description="the agent's config at session creation")
    warnings: list[str] = Field(
        default_factory=list,
        description="damaged rows of the session that the load left out (see `veil doctor`)",
    )


class SessionSummary(Out):
    """A row of ``GET /sessions``."""

    id: str
    agent: str
    model: str | None
    title: str | None
    created_at: float = Field(description="Unix time, seconds")
    updated_at: float = Field(description="Unix time, seconds")
    closed: bool
    message_count: int = Field(ge=0)
    compact_size: int = Field(ge=0)


class SessionList(Out):
    """``GET /sessions``: most recently updated first."""

    sessions: list[SessionSummary]
    warnings: list[str] = Field(
        default_factory=list,
        description="damaged session rows left out of the list (see `veil doctor`)",
    )


class TurnOut(Out):
    """The result of one user message (``veil.core.loop.TurnResult``)."""

    status: Literal["done", "halted", "interrupted", "max_iterations"] = Field(
        description="halted: a plugin (convergence) stopped the run, see reason"
    )
    final: str = Field(description="the final assistant text ('' when there is none)")
    reason: str | None = Field(description="why the run stopped when status is not done")
    iterations: int = Field(ge=0, description="model calls made")
    usage: dict[str, int] = Field(description="prompt_tokens / completion_tokens of this turn")
    usage_estimated: bool = Field(
        default=False,
        description="true when veil counted part of usage because the provider reported none",
    )
    seconds: float = Field(ge=0, description="wall time of the turn")
    warnings: list[str] = Field(
        default_factory=list,
        description="what veil reported during the turn (the stream's warning and info events): "
        "content put behind a pointer, budget overruns, refused compactions, convergence",
    )
    session: SessionOut


class CompactOut(Out):
    """Seed 000's compact response."""

    session_id: str
    compacted_count: int = Field(ge=0, description="messages included in this compaction run")
    new_size: int = Field(ge=0, description="total messages summarised so far (compactSize)")
    already_up_to_date: bool = Field(description="true if there were no new messages to compact")
    session: SessionOut


class ItemOut(Out):
    """A context item (``veil.core.types.ContextItem``) with its retention score when scored."""

    id: str
    tier: Literal["live", "warm", "cold"]
    kind: str
    source: str
    content: str
    tokens: int = Field(ge=0)
    tags: list[str]
    targets: list[str]
    step: int
    message_index: int | None
    tool_call_id: str | None
    access_count: int = Field(ge=0)
    stability: float = Field(description="FSRS stability, days")
    difficulty: float
    created_at: float = Field(description="Unix time, seconds")
    last_access: float = Field(description="Unix time, seconds")
    cognitive_weight: float
    pinned: bool
    loaded_by_hand: bool
    outcome: str | None
    score: float | None = Field(
        default=None,
        description="retention score in [0, 1] from the loaded scorer (live items only; "
        "null when no scorer is loaded)",
    )
    signals: dict[str, float | None] | None = Field(
        default=None,
        description="the signals behind the score (recency, frequency, relevance, structure, "
        "cognitive for the FSRS scorer), each in [0, 1]; null when the scorer does not "
        "explain itself or the item is not live",
    )


class ContextOut(Out):
    """``GET /sessions/{session_id}/context``."""

    session_id: str
    context_layer: bool = Field(description="a scorer and an eviction policy are loaded")
    scored: bool = Field(description="live items carry scores from the loaded scorer")
    counts: dict[str, int] = Field(description="items per tier: live, warm, cold")
    live_tokens: int = Field(ge=0, description="tokens of the live items")
    items: list[ItemOut]


class HitOut(Out):
    """One recall candidate (``veil.core.types.RecallHit``)."""

    id: str
    content: str
    score: float = Field(description="in [0, 1], higher is better")
    source: str
    meta: dict[str, Any]


class RecallOut(Out):
    """``POST /sessions/{session_id}/recall``: best first."""

    session_id: str
    query: str
    hits: list[HitOut]


class HealthOut(Out):
    """``GET /health``."""

    ok: bool
    context_layer: bool = Field(description="false: no scorer or eviction plugin, nothing evicted")
    plugins: int = Field(ge=0, description="plugins loaded, the core's built-in one included")
    version: str


class PluginInfo(BaseModel):
    """A loaded plugin."""

    name: str
    version: str
    hooks: list[str]
    warnings: list[str] = Field(
        default_factory=list,
        description='problems veil sees with the plugin, e.g. "implements no veil hook"',
    )


class PluginsOut(BaseModel):
    """``GET /plugins`` (``Veil.describe()``): names and hooks only, never configuration."""

    plugins: list[PluginInfo]
    hooks: dict[str, list[str]] = Field(description="hook -> plugins in call order")
    context_layer: bool
    blocked: list[str]
    tools: dict[str, str] = Field(description="tool name -> plugin")
