"""Every hook veil's core calls, and what it means (pluggy project name ``"veil"``).

Each hook is documented in one style (``tests/test_hookspecs_style.py`` holds them to it): what
it is for and whether it is *collected* or *firstresult*, when it is called, ``:param:`` for
every argument and ``:return:``. A hook that a plugin fires is declared by that plugin, in its
own ``hookspecs`` module, and handed to the core through :func:`register_hookspecs`:
``register_routes`` (:mod:`veil_http.hookspecs`), ``rebuild_derived``
(:mod:`veil.default_plugins.doctor.hookspecs`), ``replay_report``
(:mod:`veil.default_plugins.replay.hookspecs`) and ``attempt_recorded``
(:mod:`veil_convergence.hookspecs`); a plugin implementing one of those marks it
``@hookimpl(optionalhook=True)``.

A plugin is a module or object with functions marked ``@veil.hookimpl`` whose names are the hook
names below; it may accept any subset of a hook's arguments (pluggy passes them by name). Plugins
are veil's default plugins (:mod:`veil.default_plugins`, registered first) and those found through
the ``veil`` entry-point group (see :mod:`veil.core.plugins`).

Kinds of hook (pluggy's terms):

* *collected*: every implementation runs and the core receives a list of their non-None results,
  in call order (last registered first; ``tryfirst`` / ``trylast`` move an implementation).
* *firstresult*: implementations run in call order until one returns something other than None;
  that value is the answer. Returning None means "not mine, ask the next one". This is how a
  third-party scorer replaces the default one: block ``veil_fsrs`` (``plugins.disable``) or mark
  its own ``score`` with ``tryfirst=True``.

With no ``score`` or no ``evict`` implementation loaded, the context layer is off: nothing is
evicted; veil says so at start, in ``veil plugins`` and in the HTTP health answer.

The order below follows one turn (DESIGN.md "One turn, as data flows").

``session``: hooks receive veil's :class:`~veil.core.session.Session`; a plugin relies only on
what :class:`~veil.core.session_api.PluginSession` declares (``tests/test_session_api.py``
holds the plugins to it). The front-end hooks ``run_interactive`` and ``ask_permission`` are
typed with ``Session`` itself: a front end drives the session (runs its turns, closes it).

``veil``: the application object a hook is handed (or reaches as ``session.veil``); a plugin
uses only what :class:`~veil.core.session_api.PluginVeil` declares, which leaves out the store
(the same test holds the plugins to it).

Retired hooks (:data:`RETIRED_HOOKS`): a plugin that still implements one is refused at load with
an error naming it and what replaced the hook, rather than silently never called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import click

    from veil.core.app import Veil
    from veil.core.models.llm import LocalModel
    from veil.core.prompt.items import ItemBatch
    from veil.core.safety.permissions import PermissionRequest
    from veil.core.session import Session
    from veil.core.session_api import PluginSession, PluginVeil
    from veil.core.settings import Config, SettingsSection
    from veil.core.store.plugin_tables import Migration
    from veil.core.types import (
        CaptureEvent,
        CompactionPlan,
        ContextItem,
        EvictionPlan,
        Message,
        PromptSection,
        RecallHit,
        RenderEvent,
        SlashCommand,
        Summary,
        Tool,
    )

hookspec = pluggy.HookspecMarker("veil")
"""Marks a hook specification (the functions below; a plugin that fires a hook of its own declares
it with this marker and ``pluginmanager.add_hookspecs``)."""

hookimpl = pluggy.HookimplMarker("veil")
"""Marks a plugin's implementation of a hook: ``@hookimpl`` (``tryfirst``, ``trylast``,
``wrapper`` as pluggy defines them); the function's name is the hook's."""

RETIRED_HOOKS: dict[str, str] = {
    "compact": (
        "split in two (issue 20): fit_prompt transforms the messages about to be sent "
        "(observation masking), summarise returns the text of a summary, plan_compaction "
        "chooses what is folded; the core stores the summary and fires before_compaction itself"
    ),
    "session_end": (
        "removed (issue 20): no plugin needed it, and it meant both 'closed' and 'the front end "
        "left'; session_start, turn_end and the store's closed_at remain"
    ),
}
"""Hooks veil no longer calls -> what to do instead (:func:`veil.core.plugins.load_plugins`
refuses a plugin that implements one)."""


# -- registration ----------------------------------------------------------------------------


@hookspec
def register_hookspecs() -> list[Any] | None:
    """Declare the hooks this plugin fires for other plugins to implement (collected; pytest's
    ``pytest_addhooks``).

    Called once when the plugins are loaded (:func:`veil.core.plugins.load_plugins`), after
    every plugin is registered; the core adds what it returns with pluggy's
    ``add_hookspecs``, so a hook is declared by whoever fires it: ``register_routes`` by
    ``veil_http``, ``rebuild_derived`` by ``veil.doctor``, ``replay_report`` by
    ``veil.replay``, ``attempt_recorded`` by ``veil_convergence``. A plugin implementing such a
    hook marks it ``@hookimpl(optionalhook=True)``: it then loads where the declaring plugin
    is blocked or not installed (and is not called); without the mark it is refused as an
    unknown hook.

    :return: modules or classes holding functions marked ``@hookspec``, or None for none. A
        hook declared twice, or an implementation whose arguments the declaration lacks, is a
        :class:`~veil.core.errors.ConfigError` naming the plugin.
    """


@hookspec
def register_tools(veil: PluginVeil) -> list[Tool] | None:
    """Return the tools this plugin offers the model (collected).

    Called once when a :class:`~veil.core.app.Veil` is opened, for every loaded plugin.

    :param veil: the application being opened.
    :return: a list of :class:`~veil.core.types.Tool`, or None for none. Tool names must be unique
        across plugins; a clash is a start-up error naming both plugins.
    """


@hookspec
def register_models(config: Config) -> list[LocalModel] | None:
    """Return chat models that run on this machine without a provider (collected; simonw/llm's
    ``register_models``).

    Called when a project's model access is first used; must not load weights or import heavy
    libraries (``LocalModel.load`` does that on first use). With no provider and no model
    configured, the first available one answers (call order: last registered first); naming one
    (or an alias) in ``models.main.model`` or a session selects it. The ``veil_bundled``
    distribution registers SmolLM2-135M-Instruct.

    :param config: the project's configuration.
    :return: a list of :class:`~veil.core.models.llm.LocalModel` entries, or None for none.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``veil`` command line (collected; simonw/llm's pattern).

    Called once at every start of the ``veil`` command, before its arguments are parsed (so
    ``veil --help`` lists the plugins' commands); keep it cheap and import a command's
    dependencies inside the command.

    :param cli: the top-level :class:`click.Group`; add with ``@cli.command()``.
    :return: nothing (a return value is ignored).
    """


@hookspec
def register_slash_commands(veil: PluginVeil) -> list[SlashCommand] | None:
    """Return ``/commands`` for interactive front ends (collected), e.g. ``/memory``.

    Called when a front end asks the application for its slash commands
    (:meth:`Veil.slash_commands <veil.core.app.Veil.slash_commands>`: the REPL at start, the HTTP
    and MCP servers when a command is run).

    :param veil: the application.
    :return: a list of :class:`~veil.core.types.SlashCommand`, or None for none.
    """


@hookspec
def register_settings() -> dict[str, type[SettingsSection]] | None:
    """Declare the sections of ``settings.json`` this plugin owns (collected; pytest's
    ``pytest_addoption``, simonw/llm's ``register_*`` hooks).

    Called when a project's configuration loads (:func:`veil.core.settings.load_config`), of
    every installed plugin, also one that is blocked or left out by ``plugins.load``: its
    section is still checked, so a typo is caught before the plugin is turned on. Each section
    is validated with the model given here, with the same errors (file and dotted field;
    ``VEIL_*`` variable name) and ``VEIL_<SECTION>__<FIELD>`` overrides as the core's own, and
    read as ``session.config.settings.<section>``. A section that no installed plugin
    registers is an unknown key, refused. Must not import heavy libraries or read files: it
    runs at every start.

    :return: ``{section_name: model class}``: a snake_case name (settings.json spells it in
        camelCase, ``rate_limits`` -> ``rateLimits``) and a subclass of
        :class:`veil.core.settings.SettingsSection` (camelCase aliases, unknown keys refused)
        whose fields all have defaults. Two plugins registering one section is a
        :class:`~veil.core.errors.ConfigError` naming both (uninstall one, or fix one to use
        another name: blocking a plugin does not skip its settings). Naming a section the core
        owns (``context``, ``compaction``, ``memory``, ``http``) adds the model's fields to the
        core's, in the same JSON object; a field the core or another plugin already has there is
        refused the same way. None registers nothing.
    """


@hookspec
def register_migrations() -> list[Migration] | None:
    """Declare the tables this plugin owns, as versioned migrations (collected).

    Called once when a project's store opens (:class:`veil.core.app.Veil`), of the registered
    plugins only (a blocked plugin's tables are neither created nor changed). The store applies
    each version the database has not applied yet, per plugin in name order and each in one
    transaction with its row in the store's ``plugin_migrations`` table, on SQLite and on
    PostgreSQL (in the project's schema: the tenancy of ``store.project`` holds for the
    plugin's tables as for the core's); a version applied once is never applied again
    (:meth:`veil.core.store.Store.migrate_plugins`). Statements run with ``?`` placeholders on
    both engines, on the connection of ``Store.transaction()``.

    :return: a list of :class:`veil.Migration` (``plugin``: the key of the versions,
        ``version`` 1, 2...; ``sql``: one script, a script per engine, or a callable
        ``(conn, engine)``), or None for no tables. Versions with a gap or a repeat, or a
        ``plugin`` key another plugin uses, are a :class:`~veil.core.errors.ConfigError`.
    """


@hookspec(firstresult=True)
def run_interactive(veil: Veil, session: Session) -> bool | None:
    """Run the interactive front end on ``session`` until the user leaves (firstresult).

    Called by ``veil`` started with no task; the REPL plugin answers it.

    :param veil: the application; the front end drives it (runs turns, closes the session).
    :param session: the session to run, new or resumed.
    :return: True when this front end ran the session, or None to let the next implementation
        answer (with none, ``veil`` says no interactive front end is installed).
    """


@hookspec(firstresult=True)
def ask_permission(session: Session, request: PermissionRequest) -> str | None:
    """Ask the user whether a tool call may run (firstresult); front ends that can ask implement it
    (the REPL does).

    Called only when the rules leave the call to the user
    (:func:`veil.core.safety.permissions.authorize`); it may block until the user answers.

    :param session: the session whose agent loop wants to run the call.
    :param request: the call: ``tool``, ``arguments`` (credentials redacted), ``subject``
        (the command or resolved path), ``session_rule`` (what "allow for this session"
        remembers) and ``reason``.
    :return: ``"once"`` (run this call), ``"session"`` (run it, and every call that
        ``request.session_rule`` covers until the process ends), ``"deny"`` (refuse it; the
        model is told), or None when this front end cannot ask now (no terminal): the next
        implementation is asked, and with none left the call is refused with a reason that
        names the rule or flag that would allow it.
    """


# -- session lifecycle -----------------------------------------------------------------------


@hookspec
def session_start(session: PluginSession) -> None:
    """A session was created or resumed (collected).

    Called by :meth:`Veil.new_session <veil.core.app.Veil.new_session>` and when a stored session
    is loaded to be continued, before its first turn.

    :param session: the session; ``session.resumed`` tells whether it was loaded.
    :return: nothing (a return value is ignored).
    """


@hookspec(firstresult=True)
def base_prompt(session: PluginSession) -> str | None:
    """The opening text of the system message when nobody set one (firstresult: the first
    answer is used).

    Called every time a prompt is built, only when neither the project (an approved
    ``systemPrompt`` or ``loop.systemPrompt``), the user's client (``veil proxy``) nor the user
    (``VEIL_LOOP__SYSTEM_PROMPT``) set a system prompt of its own, or when the project's is not
    approved (it is then quoted after this text). Default plugin ``veil.coding_tools`` answers
    it with veil's coding persona, which names its tools; with no answer the core opens the
    system message with a neutral line (the project's folder and the date,
    :data:`veil.core.prompt.assemble.NEUTRAL_PROMPT`). The text is the first part of the system
    message, which must stay byte-identical for the session (DESIGN.md "The prompt's prefix
    stays put"): return the same text at every call.

    :param session: the session whose prompt is being built.
    :return: the text, in which the core replaces ``{cwd}`` by the session's folder and
        ``{date}`` by the session's start date (ISO ``YYYY-MM-DD``, as in a user's own prompt),
        or None to let the next implementation answer. Anything but a str is
        :class:`~veil.core.errors.PluginResultInvalid`.
    """


@hookspec
def system_prompt_sections(session: PluginSession) -> list[PromptSection] | PromptSection | None:
    """Contribute sections of the system prompt (collected).

    Called every time a prompt is built, before every model call. Memory files, the manifest of
    loaded context and convergence warnings arrive here.

    :param session: the session whose prompt is being built.
    :return: a :class:`~veil.core.types.PromptSection`, a list of them, or None. Sections are
        sorted by ``order``; keep them short: they cost prompt tokens on every call.
    """


# -- the context layer -----------------------------------------------------------------------


@hookspec
def capture(session: PluginSession, event: CaptureEvent) -> list[ContextItem] | None:
    """Turn a message, tool call or tool result into context items (collected).

    Called when the user's message arrives, when the model replies, and on the way in and out of
    every tool call (``event.phase``).

    :param session: the session the event belongs to.
    :param event: what happened: ``phase`` (``user``, ``assistant``, ``tool_call``,
        ``tool_result``), the message or the tool's name, arguments and result, the step.
    :return: a list of :class:`~veil.core.types.ContextItem` (stored by the core, then live), or
        None for none.
    """


@hookspec
def items_added(session: PluginSession, items: list[ContextItem]) -> None:
    """New items were stored and became live (collected).

    Called once per batch, after ``session.live_items`` holds them: the ``capture`` hook's items
    (their provenance, ``tokens`` and ``identifiers`` filled in), a memory item the model wrote
    (``veil_remember``), the copy of another session's item loaded by hand. An item of this
    session that comes back into the prompt (hydrated, promoted, paged in) is not new: no call. A
    plugin that keeps its own view of a session's items (veil_fsrs: identifier counts, turn
    embeddings) follows it here. Read-only: do not change the items; it runs on the capture path,
    so keep it cheap.

    :param session: the session the items belong to.
    :param items: the new items.
    :return: nothing (a return value is ignored).
    """


@hookspec(firstresult=True)
def score(session: PluginSession, items: ItemBatch, task_tags: frozenset[str], now: float) -> Any:
    """Score live items for retention (firstresult).

    Called when an eviction pass reads the scores (lazily: see ``evict``), and for ``/context``
    and the HTTP context route.

    :param session: the session whose items are scored.
    :param items: the live items; ``items.columns()`` gives cached numpy arrays of their fields.
    :param task_tags: lower-case tags of the current task (Jaccard relevance).
    :param now: Unix time in seconds (replay passes recorded time).
    :return: a sequence (numpy array preferred) of ``len(items)`` floats in [0, 1], higher = keep,
        or None to let the next implementation answer. Must be deterministic: the same items, tags
        and time give the same scores. No LLM.
    """


@hookspec(firstresult=True)
def score_signals(
    session: PluginSession, items: ItemBatch, task_tags: frozenset[str], now: float
) -> dict[str, Any] | None:
    """Explain scores (firstresult): the signals behind ``score``.

    Called for ``/context`` and the HTTP context route, on the implementation that answered
    ``score``.

    :param session: the session whose items are scored.
    :param items: the live items, as ``score`` received them.
    :param task_tags: lower-case tags of the current task.
    :param now: Unix time in seconds.
    :return: ``{signal name: sequence of len(items) floats}`` (e.g. recency, frequency,
        relevance, structure, cognitive), or None when the scorer does not explain itself.
    """


@hookspec(firstresult=True)
def evict(
    session: PluginSession,
    items: ItemBatch,
    scores: Any,
    budget_tokens: int,
    used_tokens: int,
    paged_out: ItemBatch | None,
    paged_scores: Any,
) -> EvictionPlan | None:
    """Choose which live items leave the prompt and to which tier (firstresult).

    Called each time a prompt is built and the messages are over the budget (step 4 of
    ``fit_prompt``'s order), with the scores still unread.

    :param session: the session whose prompt is being built.
    :param items: the live items, aligned with ``scores``.
    :param scores: the answer of ``score`` as a :class:`~veil.core.types.LazyScores` (a sequence
        of floats, also readable with ``np.asarray``): scoring runs when it is first read, so a
        policy that sees no pressure should return before reading it.
    :param budget_tokens: tokens the messages may take in the prompt.
    :param used_tokens: tokens they take now.
    :param paged_out: the items earlier passes evicted that may come back into the prompt
        (:meth:`~veil.core.session.Session.page_in_candidates`: only while the prompt builder
        opens page-in for this pass and ``context.pageIn`` is on), or None. A policy returns
        those it brings back in ``EvictionPlan.to_live``.
    :param paged_scores: the ``score`` hook's answer for ``paged_out``, lazy like ``scores`` (a
        :class:`~veil.core.types.LazyScores`), or None with ``paged_out``. The core scores both,
        so a policy never calls another hook.
    :return: an :class:`~veil.core.types.EvictionPlan` (possibly empty), or None to let the next
        implementation decide. A tool call and its result must leave together.
    """


@hookspec
def after_eviction(
    session: PluginSession, evicted: list[ContextItem], paged_in: list[ContextItem]
) -> None:
    """An eviction pass changed the prompt (collected).

    Called when the ``evict`` hook's plan or a demotion by hand (``veil_demote``) was applied, and
    only when something moved, right after ``session.live_items`` changed (the store records the
    pass behind the call path). veil_fsrs starts embedding the session's turns at its first call
    (a session never under pressure never loads the embedding model). Read-only; do not change the
    items.

    :param session: the session whose prompt changed.
    :param evicted: the items that left the prompt, their ``tier`` now ``"warm"`` or ``"cold"``.
    :param paged_in: the items the plan brought back (``EvictionPlan.to_live``), now live.
    :return: nothing (a return value is ignored).
    """


@hookspec
def fit_prompt(
    session: PluginSession, messages: list[Message], first_index: int | None
) -> list[int] | None:
    """Transform the messages about to be sent, in place (collected: every implementation runs,
    each on what the ones before it left; pytest's ``pytest_collection_modifyitems`` pattern).

    Called each time a prompt is built, before anything else is done to the kept messages
    (``veil_compaction``'s observation masking answers it). The order of what the core does to
    them (DESIGN.md "One turn, as data flows"): 1. ``fit_prompt`` (pluggy's call order: last
    registered first, ``tryfirst`` / ``trylast`` move one); 2. collapsing the steps that left
    the prompt whole; 3. ``elide_messages`` (repeated lines when over the budget,
    ``context.elideRepeats``); 4. eviction (``score``, ``evict``); 5. full compaction
    (``summarise``) over ``compaction.threshold`` x the window; 6. the last resort, cutting
    results behind pointers to fit the window.

    :param session: the session whose prompt is being built.
    :param messages: a copy of the history from ``compact_size`` on, as sent (evicted contents
        already stubbed; no system prompt). Replace entries (``messages[i] = {...}``) with new
        dicts; never add, remove or reorder one: position ``i`` is history index
        ``first_index + i``, and a change of length makes the core drop every change with a
        ``warning``. The stored history is never changed.
    :param first_index: index in ``session.messages`` of ``messages[0]``, so a policy can
        remember what it did across calls (``compaction.observationMaskingBlock``); None when
        the messages are not the session's history.
    :return: the positions in ``messages`` of the tool results this implementation masked
        (replaced so that the model sees nothing of the result; ``veil_compaction`` sends
        ``[observation masked]``), or None for none. Their items leave the live set for the
        warm tier (reason ``masked``: eviction must not count them again), and a step whose
        call was evicted and whose results are all stubbed or masked is left out whole. The
        core reads these positions, never the text that replaced a result; anything but a list
        of positions in ``messages`` is :class:`~veil.core.errors.PluginResultInvalid`.
    """


@hookspec(firstresult=True)
def elide_messages(
    session: PluginSession, messages: list[Message], budget_tokens: int
) -> list[Message] | None:
    """Rewrite the kept messages losslessly before eviction is asked to free room (firstresult:
    the first answer is used).

    Called by the core at a change moment only (an eviction pass, a masking block, a compaction,
    a message already sent that now reads differently, or messages over ``budget_tokens``),
    after ``fit_prompt`` and the collapse of the steps that left the prompt. What it returns is
    sent unchanged at every later call until the next change moment, new messages appended as
    they come, so the prompt's prefix stays put; the core counts what it saved and lets eviction
    use that room. Default plugin ``veil.elision`` answers it with repeated-line elision when
    ``context.elideRepeats`` is on; blocked, nothing is elided.

    :param session: the session whose prompt is being built.
    :param messages: the kept messages as they would be sent (masked, stubbed, steps that left
        the prompt collapsed, pairing repaired; no system prompt, summary or note). Do not change
        them: return new dicts.
    :param budget_tokens: the tokens the kept messages may take.
    :return: a list of as many messages, each the one at its position or a copy with its
        ``content`` rewritten, or None to send them as they are. Anything else is
        :class:`~veil.core.errors.PluginResultInvalid`.
    """


@hookspec(firstresult=True)
def plan_compaction(
    session: PluginSession,
    messages: list[Message],
    kind: str,
    prompt_tokens: int | None,
) -> CompactionPlan | None:
    """Decide whether a compaction runs now and what it folds (firstresult: the first answer
    is used).

    Called by the core with what the prompt holds of the history after the current summary:
    at every prompt it builds (kind ``"prompt"``, unless the previous prompt was compacted),
    when the provider refused a prompt as too long (``"refused"``), and for seed 000's
    defaultCompaction (``"manual"``: ``/compact``, ``veil compact``, the HTTP compact route;
    ``"auto"``: a run started by a plugin, e.g. ``veil_compaction``'s ``autoThreshold``). The
    core keeps the mechanism: it carries the plan back to the stored history, fires
    ``before_compaction`` and ``summarise`` with the folded messages, refuses a summary that
    does not shrink the prompt, stores it, counts failures and emits the ``compaction`` event
    (:mod:`veil.core.prompt.compaction`). With no implementation nothing is compacted
    automatically, and a manual compaction is refused with
    :class:`~veil.core.errors.NotAvailable`. ``veil_compaction`` answers it with seed 000's
    rules: over ``compaction.threshold`` x the window, fold all but the newest
    ``compaction.keepRecentTurns`` steps; for defaultCompaction, ``compactionCount`` percent
    of the characters.

    :param session: the session that may be compacted.
    :param messages: what the prompt holds from ``compact_size`` on, oldest first (stubs stay
        stubs, masked results their mask, steps left out stay out, pairing repaired; no system
        prompt, no summary). Do not change it.
    :param kind: ``"prompt"``, ``"refused"``, ``"manual"`` or ``"auto"`` (above). For
        ``"prompt"`` and ``"refused"`` the summary is asked in mode ``"full"``, for the others
        in mode ``"default"``.
    :param prompt_tokens: for kind ``"prompt"``, the tokens the prompt being built takes with
        the tool schemas (the session's tokenizer), to compare with a threshold; None for the
        other kinds.
    :return: a :class:`~veil.core.types.CompactionPlan` (``fold``: how many of ``messages`` are
        folded; 0 for none), or None to let the next implementation answer (when none answers:
        no compaction). A ``fold`` out of range or between a tool call and its results is
        :class:`~veil.core.errors.PluginResultInvalid`.
    """


@hookspec(firstresult=True)
def summarise(
    session: PluginSession,
    messages: list[Message],
    previous: str | None,
    instructions: list[str],
    mode: str,
) -> Summary | None:
    """Summarise the messages a compaction folds (firstresult: the first answer is used).

    Called by the core once it has chosen what is folded and fired ``before_compaction`` with
    the same messages (full compaction, when memory is enabled); it checks the answer (a summary with
    no visible character, or one that would not make the prompt smaller, is refused with
    ``CompactionRejected``), stores it as ``compact_summary`` with the new ``compact_size``,
    and emits the ``compaction`` event (:mod:`veil.core.prompt.compaction`). An implementation
    writes nothing to the session; what it raises leaves the session unchanged (automatic
    compaction reports it as a ``warning``, a manual ``/compact`` returns it to the caller).
    ``veil_compaction`` answers it with a structured summary followed by the section veil
    records from the tool calls.

    :param session: the session being compacted.
    :param messages: the messages to fold, oldest first, as the prompt holds them (stubs stay
        stubs, masked results their mask; no system prompt). Tool calls and their results are
        never split.
    :param previous: the session's current summary, which the new one replaces (merge it),
        or None.
    :param instructions: extra instructions for the summariser, already redacted: the agent's
        ``customInstructions`` then the caller's (``/compact TEXT``); empty strings are
        possible and mean none. Empty for mode ``"full"``.
    :param mode: ``"full"`` (automatic full compaction at ``compaction.threshold``, or after a
        provider refused a prompt as too long; seed 000 uses the ``compact`` model role) or
        ``"default"`` (seed 000's defaultCompaction: manual ``/compact`` or ``autoThreshold``;
        ``defaultCompaction.model``, then the session's model, then ``main``).
    :return: a :class:`~veil.core.types.Summary` (``text``, ``calls``), or None to let the next
        implementation answer.
    """


@hookspec
def before_compaction(session: PluginSession, messages: list[Message]) -> None:
    """Messages are about to be folded into a summary (collected): extract what must outlive
    them (e.g. write facts to the agent's memory file).

    Called by the core during automatic full compaction, when memory is enabled for the agent
    (seed 000 "Memory extraction during compaction"), right before ``summarise`` and before
    anything is written, so what it writes stays even if the compaction then fails or is
    refused. A failure is reported as a ``warning`` and the compaction goes on.

    :param session: the session being compacted.
    :param messages: exactly the messages ``summarise`` is given (oldest first).
    :return: nothing (a return value is ignored).
    """


@hookspec
def recall(
    session: PluginSession | None, query: str, limit: int, tags: list[str] | None
) -> list[RecallHit] | None:
    """Return candidates for a query from a store (collected); the core merges them (a duplicate
    id keeps its best score) and ranks them, best first.

    Called by :meth:`Veil.recall <veil.core.app.Veil.recall>`: the ``memory_search`` tool and the
    HTTP recall route.

    :param session: the session asking, or None outside a session.
    :param query: the text searched for.
    :param limit: how many candidates the caller wants at most (an implementation may return
        fewer; more are cut after ranking).
    :param tags: tags the candidates should carry, or None for any.
    :return: a list of :class:`~veil.core.types.RecallHit`, or None for none.
    """


@hookspec
def item_accessed(
    session: PluginSession, item: ContextItem, access: str, now: float, previous_tier: str
) -> None:
    """An item was used again (collected): hydrated, promoted, pinned back into the prompt, or
    named by a turn that works on its files or symbols.

    Called once per item before the core counts the access and stores ``stability``,
    ``difficulty``, ``access_count`` and ``last_access``.

    :param session: the session the item was used in.
    :param item: the item; implementations may update ``stability``, ``difficulty`` (an FSRS-6
        review).
    :param access: how it was used (:data:`veil.core.context_ops.ItemAccess`): ``"hydrate"``
        (a pointer followed), ``"promote"`` (loaded by hand), ``"pin"`` (pinned back into the
        prompt) or ``"related"`` (a turn named its files or symbols). What an access means is the
        implementation's to decide (veil_fsrs grades it: Easy for a promotion, Good otherwise);
        the core only records it.
    :param now: Unix time in seconds.
    :param previous_tier: ``"live"``, ``"warm"`` or ``"cold"`` before the access; an eviction
        controller treats a warm / cold item asked for again as a sign it evicted too eagerly.
    :return: nothing (a return value is ignored).
    """


# -- beliefs and derived views ---------------------------------------------------------------
# The core keeps no beliefs itself: it states facts and asks about conflicts through these hooks,
# which the ``veil.beliefs`` default plugin answers (blocked, facts stay context items only).


@hookspec
def assert_fact(
    session: PluginSession | None, statement: str, tool_call_id: str | None, source: str
) -> None:
    """A fact was stated (collected): record it where beliefs are kept.

    Fired by ``veil_remember`` with kind ``fact`` (after the fact is stored as a context item,
    which it stays whether or not anything answers) and by memory extraction before a compaction
    (``veil_memoryfiles``). The ``veil.beliefs`` plugin records it as a belief with its
    provenance; one that contradicts an active belief opens a conflict.

    :param session: the session the fact was stated in, or None outside a session.
    :param statement: the fact's text (credentials already redacted by ``veil_remember``).
    :param tool_call_id: the tool call that stated it, or None.
    :param source: who stated it: ``"veil_remember"``, ``"memory_extraction"``...
    :return: nothing (a return value is ignored).
    """


@hookspec(firstresult=True)
def belief_conflicts(session: PluginSession | None) -> list[dict[str, Any]] | None:
    """Open conflicts between beliefs (firstresult).

    Called by the ``veil_conflicts`` tool and by front ends that list conflicts.

    :param session: the session asking, or None.
    :return: ``[{"id", "subject", "predicate", "beliefs": [belief rows with provenance and a
        readable "when"]}]`` (the ``veil.beliefs`` plugin:
        :meth:`~veil.default_plugins.beliefs.store.BeliefStore.open_conflicts`), or None when this
        plugin keeps no beliefs. With no answer at all, veil lists no conflict.
    """


@hookspec(firstresult=True)
def resolve_conflict(session: PluginSession | None, conflict_id: str, keep: str) -> str | None:
    """Settle a belief conflict (firstresult): keep one belief, retract the others (never deleted).

    Called by the ``veil_resolve_conflict`` tool.

    :param session: the session settling it (its id, step and clock go with the record), or None.
    :param conflict_id: the open conflict's id (``conflict_...``).
    :param keep: the id of the belief to keep (``belief_...``), one of the conflict's.
    :return: a line saying what was kept and what was retracted, or None when this plugin keeps no
        beliefs. With no answer at all, veil raises :class:`~veil.core.errors.NotAvailable`
        ("beliefs are off").
    :raises BadRequest: no open conflict ``conflict_id``, or ``keep`` is not one of its beliefs
        (the message names the field).
    """


# -- events ----------------------------------------------------------------------------------


@hookspec
def render(event: RenderEvent) -> None:
    """Show an event to the user (collected): streamed tokens, tool calls and results, evictions
    (dim the call), compactions, warnings.

    Called for every event a session emits (:meth:`PluginSession.emit
    <veil.core.session_api.PluginSession.emit>`) and for the application's own warnings. Front ends
    implement it; it must not block.

    :param event: the event: ``kind``, ``data`` and the ``session_id`` it belongs to.
    :return: nothing (a return value is ignored).
    """


@hookspec
def after_iteration(session: PluginSession, iteration: int) -> None:
    """One loop iteration (a model call and its tool batch) finished (collected).

    Called by the turn driver once the results of all the reply's calls are recorded
    (:func:`veil.core.turn.end_iteration`), between tool batches; thresholds such as
    defaultCompaction's ``autoThreshold`` are checked here, and a plugin may ask to halt
    (``session.request_halt``).

    :param session: the session the turn runs in.
    :param iteration: the loop's model call within the turn (1-based); drivers without a loop of
        their own (the replay) pass the session's step.
    :return: nothing (a return value is ignored).
    """


@hookspec
def turn_end(session: PluginSession, final_message: Message | None) -> None:
    """The agent finished answering a user message (collected).

    Called by the turn driver after a reply without tool calls (the final answer) or when the run
    stops (:func:`veil.core.turn.end_turn`); everything is already stored message by message.

    :param session: the session the turn ran in.
    :param final_message: the session's last message, or None when it has none.
    :return: nothing (a return value is ignored).
    """


@hookspec
def before_close(veil: PluginVeil) -> None:
    """``veil`` is closing (collected): finish or drop the background work that uses its store or
    tiers (veil_fsrs waits for the turn embedding in flight and skips its queued ones).

    Called once per close (:meth:`Veil.close <veil.core.app.Veil.close>`), before the store's
    connection is released; the store closes even when an implementation raises.

    :param veil: the application being closed.
    :return: nothing (a return value is ignored).
    """
