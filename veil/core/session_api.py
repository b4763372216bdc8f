"""What a plugin may read from the session it is handed (:class:`PluginSession`) and use of the
application object (:class:`PluginVeil`).

Hooks (:mod:`veil.hookspecs`), tool handlers (``ToolContext.session``) and slash commands
receive veil's :class:`~veil.core.session.Session`; this Protocol is the part of it that plugins
may rely on. Anything else on ``Session`` (its ``_``-prefixed fields, the stubs, the page-in
bookkeeping, ``apply_eviction``...) is the core's and may change without notice.

``tests/test_session_api.py`` reads every plugin in ``plugins/*/`` and ``veil/default_plugins/``
and fails when one uses a ``session.<name>`` this Protocol does not declare, and when
``Session`` stops providing a declared member: a new need is added here first, on purpose. The
same holds for the application object (:class:`~veil.core.app.Veil`) reached as
``session.veil``, ``<x>.veil`` or a hook's ``veil`` parameter: :class:`PluginVeil` declares what
a plugin may use of it, and its store is not among it (the store's tables, transactions and
write-behind are the core's; each read or write a plugin needs is a named ``Veil`` method).

Members are declared as read-only properties: a plugin reads them, the core changes them. The
exceptions are the containers a plugin writes into: ``state[<its own key>]`` (persisted by
:meth:`PluginSession.save_state`), the object it keeps with :meth:`PluginSession.plugin_state`
(this process only) and ``snapshot`` (front ends only). Not
``@runtime_checkable``: on Python 3.11 an ``isinstance`` check would evaluate every property,
and ``context_window`` asks the model registry; structural typing is checked statically and by
the test above.

Units: tokens are counted with the session's main model tokenizer; times are Unix seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    import pluggy

    from veil.core.app import Unchanged
    from veil.core.loop import TurnResult
    from veil.core.models.llm import LLM
    from veil.core.prompt.items import ItemBatch
    from veil.core.safety.redaction import Redactor
    from veil.core.session import Session
    from veil.core.settings import Config
    from veil.core.shared_files import SharedFiles
    from veil.core.tiers import Tiers
    from veil.core.types import ContextItem, ItemScores, Message, RecallHit

_T = TypeVar("_T")


class PluginSession(Protocol):
    """The session as a plugin sees it (implemented by :class:`veil.core.session.Session`).

    Groups: identity, messages, context items, the plugin's own state, clock, settings, and
    what a plugin may ask of the core (events, halting, the application object).
    """

    # -- identity ---------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session's id, ``sess_...`` (read-only)."""

    @property
    def agent(self) -> str:
        """The agent's name (``default`` unless told); memory files are per agent (read-only)."""

    @property
    def model(self) -> str | None:
        """Model name snapshotted at creation; None means the configured ``main`` model
        (read-only for plugins; the REPL's ``/model`` changes it)."""

    @property
    def title(self) -> str | None:
        """The session's title, or None (read-only for plugins; front ends set it)."""

    @property
    def snapshot(self) -> dict[str, Any]:
        """The agent's config at creation (seed 000): ``defaultCompaction``, ``systemPrompt``...
        Read-only for plugins; the proxy front end records the client's system prompt here."""

    @property
    def resumed(self) -> bool:
        """True when the session was loaded from the store, False when created (read-only)."""

    @property
    def closed(self) -> bool:
        """Whether the session was closed: it can be read, not changed (read-only)."""

    @property
    def load_warnings(self) -> list[str]:
        """Damaged stored rows the load left out or stood in for, one line each (read-only)."""

    def ensure_open(self) -> None:
        """Raise :class:`~veil.core.errors.SessionClosed` when the session is closed."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary for front ends: ``id``, ``agent``, ``model``, ``title``,
        ``createdAt`` (Unix seconds), ``closed``, ``messageCount``, ``compactSize``,
        ``compactSummary``, ``snapshot``."""

    # -- messages ---------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The full history as OpenAI chat messages, never shortened; credentials already
        redacted. Read-only: the core appends (``Session.append``)."""

    @property
    def step(self) -> int:
        """Number of model calls so far (a *step*, DESIGN.md "Turn and step"; read-only)."""

    @property
    def compact_summary(self) -> str | None:
        """The summary standing for ``messages[:compact_size]``, or None (read-only; the core
        stores what ``summarise`` returns)."""

    @property
    def compact_size(self) -> int:
        """How many leading messages ``compact_summary`` replaces in the prompt (read-only)."""

    @property
    def last_prompt_tokens(self) -> int:
        """Tokens of the last prompt veil built, as its builder counted them (0 before the
        first model call of this process; read-only)."""

    @property
    def collapsed_steps(self) -> int:
        """Steps whose turn and tool results all left the prompt (read-only)."""

    @property
    def context_window(self) -> int:
        """Context window of the session's main model, in tokens (read-only)."""

    @property
    def offered_tools(self) -> frozenset[str]:
        """Names of the tools the session's main model is offered (the registered tools; the
        bundled offline model gets only the coding tools). A prompt section names only these:
        with ``veil.memory_tools`` blocked, no ``veil_hydrate`` (read-only)."""

    def count_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens of ``messages``: content plus tool-call names and arguments plus
        4 tokens of overhead per message, with the main model's tokenizer (cached)."""

    # -- context items ----------------------------------------------------------------------

    @property
    def live_items(self) -> ItemBatch:
        """The context items now in the prompt (read-only: the core adds and evicts them)."""

    def note_task(self, tags: list[str]) -> None:
        """The tags a plugin took from the user message that starts the task become the base of
        ``task_tags`` (the ``score`` hook's relevance input). The core extracts none itself:
        the ``capture`` hook reports them (phase ``user``)."""

    def note_turn(self, tags: list[str]) -> None:
        """An assistant turn's tags join the working set that ``task_tags`` (the ``score``
        hook's relevance input) follows: the task's tags plus the last 3 turns'."""

    # -- state a plugin owns under its own key ----------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        """Per-plugin scratch space: a plugin reads and writes only
        ``state.setdefault("<its name>", {})``; JSON-serialisable values persist with
        :meth:`save_state`, others live as long as this process holds the session."""

    def save_state(self) -> None:
        """Persist ``state`` (its JSON-safe part), ``compact_summary`` and ``compact_size``.

        Raises:
            SessionConflict: another process changed the session since it was loaded."""

    @overload
    def plugin_state(self, name: str) -> Any | None: ...

    @overload
    def plugin_state(self, name: str, factory: Callable[[], _T]) -> _T: ...

    def plugin_state(self, name: str, factory: Callable[[], Any] | None = None) -> Any | None:
        """The object plugin ``name`` (its registered name) keeps for this session, for as long
        as this process holds the session; never stored (what must outlive the process goes
        in ``state``). The first call that passes ``factory`` makes it with ``factory()``;
        every later call returns that same object. Without ``factory``: the object, or None
        when the plugin made none (a plugin that is blocked never does).

        A plugin keeps here what it derives from the session and maintains through its hooks
        (veil_fsrs: turn embeddings, identifier mention counts; see
        :mod:`veil_fsrs.session_state`); another plugin reads it only through functions the
        owner documents. Example::

            state = session.plugin_state("veil_x", lambda: XState(session))
        """

    # -- clock ------------------------------------------------------------------------------

    def clock(self) -> float:
        """Now, in Unix seconds; replay gives the recorded time instead of the wall clock."""

    # -- settings ---------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The project's :class:`~veil.core.settings.Config` (``config.settings.<section>``,
        ``config.models``, ``config.redactor``; read-only)."""

    @property
    def cwd(self) -> Path:
        """The project root the tools work in (read-only)."""

    # -- asking the core --------------------------------------------------------------------

    def emit(self, kind: str, **data: Any) -> None:
        """Send a :class:`~veil.core.types.RenderEvent` of ``kind`` (``warning``, ``info``...)
        with ``data`` to every front end (``render`` hook)."""

    def request_halt(self, reason: str) -> None:
        """Ask the agent loop to stop after the current tool batch; ``reason`` is shown."""

    @property
    def veil(self) -> PluginVeil:
        """The application (:class:`~veil.core.app.Veil`), as much of it as :class:`PluginVeil`
        declares: model access (``llm``), ``recall``, ``tiers``, ``score_items``, ``compact``,
        firing a hook (``pm.hook.NAME(...)``)... (read-only)."""


class PluginVeil(Protocol):
    """The application object as a plugin uses it (implemented by :class:`veil.core.app.Veil`).

    A plugin reaches it as ``session.veil``, as the ``veil`` parameter of a hook
    (``register_tools``, ``register_routes``, ``register_slash_commands``, ``run_interactive``,
    ``before_close``) or through an object that holds it. Groups: the project, models and
    tiers, hooks, sessions (front ends drive them), what the store holds of a session, and
    the context layer. The store itself (``Veil.store``) and the session locks
    (``Veil.session_locks``) are not declared: the core owns their transactions.
    """

    # -- the project ------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The project's :class:`~veil.core.settings.Config` (read-only)."""

    @property
    def redactor(self) -> Redactor:
        """The redactor every stored message, memory write and summary passes through."""

    def check_model_name(self, model: str, field: str = "model") -> None:
        """Raise :class:`~veil.core.errors.BadRequest` naming ``field`` when ``model`` looks
        like a credential rather than a model name."""

    # -- models and tiers -------------------------------------------------------------------

    @property
    def llm(self) -> LLM:
        """Model access (``model_for(role, name)``, ``complete``...), created on first use."""

    @property
    def tiers(self) -> Tiers:
        """The warm and cold tiers and the project's embedder, created on first use."""

    @property
    def shared_files(self) -> SharedFiles | None:
        """The project's text files in its shared store
        (:class:`~veil.core.shared_files.SharedFiles`): with a PostgreSQL store
        (``store.url``) the memory files live there; None with SQLite (they are on disk)."""

    # -- hooks ------------------------------------------------------------------------------

    @property
    def pm(self) -> pluggy.PluginManager:
        """The plugin manager, for two uses only: firing a hook (``pm.hook.NAME(...)``, as
        pytest plugins call ``config.hook``: ``assert_fact``, ``attempt_recorded``...) and
        finding a loaded plugin by name (``pm.get_plugin(name)``); registering is the core's."""

    # -- sessions (front ends drive them) ---------------------------------------------------

    def new_session(self, agent: str | None = None, model: str | None = None) -> Session:
        """Create a session for ``agent`` (default agent unless told), ``model`` overriding."""

    def load_session(self, session_id: str) -> Session:
        """Resume a stored session (raises SessionNotFound)."""

    def live_session(self, session_id: str) -> Session:
        """The session object already held for ``session_id`` in this process, else a load."""

    def list_sessions(
        self, limit: int = 50, problems: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Stored sessions, most recent first (damaged rows named in ``problems``)."""

    def update_session(
        self,
        session: Session,
        *,
        title: str | None | Unchanged = ...,
        model: str | None | Unchanged = ...,
    ) -> None:
        """Set a session's ``title`` and/or ``model`` on the object and in the store at once."""

    def close_session(self, session: Session) -> None:
        """Close a session: kept in the store, read-only from then on."""

    def delete_session(self, session_id: str) -> None:
        """Close, then delete a session's row, messages and items under its lock."""

    def session_is_closed(self, session_id: str) -> bool:
        """Whether a stored session is closed, from its row alone."""

    def session_lock(self, session_id: str) -> AbstractContextManager[None]:
        """Hold a session for a change: in-process queue, then its cross-process lock
        (SessionNotFound, and no lock file, for an id that is not stored)."""

    def run_turn(self, session: Session, text: str, **kwargs: Any) -> TurnResult:
        """Answer one user message with the agent loop."""

    def compact(self, session_id: str, instructions: str | None = None) -> dict[str, Any]:
        """Run seed 000's defaultCompaction on a session (``compactedCount``, ``newSize``...)."""

    # -- what the store holds of a session --------------------------------------------------

    def stored_items(self, session_id: str, tiers: Sequence[str] = ("live",)) -> list[ContextItem]:
        """A session's context items in the given tiers, as stored, in the order added."""

    def stored_item(self, session_id: str, item_id: str) -> ContextItem | None:
        """One of the session's items by id (any tier), or None."""

    def tier_counts(self, session_id: str) -> dict[str, int]:
        """``{"live", "warm", "cold"}`` -> items of the session in each, queued moves included."""

    def record_usage(
        self,
        session_id: str | None,
        *,
        role: str,
        model: str | None,
        provider: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        seconds: float,
    ) -> None:
        """Record one model call's usage (tokens, seconds) against a session."""

    def last_usage(self, session_id: str) -> dict[str, Any] | None:
        """The usage stored with the session's latest answer, or None."""

    # -- the context layer ------------------------------------------------------------------

    @property
    def context_layer_on(self) -> bool:
        """Whether a scorer and an eviction policy are loaded (else nothing is evicted)."""

    def score_items(
        self, session: Session, items: Sequence[ContextItem] | None = None
    ) -> ItemScores | None:
        """Score a session's live items as the loop does, with each score's signals."""

    def recall(
        self,
        query: str,
        limit: int = 10,
        tags: list[str] | None = None,
        session: Session | None = None,
    ) -> list[RecallHit]:
        """Search warm and cold items (every ``recall`` implementation), best first."""
