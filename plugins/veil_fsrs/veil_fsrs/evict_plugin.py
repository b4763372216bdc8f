"""The ``veil_fsrs_evict`` plugin: three-stage eviction with the pressure-threshold controller.

A plugin of its own (entry point ``veil_fsrs_evict``) so it keeps working when the scorer
``veil_fsrs`` is blocked and another scorer answers ``score``.

What it reads from the session (all optional except ``config``):

* ``session.config.settings.context``: turn weights, protected window, rescue cosine, controller
  settings; ``staleRecency`` and ``pointerTokens`` when those fields exist (defaults 0.9 and
  :data:`DEFAULT_POINTER_TOKENS`).
* ``session.state["veil_fsrs"]["controller"]``: the controller's state (created here).
* ``session.step``: the current step (default: the newest item's step).
* ``session.clock()``: Unix time in seconds (replay's recorded time); without it, the newest
  ``created_at`` / ``last_access`` among the items.
* ``session.plugin_state("veil_fsrs_evict")``: the plugin's own per-session state
  (:class:`~veil_fsrs.session_state.FsrsSessionState`): the turn vectors for the rescue of old
  turns, and identifier -> how many of the session's items mention it, which the coverage
  ranking weighs new names by (``context.mentionPower``). A session object without
  ``plugin_state`` (a bare test double) goes without both.

The hooks that keep that state, at the moments the policy needs it:

* ``session_start``: a resumed session that had evictions before embeds its turns at once.
* ``items_added``: new items' identifiers are counted, new turns embedded (once started).
* ``after_eviction``: the first pass that moved something starts the turn embeddings.
* ``before_close``: the app's background embedding jobs finish (queued ones are skipped)
  before its store closes.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from veil import EvictionPlan
from veil.hookspecs import hookimpl
from veil_fsrs.session_state import embeds_turns as _embeds_turns
from veil_fsrs.session_state import existing_state as _existing_state
from veil_fsrs.session_state import session_state as _session_state
from veil_fsrs.turn_embeddings import drain as _drain

# The eviction pass and the item batches (numpy) are imported by the hooks that use them:
# ``veil --help`` loads every plugin (issue 30).
if TYPE_CHECKING:  # pragma: no cover
    from veil import ContextItem, ItemBatch, PluginSession, PluginVeil

STATE_KEY = "veil_fsrs"
DEFAULT_POINTER_TOKENS = 9
"""Tokens assumed for the stub that replaces an evicted item when settings do not say
(``context.pointerTokens``): the core's warm stub is a size and a message handle, 7-9 tokens in
cl100k_base; an item frees its tokens minus this."""


def _now(session: Any, items: Any) -> float:
    clock = getattr(session, "clock", None)
    if callable(clock):
        return float(clock())
    cols = items.columns()
    return float(max(cols["created_at"].max(), cols["last_access"].max()))


def _optional_setting(settings: Any, name: str, default: Any) -> Any:
    """``settings.<name>`` when the settings model declares it, else ``default`` (a class-level
    check: a missing attribute on a pydantic model is slow to fail)."""
    fields = getattr(type(settings), "model_fields", None)
    if fields is not None:
        return getattr(settings, name) if name in fields else default
    return getattr(settings, name, default)


def _step(session: Any, items: Any) -> int:
    step = getattr(session, "step", None)
    if isinstance(step, int):
        return step
    return int(items.columns()["step"].max())


@hookimpl
def evict(
    session: PluginSession,
    items: Any,
    scores: Any,
    budget_tokens: int,
    used_tokens: int,
    paged_out: Any,
    paged_scores: Any,
) -> EvictionPlan:
    """Plan which live items leave the prompt (all to the warm tier); see
    :mod:`veil_fsrs.eviction`. A tool call and its result always leave together.

    ``paged_out`` / ``paged_scores``: the core's page-in candidates and their lazy scores
    (the re-selection of :mod:`veil_fsrs.eviction` reads them only under pressure).

    Raises:
        ValueError: ``scores`` misaligned or not finite; ``budget_tokens`` <= 0.
    """
    from veil_fsrs.batch_index import as_batch
    from veil_fsrs.eviction import STALE_RECENCY, Controller, evict_pass
    from veil_fsrs.levels import plan_levels

    settings = session.config.settings.context
    state = session.state.setdefault(STATE_KEY, {})
    controller = Controller(state.setdefault("controller", {}), settings.controller)
    batch = as_batch(items)
    if not len(batch):
        return EvictionPlan(threshold=controller.threshold)
    own = _existing_state(session)
    levels = None
    name_stats = getattr(own, "name_stats", None)
    if getattr(settings, "levels", False) and callable(name_stats):
        # the session keeps the names' statistics and lines the levels planner reads (a bare
        # session double keeps none: it gets the whole-item planner)
        superseded = getattr(own, "superseded", None)
        levels = partial(
            plan_levels,
            stats=name_stats(),
            lines_of=own.lines_of,
            superseded=superseded() if settings.superseded and callable(superseded) else None,
        )
    target = _optional_setting(settings, "target_tokens", None)
    if (
        target is not None
        and budget_tokens > target
        and not _optional_setting(settings, "budget_tokens", None)
    ):
        # a window larger than what pays off, and no budget of the user's: passes aim at the
        # target (the window stays the hard limit: the core never sends more than it holds)
        budget_tokens = target
    return evict_pass(
        batch,
        scores,
        budget_tokens,
        used_tokens,
        settings=settings,
        controller=controller,
        current_step=_step(session, batch),
        now=_now(session, batch),
        embeddings=own.turn_embeddings.vectors if own is not None else None,
        stale_recency=_optional_setting(settings, "stale_recency", STALE_RECENCY),
        pointer_tokens=_optional_setting(settings, "pointer_tokens", DEFAULT_POINTER_TOKENS),
        page_in=lambda: _page_in(paged_out, paged_scores),
        mentions=lambda: own.identifier_mentions() if own is not None else None,
        history=lambda: _history(session),
        levels=levels,
    )


def _history(session: Any) -> tuple[float, int]:
    """``(tokens of the session's whole stored history, steps so far)`` for the cache cap of
    the low-water mark (0, 0 when the session does not say)."""
    messages = getattr(session, "messages", None)
    count = getattr(session, "count_tokens", None)
    step = getattr(session, "step", 0)
    if not messages or not callable(count) or not isinstance(step, int):
        return 0.0, 0
    return float(count(messages)), step


def _page_in(paged_out: Any, paged_scores: Any) -> tuple[ItemBatch | None, Any]:
    """The page-in candidates the core offers for this pass, as a batch, and their scores
    (``(None, None)`` when it offers none: then the pass only evicts)."""
    from veil_fsrs.batch_index import as_batch

    if paged_out is None or not len(paged_out):
        return None, None
    return as_batch(paged_out), paged_scores


@hookimpl
def item_accessed(session: PluginSession, item: Any, now: float, previous_tier: str) -> None:
    """An evicted item asked for again tells the controller it evicted too eagerly: the
    pressure threshold goes up (within its bounds) when that happens within the re-request
    window (DESIGN.md controller defaults)."""
    if previous_tier == "live":
        return
    from veil_fsrs.controller import Controller

    settings = session.config.settings.context
    state = session.state.setdefault(STATE_KEY, {})
    Controller(state.setdefault("controller", {}), settings.controller).on_rerequest(item.id, now)


@hookimpl
def session_start(session: PluginSession) -> None:
    """Make the session's state; a resumed session whose items left the prompt before (it was
    under pressure) embeds its live turns at once, as the eviction that started it would
    have."""
    state = _session_state(session)
    if session.resumed and state.resumed_under_pressure():
        state.turn_embeddings.start()


@hookimpl
def items_added(session: PluginSession, items: list[ContextItem]) -> None:
    """Count the new items' identifiers and embed the turns among them (see
    :meth:`~veil_fsrs.session_state.FsrsSessionState.items_added`)."""
    _session_state(session).items_added(items)


@hookimpl
def after_eviction(session: PluginSession) -> None:
    """Under pressure now: old turns may need the rescue, so the session's turns are embedded
    from this pass on (the live ones now; nothing happens after the first time)."""
    _session_state(session).turn_embeddings.start()


@hookimpl
def before_close(veil: PluginVeil) -> None:
    """Wait for the turn embedding in flight of ``veil``'s sessions and skip the queued ones
    (:func:`veil_fsrs.turn_embeddings.drain`), while its store is still open."""
    _drain(veil)


def embeds_turns(session: PluginSession) -> bool:
    """Whether this plugin embeds the session's turns now (from its first eviction on, unless
    ``context.rescueEmbeddings`` is ``off``); ``veil replay`` then embeds a whole recording in
    one batch. See :func:`veil_fsrs.session_state.embeds_turns`."""
    return _embeds_turns(session)
