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
* ``session.item_embeddings``: a mapping item id -> vector, for the rescue of old turns.
* ``session.identifier_mentions``: identifier -> how many of the session's items mention it;
  the coverage ranking weighs new names by it (``context.mentionPower``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.core.items import ItemBatch
from veil.core.types import EvictionPlan
from veil.hookspecs import hookimpl
from veil_fsrs.batch_index import as_batch as _as_batch
from veil_fsrs.eviction import STALE_RECENCY as _STALE_RECENCY
from veil_fsrs.eviction import Controller as _Controller
from veil_fsrs.eviction import evict_pass as _evict_pass

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session_api import PluginSession

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
    settings = session.config.settings.context
    state = session.state.setdefault(STATE_KEY, {})
    controller = _Controller(state.setdefault("controller", {}), settings.controller)
    batch = _as_batch(items)
    if not len(batch):
        return EvictionPlan(threshold=controller.threshold)
    return _evict_pass(
        batch,
        scores,
        budget_tokens,
        used_tokens,
        settings=settings,
        controller=controller,
        current_step=_step(session, batch),
        now=_now(session, batch),
        embeddings=getattr(session, "item_embeddings", None),
        stale_recency=_optional_setting(settings, "stale_recency", _STALE_RECENCY),
        pointer_tokens=_optional_setting(settings, "pointer_tokens", DEFAULT_POINTER_TOKENS),
        page_in=lambda: _page_in(paged_out, paged_scores),
        mentions=lambda: getattr(session, "identifier_mentions", None),
        history=lambda: _history(session),
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
    if paged_out is None or not len(paged_out):
        return None, None
    return _as_batch(paged_out), paged_scores


@hookimpl
def item_accessed(
    session: PluginSession, item: Any, grade: int, now: float, previous_tier: str
) -> None:
    """An evicted item asked for again tells the controller it evicted too eagerly: the
    pressure threshold goes up (within its bounds) when that happens within the re-request
    window (DESIGN.md controller defaults)."""
    if previous_tier == "live":
        return
    settings = session.config.settings.context
    state = session.state.setdefault(STATE_KEY, {})
    _Controller(state.setdefault("controller", {}), settings.controller).on_rerequest(item.id, now)
