"""Plain data types shared by the core and the plugins (the hooks' arguments and results).

Messages are OpenAI chat messages (``{"role", "content", "tool_calls", "tool_call_id"}`` dicts);
everything here is a dataclass so plugins need nothing but the standard library to build them.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover - imports for type checkers only
    from veil.core.session import Session

Message = dict[str, Any]
"""An OpenAI chat message: ``role`` (system/user/assistant/tool), ``content`` (str or None),
optional ``tool_calls`` (assistant) and ``tool_call_id`` (tool)."""

Outcome = Literal["pass", "fail", "partial", "uncertain"]
"""How an attempt ended (:attr:`Attempt.outcome`): passed, failed, partly passed, or not known."""

ITEM_KINDS = (
    "episodic",
    "fact",
    "procedural",
    "decision",
    "intent",
    "correction",
    "action",
    "exploration",
    "status",
)
"""Kinds a context item or turn can have (seed 002; DESIGN.md "Context layer")."""

TIERS = ("live", "warm", "cold")
"""The tiers an item can be in: ``live`` (in the prompt), ``warm`` (out of the prompt, its
content kept as is) and ``cold`` (out of the prompt, its content compressed; see
:mod:`veil.core.tiers`)."""


_id_source: random.Random | None = None


def new_id(prefix: str) -> str:
    """Return a fresh identifier such as ``item_3f2a9c0e1b7d`` (12 hex characters after the prefix):
    48 random bits from the OS (``os.urandom``, as ``uuid4`` draws them, without building a
    UUID: 0.7 vs 3.1 us here), or from the generator :func:`seeded_ids` installed."""
    if _id_source is not None:
        return f"{prefix}_{_id_source.getrandbits(48):012x}"
    return f"{prefix}_{os.urandom(6).hex()}"


@contextmanager
def seeded_ids(source: random.Random) -> Iterator[None]:
    """Within the block, :func:`new_id` draws from ``source`` instead of the OS (replays: an id's
    tokens count in the prompt through pointer stubs, so random ids would make two runs of the
    same recording differ by a token here and there). Not thread-safe; restores on exit."""
    global _id_source
    previous, _id_source = _id_source, source
    try:
        yield
    finally:
        _id_source = previous


@dataclass
class ContextItem:
    """One scored unit of context: a message, a tool call's result, a remembered fact.

    Attributes:
        id: unique id (``item_...``).
        session_id: session that produced it (provenance).
        content: the text the item stands for.
        kind: one of :data:`ITEM_KINDS`.
        source: ``"user"``, ``"assistant"``, ``"tool_call"``, ``"tool_result"`` or ``"memory"``.
        message_index: index in the session's full history of the message it came from, or None.
        step: the step (one model call with its tool calls) it belongs to.
        tool_call_id: id of the tool call it came from (provenance), or None.
        tags: lower-case words describing it (Jaccard relevance against the task's tags).
        targets: files and symbols it points at (the "structure" signal).
        tokens: size in tokens of ``content``.
        access_count: how often it was used or recalled.
        stability: FSRS stability in days.
        difficulty: FSRS difficulty in [1, 10].
        created_at, last_access: Unix time in seconds.
        cognitive_weight: in [-1, 1]: > 0 present when things went well, < 0 when they went badly.
        pinned, loaded_by_hand: flags that protect and boost the item.
        tier: ``"live"`` (in the prompt), ``"warm"`` (context.db, searchable) or ``"cold"``.
        outcome: for tool results, the outcome of the call when known.
        identifiers: the identifier tokens of ``content`` (DESIGN.md "Measures" shape:
            paths, symbols, numbers), computed at capture for coverage-aware eviction; not
            stored (None until computed, e.g. for an item read back from the store).
        excerpt: for an item out of the prompt (warm), the lines of ``content`` the prompt
            still shows, as 0-based line numbers in ascending order (an *excerpt*: those lines
            verbatim, each elided run a marker; :mod:`veil.core.prompt.excerpts`); None for a
            plain pointer stub or an item in the prompt whole. Set by the core from an
            eviction plan's ``excerpts``; kept in the ``evict`` event, not in the items table.
    """

    content: str
    kind: str = "episodic"
    source: str = "tool_result"
    id: str = field(default_factory=lambda: new_id("item"))
    session_id: str | None = None
    message_index: int | None = None
    step: int = 0
    tool_call_id: str | None = None
    tags: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    tokens: int = 0
    access_count: int = 0
    stability: float = 0.02
    difficulty: float = 5.0
    created_at: float = field(default_factory=time.time)
    last_access: float = field(default_factory=time.time)
    cognitive_weight: float = 0.0
    pinned: bool = False
    loaded_by_hand: bool = False
    tier: str = "live"
    outcome: str | None = None
    identifiers: frozenset[str] | None = field(default=None, repr=False, compare=False)
    excerpt: tuple[int, ...] | None = field(default=None, repr=False, compare=False)


@dataclass
class CaptureEvent:
    """What the core hands to ``capture``.

    Attributes:
        phase: ``"user"`` (a user message arrived), ``"assistant"`` (the model replied),
            ``"tool_call"`` (a tool is about to run) or ``"tool_result"`` (it ran).
        message: the OpenAI message concerned (for tool_call: the assistant message).
        message_index: its index in the session's full history (None before it is stored).
        step: current step number.
        tool_name, tool_call_id, arguments: for tool phases.
        result: for ``"tool_result"``, the tool's output.
    """

    phase: Literal["user", "assistant", "tool_call", "tool_result"]
    message: Message
    step: int
    message_index: int | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    arguments: dict[str, Any] | None = None
    result: ToolResult | None = None


@dataclass
class ToolResult:
    """What a tool handler returns.

    Attributes:
        content: text sent back to the model as the tool message's content.
        is_error: the call failed (bad arguments, command error...).
        outcome: ``pass`` / ``fail`` / ``partial`` / ``uncertain`` when the tool can tell.
        meta: free-form details for front ends and plugins (exit code, path, truncated...).
    """

    content: str
    is_error: bool = False
    outcome: Outcome | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolContext:
    """What a tool handler receives besides its arguments.

    Attributes:
        session: the running session (``session.cwd`` is the project root).
        tool_call_id: id of this call.
    """

    session: Session
    tool_call_id: str


ToolHandler = Callable[[ToolContext, dict[str, Any]], "ToolResult | str"]
"""A tool's function: called with the call's :class:`ToolContext` and its parsed arguments;
returns a :class:`ToolResult` or plain text (a successful result)."""

ToolEffect = Literal["read", "memory", "change"]
"""What a tool does, as it declares when registered (:attr:`Tool.effect`)."""

TOOL_EFFECTS: tuple[str, ...] = ("read", "memory", "change")
"""The values of :data:`ToolEffect`."""


@dataclass
class Tool:
    """A tool the model can call.

    Attributes:
        name: function name sent to the model (``^[a-zA-Z0-9_-]{1,64}$``).
        description: one paragraph the model reads.
        parameters: JSON Schema (``{"type": "object", "properties": ..., "required": [...]}``).
        handler: ``handler(ctx, arguments) -> ToolResult | str``; may raise
            :class:`veil.core.errors.BadRequest` for bad arguments (reported to the model).
        effect: what the tool does, declared by the plugin that registers it (permissions key
            on it, never on the tool's name; :mod:`veil.core.safety.permissions`):
            ``"read"``: it only reads (files, the store) and changes nothing, so it is never
            asked, like veil's ``read``; ``"memory"``: it reads or changes only veil's own
            memory (the store's context items and the agent's files under ``.veil/memory/``),
            never asked when one of veil's own plugins registers it (any other plugin's such
            tool asks: veil cannot vouch for what it writes); ``"change"`` (the default):
            anything else (files, the shell, the network), asked under ``permissions.mode``.
        loads_pointers: the tool loads an evicted item back whole when called with the
            handle a pointer shows (``#17``, or an item id) as its first argument: the
            pointer texts the core writes in the prompt (an oversized message's head and
            tail, the last resort's cuts) and its warnings name this tool, and only while
            the model is offered it (default plugin ``veil.memory_tools`` declares it on its
            hydrate tool). At most one registered tool may declare it; with none, pointers
            say the rest is not shown and name no tool.
        plugin: name of the plugin that registered it (filled in by the core).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    effect: ToolEffect = "change"
    loads_pointers: bool = False
    plugin: str = "veil.core"

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI ``tools`` entry: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class PromptSection:
    """A part of the system prompt contributed by a plugin.

    Attributes:
        name: short heading (``"memory"``, ``"manifest"``, ``"convergence"``).
        text: the section's text (Markdown).
        order: lower comes first; the core's base prompt is 0, memory 100, manifest 900.
        volatile: the text may change from one model call to the next (counts, warnings). A
            volatile section is not put in the system message, which must stay byte-identical
            so that provider prompt caches and llama.cpp's KV cache are reused (DESIGN.md "The
            prompt's prefix stays put"): it goes into the short context note sent after the
            conversation (:func:`veil.core.prompt.context.build_prompt`). A stable section (the
            default) must keep its text for the whole session.
        anchored: a volatile section whose text may stay as it was at the last change moment
            (an eviction pass, a masking block, a compaction): the manifest's counts. It is
            sent in the anchored context note, which keeps its place in the conversation (and
            so its cached prefix) until the next change moment, when it is refreshed at the
            end. Other volatile sections (warnings) are sent after everything, at every call.
    """

    name: str
    text: str
    order: int = 500
    volatile: bool = False
    anchored: bool = False


@dataclass
class RenderEvent:
    """An event for front ends to show.

    Attributes:
        kind: ``"token"``, ``"assistant"``, ``"tool_call"``, ``"tool_result"``, ``"eviction"``,
            ``"compaction"``, ``"warning"``, ``"halt"``, ``"info"``, ``"error"``,
            ``"model_call"`` (a model call starts: ``model``, ``promptTokens`` as veil counted
            them, ``contextWindow``) or ``"usage"`` (it answered: ``model``, ``promptTokens``,
            ``completionTokens``, ``cachedTokens`` (None when the provider did not say),
            ``estimated``, ``contextWindow``).
        session_id: the session it concerns (None for global events).
        data: kind-specific fields (``text``, ``name``, ``arguments``, ``items``, ``level``...).
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None


@dataclass
class RouteRequest:
    """A framework-neutral HTTP request handed to a route handler a plugin registers.

    Attributes:
        method: ``GET``, ``PUT``...
        path_params: values of ``{name}`` parts of the route path.
        query: query-string parameters (last value wins).
        body: the raw request body in bytes.
        json: the body parsed as JSON when it was JSON, else None.
        veil: the :class:`veil.core.app.Veil` the server runs on.
    """

    method: str
    path_params: dict[str, str]
    query: dict[str, str]
    body: bytes
    veil: Any
    json: Any = None


@dataclass
class RouteResponse:
    """What a route handler returns: ``body`` is JSON-encoded unless it is ``str``/``bytes``."""

    body: Any
    status: int = 200
    content_type: str = "application/json"


RouteHandler = Callable[[RouteRequest], "RouteResponse | Awaitable[RouteResponse]"]
"""An HTTP route's function (:attr:`Route.handler`): a :class:`RouteRequest` in, a
:class:`RouteResponse` out (or an awaitable of one)."""


@dataclass
class Route:
    """An HTTP route a plugin contributes (mounted by the HTTP plugin, described in OpenAPI).

    Attributes:
        path: Starlette-style path, e.g. ``/memory/{file}``.
        method: one HTTP method.
        handler: called with a :class:`RouteRequest`; may raise :class:`VeilError` subclasses.
        summary: one line for the OpenAPI document.
        request_schema: JSON Schema of the body (None: no body; ``{"type": "string"}``: raw text).
        response_schema: JSON Schema of a 2xx body.
        errors: status codes (4xx) the route can answer besides 2xx.
        plugin: filled in by the core.
    """

    path: str
    method: str
    handler: RouteHandler
    summary: str = ""
    request_schema: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = None
    errors: tuple[int, ...] = ()
    plugin: str = ""


@dataclass
class SlashCommand:
    """A ``/command`` for interactive front ends.

    Attributes:
        name: without the slash (``"memory"``).
        help: one line.
        handler: ``handler(session, argument_text) -> str | None``; the text is shown to the user.
    """

    name: str
    help: str
    handler: Callable[[Session, str], str | None]
    plugin: str = ""


@dataclass
class Attempt:
    """One attempt against the current goal (seed 002, convergence).

    Attributes:
        step: step number; tool: tool name; action: command or short description;
        target: file or test concerned; outcome: pass/fail/partial/uncertain;
        fingerprint: normalised error fingerprint, or None when there was no error.
    """

    step: int
    tool: str
    action: str
    target: str | None
    outcome: str
    fingerprint: str | None = None


@dataclass
class Summary:
    """The answer of ``summarise``: the text that stands for the folded messages.

    Attributes:
        text: the summary, merged with the previous one when there was one; the core refuses
            it when it holds no visible character or would not make the prompt smaller.
        calls: model calls it took (reported as ``summaryCalls`` in the ``compaction``
            event); 0 for a summariser that calls no model.
    """

    text: str
    calls: int = 1


@dataclass(frozen=True)
class CompactionPlan:
    """The answer of ``plan_compaction``: how many of the messages offered are folded.

    The core offers what the prompt holds of the history after the current summary (oldest
    first, no system prompt); ``messages[:fold]`` go into the summary and ``messages[fold:]``
    stay. The core carries the cut back to the stored history (the new ``compact_size``),
    fires ``before_compaction`` and ``summarise`` with ``messages[:fold]``, checks and stores
    the summary.

    Attributes:
        fold: messages folded, in ``[0, len(messages)]``; 0 folds nothing (automatic
            compaction does not run; a manual one answers "already up to date"). It must not
            separate a tool call from its results: ``messages[fold]`` (when there is one) is
            not a tool result, else the answer is
            :class:`~veil.core.errors.PluginResultInvalid`.
    """

    fold: int


@dataclass
class CompactResult:
    """What a compaction did (:mod:`veil.core.prompt.compaction`).

    ``messages``: for automatic full compaction, the kept messages sent after the summary
    (None for defaultCompaction). The other fields follow seed 000's response:
    ``compacted_count``, ``new_size`` (the new ``compactSize``), ``already_up_to_date``; then
    the summary stored and the tokens of summary + messages sent before and after.
    """

    messages: list[Message] | None = None
    compacted_count: int = 0
    new_size: int = 0
    already_up_to_date: bool = False
    summary: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


@dataclass
class ItemScores:
    """Retention scores of a session's live items, for front ends (``/context``, the HTTP
    context route): :meth:`veil.core.app.Veil.score_items`.

    Attributes:
        scorer: name of the plugin whose ``score`` answers (the first in pluggy's call order).
        items: the items scored, in the order of ``scores``.
        scores: one float in [0, 1] per item (higher = keep), or None when no ``score``
            implementation answered.
        signals: ``{signal name: one float per item}`` from the answering scorer's own
            ``score_signals`` (another plugin's signals would sit beside scores they did not
            make); empty when it explains nothing.
        task_tags: the task tags the items were scored against.
        now: the time they were scored at (Unix seconds).
    """

    scorer: str
    items: list[ContextItem]
    scores: list[float] | None
    signals: dict[str, list[float]] = field(default_factory=dict)
    task_tags: frozenset[str] = frozenset()
    now: float = 0.0


@dataclass
class RecallHit:
    """A candidate returned by ``recall``: ``score`` in [0, 1], higher is better."""

    id: str
    content: str
    score: float
    source: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvictionPlan:
    """The answer of ``evict``: which item ids leave the prompt, and to which tier.

    Attributes:
        to_warm: ids moved from live to the warm cache (content replaced by a pointer).
        to_cold: ids moved to cold storage.
        to_live: ids of this session's evicted (warm) items brought back into the prompt: a
            policy that re-selects the working set pages them in (their stubs go away).
        reasons: id -> short reason (``"stale"``, ``"low score"``, ``"over budget"``...).
        threshold: the pressure threshold the policy used, in [0, 1].
        report: human-readable notes (e.g. protected items replaced because of the hard budget).
        excerpts: id -> 0-based line numbers of the item's content the prompt keeps showing
            (ascending; an *excerpt*, the third level between whole and pointer stub), for
            items of ``to_warm`` and for items already out of the prompt (warm) whose shown
            lines change; an empty tuple turns an excerpt back into a plain stub. Items of
            ``to_warm`` without an entry get a plain stub. Line numbers past the content's
            last line are ignored.
    """

    to_warm: list[str] = field(default_factory=list)
    to_cold: list[str] = field(default_factory=list)
    to_live: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    threshold: float | None = None
    report: list[str] = field(default_factory=list)
    excerpts: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class EvictionOutcome:
    """What applying an :class:`EvictionPlan` changed (:meth:`Session.apply_eviction_plan
    <veil.core.session.Session.apply_eviction_plan>`), as counts the prompt builder reads and
    notes for front ends; the builder never reads the notes' text.

    Attributes:
        evicted: items that left the prompt (to the warm or cold tier).
        paged_in: items brought back into the prompt (``EvictionPlan.to_live``).
        excerpted: warm items whose shown lines changed.
        notes: lines for front ends (``evicted 3 item(s)``...), then the plan's ``report``.
    """

    evicted: int = 0
    paged_in: int = 0
    excerpted: int = 0
    notes: tuple[str, ...] = ()

    @property
    def moved(self) -> bool:
        """Whether an item left the prompt or came back into it (the prompt changed size)."""
        return bool(self.evicted or self.paged_in)


class LazyScores(Sequence[float]):
    """Retention scores computed on first read: what the ``evict`` hook receives as ``scores``.

    An eviction policy that finds no pressure returns before reading them, so an idle pass (most
    tool calls) costs no scoring. Reading it in any way (``len`` excepted: that is the number of
    items), ``np.asarray(scores)`` included, runs ``compute`` once and keeps the result.

    Args:
        compute: returns the scores, one float in [0, 1] per item (the ``score`` hook's answer).
        size: the number of items.

    Raises:
        ValueError: on first read, when ``compute`` returns None (no scorer answered).
    """

    def __init__(self, compute: Callable[[], Any], size: int) -> None:
        self._compute = compute
        self._size = size
        self._values: Any = None

    @property
    def computed(self) -> bool:
        """Whether the scores were read (and so computed) already."""
        return self._values is not None

    def values(self) -> Any:
        """The scores (computed now if they were not yet)."""
        if self._values is None:
            values = self._compute()
            if values is None:
                raise ValueError("scores: no score implementation answered")
            self._values = values
        return self._values

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        return self.values()[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self.values())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        return np.asarray(self.values(), dtype=dtype)
