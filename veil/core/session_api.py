"""What a plugin may read from the session it is handed: :class:`PluginSession`.

Hooks (:mod:`veil.hookspecs`), tool handlers (``ToolContext.session``) and slash commands
receive veil's :class:`~veil.core.session.Session`; this Protocol is the part of it that plugins
may rely on. Anything else on ``Session`` (its ``_``-prefixed fields, the stubs, the page-in
bookkeeping, ``apply_eviction``...) is the core's and may change without notice.

``tests/test_session_api.py`` reads every plugin in ``plugins/*/`` and ``veil/default_plugins/``
and fails when one uses a ``session.<name>`` this Protocol does not declare, and when
``Session`` stops providing a declared member: a new need is added here first, on purpose.

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
    from veil.core.app import Veil
    from veil.core.prompt.items import ItemBatch
    from veil.core.settings import Config
    from veil.core.types import Message

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

    def count_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens of ``messages``: content plus tool-call names and arguments plus
        4 tokens of overhead per message, with the main model's tokenizer (cached)."""

    # -- context items ----------------------------------------------------------------------

    @property
    def live_items(self) -> ItemBatch:
        """The context items now in the prompt (read-only: the core adds and evicts them)."""

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
    def veil(self) -> Veil:
        """The application (:class:`~veil.core.app.Veil`): its model access (``llm``),
        ``recall``, ``tiers``, ``score_items``, ``compact``... ``pm.hook.NAME(...)`` fires a
        hook (``assert_fact``: have a fact kept as a belief); its ``store`` and the rest of the
        plugin manager ``pm`` are the core's, not plugin API (read-only)."""
