"""The :class:`Veil` object: one open project (config, plugins, store, models, tools).

Front ends (REPL, ``veil -p``, HTTP) call this object, never a plugin directly.
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from veil.core import plugins as plugin_mod
from veil.core.errors import (
    AgentNotFound,
    BadRequest,
    CompactionDisabled,
    ConfigError,
    NotAvailable,
    PluginResultInvalid,
    SessionNotFound,
    VeilError,
)
from veil.core.plugin_settings import check_loaded_with
from veil.core.safety.paths import (
    append_bytes_nofollow,
    create_exclusive,
    read_bytes_nofollow,
    veil_file,
)
from veil.core.session_locks import SessionLocks
from veil.core.settings import Config, load_config, validate_agent_name
from veil.core.store import Store, plugin_tables
from veil.core.types import (
    TIERS,
    TOOL_EFFECTS,
    ContextItem,
    ItemScores,
    RecallHit,
    RenderEvent,
    SlashCommand,
    Tool,
    new_id,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.loop import TurnResult
    from veil.core.models.llm import LLM
    from veil.core.session import Session

VEIL_GITIGNORE = "context.db\ncontext.db-*\nauth.json\n*.lock\nmemory-provenance\nhistory\nproxy/\n"
"""What ``.veil/.gitignore`` holds: local state a commit must not carry (the store, the project's
credentials, locks, the record of what veil wrote to memory files, the REPL history, the
proxy's map from client conversations to sessions)."""


_GITIGNORE_ADDED = ("memory-provenance", "history", "proxy/")
"""Lines newer than the first ``.veil/.gitignore`` veil wrote: added to an existing file that
lacks them (the others are left as the project keeps them)."""


def ensure_gitignore(project_dir: Path) -> None:
    """Create ``.veil/.gitignore`` (:data:`VEIL_GITIGNORE`) when missing; to an existing one,
    append the lines of :data:`_GITIGNORE_ADDED` it lacks (projects made by an older veil).

    Raises:
        UnsafeVeilPath: ``.veil/.gitignore`` is a symbolic link or not a regular file.
    """
    path = veil_file(project_dir, ".gitignore")
    if create_exclusive(path, VEIL_GITIGNORE.encode("utf-8")):
        return
    data = read_bytes_nofollow(path) or b""
    present = {line.strip() for line in data.decode("utf-8", "replace").splitlines()}
    missing = [line for line in _GITIGNORE_ADDED if line not in present]
    if missing:
        lead = b"" if not data or data.endswith(b"\n") else b"\n"
        append_bytes_nofollow(path, lead + "".join(f"{m}\n" for m in missing).encode(), 0o644)


class Unchanged(enum.Enum):
    """The default of :meth:`Veil.update_session`'s fields, ``Unchanged.KEEP``: leave the field
    as it is (None is a value those fields take, so it cannot mean "not given")."""

    KEEP = enum.auto()


class Veil:
    """An open project.

    Args:
        config: the validated configuration.
        pm: a plugin manager with plugins loaded (see :func:`open_veil`).
        llm: model access; default :class:`veil.core.models.llm.LLM` over ``config`` (created lazily).
        db_path: the store; default ``store.url`` when set (PostgreSQL), else
            ``<project>/.veil/context.db``.
        keep_going: a plugin whose registration hook (``register_tools``,
            ``register_migrations``) fails is recorded in :attr:`plugin_problems` and left
            without tools or tables instead of stopping the open
            (``veil plugins``, which must list the broken plugin); None there otherwise.

    Raises:
        ConfigError: an agent.json is invalid, two plugins register the same tool name, or
            the plugins' table migrations are refused
            (:meth:`veil.core.store.Store.migrate_plugins`).
        PluginHookFailed: a plugin's ``register_tools`` or ``register_migrations`` raised or
            (PluginResultInvalid) returned the wrong type, unless ``keep_going``.
    """

    def __init__(
        self,
        config: Config,
        pm: pluggy.PluginManager,
        *,
        llm: LLM | None = None,
        db_path: str | Path | None = None,
        keep_going: bool = False,
    ) -> None:
        self.config = config
        self.pm = pm
        self._llm = llm
        self._llm_lock = threading.Lock()
        store_url = config.settings.store.url
        self.plugin_problems: dict[str, str] | None = {} if keep_going else None
        # the plugins' own tables, applied by the store at open (register_migrations)
        migrations = plugin_tables.collect(pm, self.plugin_problems)
        if db_path is None and store_url is not None:
            # a shared PostgreSQL store: rows under this project's name, locks in the database
            self.store = Store(
                store_url.get_secret_value(),
                project=config.settings.store.project_name(config.project_dir),
                pool_size=config.settings.store.pool_size,
                synchronous_commit=config.settings.store.synchronous_commit,
                migrations=migrations,
            )
            self.session_locks = SessionLocks.in_database(self.store)
        else:
            if db_path is None:
                veil_file(config.project_dir)  # .veil itself must not be a symbolic link
                config.veil_dir.mkdir(parents=True, exist_ok=True)
                ensure_gitignore(config.project_dir)
                db_path = veil_file(config.project_dir, "context.db")
            self.store = Store(db_path, migrations=migrations)
            self.session_locks = SessionLocks(db_path)
        self.tools: dict[str, Tool] = self._collect_tools(self.plugin_problems)
        self._turn_queues: dict[str, threading.Lock] = {}
        # sessions front ends hold open, so core operations (compact) act on the same object
        self._live: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()

    # -- set-up -----------------------------------------------------------------------------

    def _collect_tools(self, problems: dict[str, str] | None = None) -> dict[str, Tool]:
        """Every plugin's ``register_tools``, by tool name (each tool's ``plugin`` set).

        Args:
            problems: when given, a plugin whose ``register_tools`` raises or returns
                something other than a list of :class:`~veil.core.types.Tool` is recorded here
                (plugin name -> the one-line error) and its tools left out, instead of raising
                (``veil plugins`` lists every plugin, the broken one marked).

        Raises:
            PluginHookFailed: without ``problems``, a plugin's ``register_tools`` raised;
                PluginResultInvalid: it returned the wrong type, or a tool whose ``effect`` is
                not one of :data:`~veil.core.types.TOOL_EFFECTS` or whose ``loads_pointers``
                is not a bool (both name the plugin).
            ConfigError: two plugins register the same tool name, or two tools declare
                ``loads_pointers`` (the pointer texts name one).
        """
        from veil.core.errors import PluginHookFailed

        tools: dict[str, Tool] = {}
        for impl in reversed(self.pm.hook.register_tools.get_hookimpls()):
            plugin_name = self.pm.get_name(impl.plugin)
            try:
                result = plugin_mod.call_impl(impl, "register_tools", veil=self)
                found = plugin_mod.checked_list(
                    plugin_name, "register_tools", result, Tool, "a list of veil.core.types.Tool"
                )
                _check_effects(plugin_name, found)
            except PluginHookFailed as exc:
                if problems is None:
                    raise
                problems[exc.plugin] = exc.message
                continue
            for tool in found:
                if tool.name in tools:
                    raise ConfigError(
                        f"tool {tool.name!r} is registered by both {tools[tool.name].plugin!r} "
                        f"and {plugin_name!r}; disable one of the plugins"
                    )
                tool.plugin = plugin_name
                tools[tool.name] = tool
        loaders = [t for t in tools.values() if t.loads_pointers]
        if len(loaders) > 1:
            raise ConfigError(
                "tools "
                + " and ".join(f"{t.name!r} (plugin {t.plugin!r})" for t in loaders)
                + " both declare loads_pointers; pointers name one tool: disable one of the "
                "plugins"
            )
        return tools

    @property
    def redactor(self) -> Any:
        """The :class:`veil.core.safety.redaction.Redactor` every message, capture event, memory
        write and summary passes through before it is stored (``security.redactSecrets``)."""
        return self.config.redactor

    @property
    def llm(self) -> LLM:
        """Model access (litellm, or a local model this project's plugins register), created on
        first use."""
        if self._llm is None:
            with self._llm_lock:
                if self._llm is None:
                    from veil.core.models.llm import LLM, local_models_of

                    self._llm = LLM(self.config, local_models=local_models_of(self.pm, self.config))
        return self._llm

    @property
    def tiers(self) -> Any:
        """The warm and cold tiers and the project's embedder (:class:`veil.core.tiers.Tiers`),
        created on first use (no embedding model is loaded until something embeds). Searching
        them is the default plugin ``veil.recall``'s."""
        with self._llm_lock:
            if getattr(self, "_tiers", None) is None:
                from veil.core.tiers import Tiers

                self._tiers = Tiers(self)
        return self._tiers

    @property
    def shared_files(self) -> Any:
        """The project's files in its shared store (:class:`veil.core.shared_files.SharedFiles`:
        the memory files, with a PostgreSQL store), or None with SQLite (they live on disk)."""
        if self.store.engine != "postgresql":
            return None
        with self._llm_lock:
            if getattr(self, "_shared_files", None) is None:
                from veil.core.shared_files import SharedFiles

                self._shared_files = SharedFiles(self.store)
        return self._shared_files

    @property
    def context_layer_on(self) -> bool:
        """Whether a scorer and an eviction policy are loaded (else nothing is evicted)."""
        return plugin_mod.has_impl(self.pm, "score") and plugin_mod.has_impl(self.pm, "evict")

    def score_items(
        self, session: Session, items: Sequence[ContextItem] | None = None
    ) -> ItemScores | None:
        """Score live items the way the loop does before a model call, with the signals behind
        each score, for front ends (REPL ``/context``, ``GET /sessions/{id}/context``).

        Args:
            session: the session the items belong to.
            items: the items to score (default: ``session.live_items``).

        Returns:
            An :class:`~veil.core.types.ItemScores`: the answering scorer's scores (the
            ``score`` hook, firstresult) and its own ``score_signals``, against the session's
            task tags (when the session has none yet, e.g. just loaded: the tags the capture
            reported for the latest user message's item) at ``session.clock()``. None when no plugin implements ``score``.
            The scorer is not called for an empty list.

        Raises:
            PluginResultInvalid: the scorer's ``score`` answered something other than one
                number in [0, 1] per item, or its ``score_signals`` something other than a
                dict (naming it). PluginHookFailed: the scorer raised.
        """
        from veil.core.prompt.items import (
            ItemBatch,  # numpy: not loaded for commands that never score
        )

        scorer = _answering_plugin(self.pm, "score")
        if scorer is None:
            return None
        # the live batch itself: its cached columns serve the scorer as they serve the loop
        batch = session.live_items if items is None else ItemBatch(items)
        tags = session.task_tags or _latest_request_tags(session)
        now = session.clock()
        out = ItemScores(self.pm.get_name(scorer), list(batch), [], {}, tags, now)
        if not batch:
            return out
        args = {"session": session, "items": batch, "task_tags": tags, "now": now}
        raw = self.pm.hook.score(**args)
        if raw is None:
            out.scores = None
            return out
        checked = plugin_mod.checked_scores(lambda: self.pm.get_name(scorer), raw, len(batch))
        out.scores = [float(v) for v in checked]
        for impl in self.pm.hook.score_signals.get_hookimpls():
            if impl.plugin is scorer:
                explained = plugin_mod.call_impl(impl, "score_signals", **args) or {}
                if not isinstance(explained, Mapping):
                    raise PluginResultInvalid(
                        self.pm.get_name(scorer),
                        "score_signals",
                        type(explained).__name__,
                        "a dict of signal name -> scores, or None",
                    )
                out.signals = {
                    name: [float(v) for v in values] for name, values in explained.items()
                }
        return out

    def describe(self) -> dict[str, Any]:
        """What is loaded: see :func:`veil.core.plugins.describe_plugins`, plus the tools."""
        out = plugin_mod.describe_plugins(self.pm, self.plugin_problems or {})
        out["tools"] = {name: tool.plugin for name, tool in sorted(self.tools.items())}
        return out

    # -- sessions ---------------------------------------------------------------------------

    def new_session(self, agent: str | None = None, model: str | None = None) -> Session:
        """Create a session for ``agent`` (default: settings ``defaultAgent``), snapshotting the
        agent's config (seed 000). ``model`` overrides agent.json's model for this session.

        Raises:
            ConfigError: the agent's agent.json is invalid; UnsafePath: bad agent name;
            AgentNotFound: ``agent`` is not the default agent and has no ``.veil/agents/<name>/``;
            BadRequest: ``model`` looks like a credential (:meth:`check_model_name`).
        """
        from veil.core.session import Session

        if model is not None:
            self.check_model_name(model)
        default = self.config.settings.default_agent
        agent = validate_agent_name(agent or default)
        folder = self.config.agent_file(agent).parent
        if agent != default and not folder.is_dir():
            agents = sorted(p.name for p in folder.parent.glob("*") if p.is_dir())
            known = ", ".join(dict.fromkeys([default, *agents]))
            raise AgentNotFound(f"agent {agent!r} not found: no {folder} (agents here: {known})")
        snapshot = self.agent_snapshot(agent)
        row = self.store.create_session(
            new_id("sess"), agent, model or snapshot.get("model"), snapshot
        )
        session = Session(self, row, resumed=False)
        self._live[session.id] = session
        self.pm.hook.session_start(session=session)
        return session

    def check_model_name(self, model: str, field: str = "model") -> None:
        """Refuse a model name that is a credential: a key pasted where a model goes would be
        stored in the session's ``model`` column and sent in every request, and a key is never
        a model name. It is one when a credential format matches it or it holds a secret veil
        knows, whatever ``security.redactSecrets`` says
        (:func:`veil.core.safety.redaction.is_credential`; the settings files and agent.json
        refuse one with the same test when they are loaded).

        Raises:
            BadRequest: naming ``field``, without the value.
        """
        from veil.core.safety.redaction import NOT_A_MODEL_NAME, is_credential

        if is_credential(model, self.redactor):
            raise BadRequest(f"{field}: {NOT_A_MODEL_NAME}")

    def agent_snapshot(self, agent: str) -> dict[str, Any]:
        """The agent's configuration as a session snapshots it at creation (seed 000): agent.json
        with its defaults, plus the agent's ``memory`` settings, as JSON-safe camelCase.

        Raises:
            ConfigError: the agent's agent.json is invalid."""
        snapshot = self.config.agent(agent).model_dump(mode="json", by_alias=True)
        snapshot["memory"] = self.config.memory_for(agent).model_dump(mode="json", by_alias=True)
        return snapshot

    def load_session(self, session_id: str) -> Session:
        """Resume a stored session. Rows of it that are damaged in the store are left out, each
        named in ``session.load_warnings`` (see :meth:`veil.core.store.Store.load_session`).

        Raises:
            SessionNotFound: no session with that id."""
        from veil.core.session import Session

        stored = self.store.load_session(session_id)
        warnings = list(stored.problems)
        if "snapshot" in stored.row["damaged"]:
            # the agent's configuration of today stands in for the one snapshotted at creation
            try:
                stored.row["snapshot"] = self.agent_snapshot(stored.row["agent"])
            except (VeilError, TypeError, ValueError) as exc:  # a damaged agent name too
                warnings.append(f"session {session_id}: agent configuration unusable: {exc}")
            warnings.append(
                f"session {session_id}: its configuration snapshot is damaged; the agent "
                f"{stored.row['agent']!r}'s current agent.json is used instead"
            )
        session = Session(
            self, stored.row, resumed=True, history=stored.messages, load_warnings=warnings
        )
        self._live[session.id] = session
        self.pm.hook.session_start(session=session)
        return session

    def live_session(self, session_id: str) -> Session:
        """The session object a front end already holds for ``session_id``, else a fresh load.

        Raises:
            SessionNotFound: no such session.
        """
        session = self._live.get(session_id)
        return session if session is not None else self.load_session(session_id)

    def last_session_id(self, problems: list[str] | None = None) -> str | None:
        """Id of the most recently updated open session, or None. Damaged session rows are
        passed over, each named in ``problems`` when given."""
        for row in self.store.list_sessions(limit=50, problems=problems):
            if row["closed_at"] is None:
                return row["id"]
        return None

    def list_sessions(
        self, limit: int = 50, problems: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Stored sessions, most recent first (rows without snapshot and state). Damaged rows
        are left out, each named in ``problems`` when given (see
        :meth:`veil.core.store.Store.list_sessions`)."""
        return self.store.list_sessions(limit, problems)

    def close_session(self, session: Session) -> None:
        """Close a session (kept in the store, read-only from now on).

        Raises:
            SessionBusy: another process is changing the session (nothing is changed)."""
        import time

        if not session.closed:
            with self.session_locks.hold(session.id, "closing it"):
                session.closed_at = time.time()
                self.store.update_session(session.id, closed_at=session.closed_at)

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its messages and items, under its lock (the event log is
        append-only and keeps its entries). The session is closed first, so a process that
        still holds it open cannot write to it after the delete.

        Raises:
            SessionNotFound: no session with that id.
            SessionBusy: another process is changing the session (nothing is deleted).
        """
        with self.session_lock(session_id):
            self.close_session(self.load_session(session_id))
            self.store.delete_session(session_id)

    def session_is_closed(self, session_id: str) -> bool:
        """Whether a stored session is closed (read-only), from its row alone: cheaper than
        :meth:`load_session`, which reads every message.

        Raises:
            SessionNotFound: no session with that id.
        """
        return self.store.get_session(session_id)["closed_at"] is not None

    def update_session(
        self,
        session: Session,
        *,
        title: str | None | Unchanged = Unchanged.KEEP,
        model: str | None | Unchanged = Unchanged.KEEP,
    ) -> None:
        """Set a session's ``title`` and/or ``model`` on the held object and in its stored row,
        in one write (the REPL's ``/model``, the MCP server's session title). Neither is part of
        the session's versioned content, so no other process's copy goes stale.

        Args:
            session: the session to change.
            title: the new title (None: no title); left as it is when not given.
            model: the new model name (None: the configured ``main`` model); left as it is
                when not given.

        Raises:
            BadRequest: ``model`` looks like a credential (:meth:`check_model_name`; nothing is
            changed); SessionNotFound: the session is not in the store.
        """
        fields: dict[str, str | None] = {}
        if not isinstance(title, Unchanged):
            fields["title"] = title
        if not isinstance(model, Unchanged):
            if model is not None:
                self.check_model_name(model)
            fields["model"] = model
        if not fields:
            return
        self.store.update_session(session.id, **fields)
        if "title" in fields:
            session.title = fields["title"]
        if "model" in fields:
            session.model = fields["model"]

    # -- what the store holds of a session, for plugins --------------------------------------

    def stored_items(self, session_id: str, tiers: Sequence[str] = ("live",)) -> list[ContextItem]:
        """A session's context items in the given tiers as the store holds them, in the order
        they were added. A cold item's ``content`` is the store's preview (its whole text is
        ``tiers.content(item.id)``); moves queued by the write-behind are not seen until they
        commit.

        Args:
            session_id: the session; an unknown id has no items.
            tiers: any of ``"live"``, ``"warm"``, ``"cold"`` (DESIGN.md "Tiers").

        Raises:
            ValueError: a tier name that is not one of those three (named).
        """
        unknown = [t for t in tiers if t not in TIERS]
        if unknown:
            raise ValueError(f"tiers: unknown tier {unknown[0]!r} (one of {', '.join(TIERS)})")
        return self.store.items(session_id, tuple(tiers))

    def stored_item(self, session_id: str, item_id: str) -> ContextItem | None:
        """One of a session's context items by id as the store holds it (any tier), or None
        when no item has that id or it belongs to another session (so one session's id never
        reaches another's item)."""
        item = self.store.get_item(item_id)
        return item if item is not None and item.session_id == session_id else None

    def tier_counts(self, session_id: str) -> dict[str, int]:
        """``{"live": n, "warm": n, "cold": n}``: how many of a session's context items each
        tier holds, moves still queued by the write-behind included (without waiting for them:
        the manifest asks right after an eviction pass). An unknown id counts zeros."""
        return self.store.tier_counts(session_id)

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
        """Record one model call's usage in the store's ``usage`` table (what ``veil usage``
        sums), stamped with the wall clock.

        Args:
            session_id: the session the call served, or None (a call outside any session).
            role: the model role or front end that made the call (``main``, ``compact``,
                ``proxy``...).
            model: the model name the call went to.
            provider: the provider that answered it.
            prompt_tokens: the call's prompt tokens, as the provider reported them.
            completion_tokens: the call's completion tokens, as the provider reported them.
            seconds: how long the call took, in seconds.
        """
        self.store.record_usage(
            session_id,
            {
                "role": role,
                "model": model,
                "provider": provider,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "seconds": seconds,
            },
        )

    def last_usage(self, session_id: str) -> dict[str, Any] | None:
        """The usage stored with the session's latest answer: ``prompt_tokens``,
        ``completion_tokens`` (tokens), and ``cached_tokens`` / ``estimated`` when recorded; None
        when no answer has usage or its stored row is damaged (a front end then shows no
        figure)."""
        return self.store.last_usage(session_id)

    @contextmanager
    def session_lock(self, session_id: str) -> Iterator[None]:
        """Hold a session for a change, for front ends that serve many callers: callers in this
        process queue on an in-process lock (their requests run one after the other), then the
        holder takes the session's cross-process lock (:mod:`veil.core.session_locks`).

        Raises:
            SessionNotFound: no session with that id is stored (checked first, so an unknown id
                leaves no lock file and no queue behind, and an id too long for a file name
                gets the same answer as any unknown one).
            SessionBusy: another process is changing the session (raised before the block runs).
        """
        if not self.store.has_session(session_id):
            raise SessionNotFound(f"no session with id {session_id!r}")
        queue = self._turn_queues.setdefault(session_id, threading.Lock())
        with queue, self.session_locks.hold(session_id):
            yield

    # -- turns ------------------------------------------------------------------------------

    def prepare(self, model: str | None = None) -> None:
        """Load now what the first turn would load on its way to the model, so that it waits
        for nothing: the agent loop's modules, and what the main model (or ``model``, a
        session's) needs for its first call (:meth:`veil.core.models.llm.LiteLLMModel.prepare`:
        litellm only where a call goes through it, the tokenizer). ``veil serve`` and ``veil
        proxy`` call it before they report ready, the REPL on a loader thread while the user
        types. A model that cannot be resolved is left for the first turn to report."""
        from veil.core import loop  # noqa: F401 - prompt assembly, the tools' dispatch
        from veil.core.prompt import items  # noqa: F401 - the live items' batch (numpy)

        try:
            chosen = self.llm.model_for("main", model)
        except VeilError:
            return
        prepare = getattr(chosen, "prepare", None)  # a local or scripted model has none
        if callable(prepare):
            prepare()

    def run_turn(self, session: Session, text: str, **kwargs: Any) -> TurnResult:
        """Answer one user message with the agent loop (see :func:`veil.core.loop.run_turn`)."""
        from veil.core.loop import run_turn

        return run_turn(session, text, **kwargs)

    def compact(self, session_id: str, instructions: str | None = None) -> dict[str, Any]:
        """Run seed 000's defaultCompaction on a session (:func:`veil.core.prompt.compaction.run_default`:
        the core folds, the ``summarise`` hook writes the summary, the core stores it).

        Returns:
            ``{"sessionId", "compactedCount", "newSize", "alreadyUpToDate", "session"}``.

        Raises:
            SessionNotFound: no such session (seed 000's error code).
            SessionClosed: the session is closed (seed 000's error code).
            CompactionDisabled: the session's ``defaultCompaction`` is off (seed 000's code).
            CompactionRejected: the summary would not shrink the prompt, nothing changed
                (issue 19).
            NotAvailable: no plugin implements ``summarise``.
            SessionBusy: another process is changing the session.
            SessionConflict: the held copy of the session is older than the store's (another
                process changed it since it was loaded).
        """
        from veil.core.prompt import compaction

        session = self.live_session(session_id)
        with self.session_locks.hold(session_id, "a compaction"):
            session.ensure_current()
            session.ensure_open()
            if not session.snapshot.get("defaultCompaction", {}).get("enabled", True):
                raise CompactionDisabled(
                    f"defaultCompaction is disabled for agent {session.agent!r}"
                )
            if not compaction.can_summarise(session):
                raise NotAvailable("no loaded plugin implements compaction: none answers summarise")
            result = compaction.run_default(session, instructions)
        return {
            "sessionId": session.id,
            "compactedCount": result.compacted_count,
            "newSize": result.new_size,
            "alreadyUpToDate": result.already_up_to_date,
            "session": session.to_dict(),
        }

    def recall(
        self,
        query: str,
        limit: int = 10,
        tags: list[str] | None = None,
        session: Session | None = None,
    ) -> list[RecallHit]:
        """Merge candidates from every ``recall`` implementation, best first (at most ``limit``).

        Duplicates (same id) keep their best score.

        Raises:
            PluginHookFailed: an implementation raised, or (PluginResultInvalid) returned
                something other than a list of :class:`~veil.core.types.RecallHit`.
        """
        best: dict[str, RecallHit] = {}
        answers = plugin_mod.results_by_plugin(
            self.pm, "recall", session=session, query=query, limit=limit, tags=tags
        )
        for plugin, hits in answers:
            expected = "a list of veil.core.types.RecallHit"
            for hit in plugin_mod.checked_list(plugin, "recall", hits, RecallHit, expected):
                if hit.id not in best or hit.score > best[hit.id].score:
                    best[hit.id] = hit
        return sorted(best.values(), key=lambda h: (-h.score, h.id))[:limit]

    def render(self, event: RenderEvent) -> None:
        """Hand an event to every front end's ``render``; a failing front end never breaks a turn."""
        try:
            self.pm.hook.render(event=event)
        except Exception:  # noqa: BLE001 - display problems must not stop the agent
            pass

    def slash_commands(self) -> dict[str, Any]:
        """``{name: SlashCommand}`` from every plugin's ``register_slash_commands``.

        Raises:
            PluginHookFailed: an implementation raised, or (PluginResultInvalid) returned
                something other than a list of :class:`~veil.core.types.SlashCommand`.
        """
        out = {}
        hook = "register_slash_commands"
        for impl in reversed(self.pm.hook.register_slash_commands.get_hookimpls()):
            name = self.pm.get_name(impl.plugin)
            result = plugin_mod.call_impl(impl, hook, veil=self)
            expected = "a list of veil.core.types.SlashCommand"
            for cmd in plugin_mod.checked_list(name, hook, result, SlashCommand, expected):
                cmd.plugin = name
                out.setdefault(cmd.name, cmd)
        return out

    def close(self) -> None:
        """Release the store's connection, once plugins finished their background work on it
        (``before_close`` hook: veil_fsrs' turn embeddings of this app's sessions). A second
        call does nothing (``veil serve`` closes its project, then the CLI closes what it
        opened)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            self.pm.hook.before_close(veil=self)
        finally:
            try:
                self.store.close()
            finally:
                close_locks = getattr(self.session_locks, "close", None)
                if close_locks is not None:  # the database's locks: their connection
                    close_locks()


def _check_effects(plugin: str, tools: list[Tool]) -> None:
    """Refuse a tool whose declared ``effect`` is not one of
    :data:`~veil.core.types.TOOL_EFFECTS` (a misspelt ``"readonly"`` must not pass as
    anything), or whose ``loads_pointers`` is not a bool (a ``"yes"`` must not pass either).

    Raises:
        PluginResultInvalid: naming the plugin, the tool and its declaration.
    """
    for tool in tools:
        if not isinstance(tool.loads_pointers, bool):
            raise PluginResultInvalid(
                plugin,
                "register_tools",
                f"a Tool {tool.name!r} whose loads_pointers is {tool.loads_pointers!r}",
                "loads_pointers True or False",
            )
        if tool.effect not in TOOL_EFFECTS:
            raise PluginResultInvalid(
                plugin,
                "register_tools",
                f"a Tool {tool.name!r} whose effect is {tool.effect!r}",
                "effect "
                + ", ".join(repr(e) for e in TOOL_EFFECTS[:-1])
                + f" or {TOOL_EFFECTS[-1]!r}",
            )


def _answering_plugin(pm: pluggy.PluginManager, hook: str) -> Any | None:
    """The plugin whose implementation of the firstresult ``hook`` pluggy calls first (it calls
    ``get_hookimpls()`` from the last to the first; wrappers do not answer); None without one."""
    impls = [
        i
        for i in getattr(pm.hook, hook).get_hookimpls()
        if not i.hookwrapper and not getattr(i, "wrapper", False)
    ]
    return impls[-1].plugin if impls else None


def _latest_request_tags(session: Session) -> frozenset[str]:
    """The task's tags of a session that holds none in memory (loaded again): those a plugin
    reported (:meth:`~veil.core.session.Session.note_task`) as its state kept them, else the
    tags the ``capture`` hook gave the latest user message's item; empty when no plugin
    reported any. The core extracts no tags itself (issue 33)."""
    from veil.core.session import CORE_STATE_KEY, TASK_TAGS_KEY

    kept = session.state.get(CORE_STATE_KEY, {}).get(TASK_TAGS_KEY)
    if isinstance(kept, list):
        return frozenset(t for t in kept if isinstance(t, str))
    for index in range(len(session.messages) - 1, -1, -1):
        message = session.messages[index]
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            for item in session.live_items:
                if item.message_index == index and item.source == "user":
                    return frozenset(item.tags)
            stored = session.veil.store.item_of_message(session.id, index)
            return frozenset(stored.tags) if stored and stored.source == "user" else frozenset()
    return frozenset()


def open_veil(
    project_dir: str | Path | None = None,
    *,
    disable: tuple[str, ...] | list[str] = (),
    load: list[str] | None = None,
    llm: LLM | None = None,
    use_entry_points: bool = True,
    extra_plugins: tuple[tuple[str, Any], ...] = (),
    db_path: str | Path | None = None,
    config: Config | None = None,
    keep_going: bool = False,
) -> Veil:
    """Load config, plugins and the store of a project and return the :class:`Veil`.

    Args:
        project_dir: project root (default: current directory).
        disable: plugin names blocked from the command line (``--disable-plugin``).
        load: only these entry points load (as ``VEIL_LOAD_PLUGINS``).
        llm: model access to use instead of the configured one (tests: a scripted model).
        use_entry_points: False gives an isolated manager (tests).
        extra_plugins: ``(name, plugin)`` pairs registered after the entry points.
        keep_going: see :class:`Veil` (a failing ``register_tools`` is recorded, not raised).

    Raises:
        ConfigError: naming the file and field.
    """
    if config is None:
        config = load_config(project_dir, plugins=extra_plugins)
    else:
        check_loaded_with(config.settings, extra_plugins)
    selection = plugin_mod.plugin_selection(
        config.settings.plugins.disable,
        load if load is not None else config.settings.plugins.load,
        disable,
    )
    pm = plugin_mod.load_plugins(
        plugin_mod.new_plugin_manager(),
        selection,
        use_entry_points=use_entry_points,
        extra=extra_plugins,
    )
    return Veil(config, pm, llm=llm, db_path=db_path, keep_going=keep_going)
