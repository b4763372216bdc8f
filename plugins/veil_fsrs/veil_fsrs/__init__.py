"""veil_fsrs: the default scorer (FSRS-6 recency + four metadata signals, seed 002).

This module is the ``veil_fsrs`` plugin: it implements ``score`` only. The eviction policy is a
second plugin in the same distribution, :mod:`veil_fsrs.evict_plugin` (entry point
``veil_fsrs_evict``), so blocking ``veil_fsrs`` swaps the scorer while eviction keeps working,
and the other way round (DESIGN.md: "the scorer and the eviction policy are separately
replaceable").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

# The hooks import numpy's modules (scoring, batch_index, fsrs) when they are called, not here:
# ``veil --help`` loads every plugin (issue 30).

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession

SECONDS_PER_DAY = 86_400.0


@hookimpl
def score(session: PluginSession, items: Any, task_tags: frozenset[str], now: float) -> Any:
    """Retention scores in [0, 1] of the live items (float64 array aligned with ``items``).

    Reads ``session.config.settings.context`` (weights, modifiers, decay, live cap). See
    :func:`veil_fsrs.scoring.score_items`.
    """
    from veil_fsrs.batch_index import as_batch
    from veil_fsrs.scoring import score_items

    settings = session.config.settings.context
    return score_items(as_batch(items), task_tags, now, settings)


@hookimpl
def score_signals(session: PluginSession, items: Any, task_tags: frozenset[str], now: float) -> Any:
    """The five signals behind :func:`score` (see :func:`veil_fsrs.scoring.signals`)."""
    from veil_fsrs.batch_index import as_batch
    from veil_fsrs.scoring import signals

    settings = session.config.settings.context
    return signals(as_batch(items), task_tags, now, settings)


GRADE_GOOD = 3
"""FSRS rating Good (ratings 1 Again, 2 Hard, 3 Good, 4 Easy: the FSRS-6 algorithm, open-spaced-
repetition's py-fsrs ``Rating``): an item used again as expected."""
GRADE_EASY = 4
"""FSRS rating Easy: an item the model loaded by hand (``promote``), which it wants kept."""
ACCESS_GRADES: dict[str, int] = {
    "hydrate": GRADE_GOOD,
    "pin": GRADE_GOOD,
    "related": GRADE_GOOD,
    "promote": GRADE_EASY,
}
"""The FSRS grade of each kind of access the core reports (``item_accessed``'s ``access``);
an access of a kind not listed here counts as Good."""


def access_grade(access: str) -> int:
    """The FSRS grade (1 Again .. 4 Easy) an access of kind ``access`` counts as
    (:data:`ACCESS_GRADES`; Good for a kind not listed)."""
    return ACCESS_GRADES.get(access, GRADE_GOOD)


@hookimpl
def item_accessed(
    session: PluginSession, item: Any, access: str, now: float, previous_tier: str
) -> None:
    """An access is an FSRS-6 review graded by its kind (:func:`access_grade`: Easy for a
    promotion, Good otherwise); see :func:`review_item`."""
    review_item(session, item, access_grade(access), now, previous_tier)


def review_item(
    session: PluginSession, item: Any, grade: int, now: float, previous_tier: str
) -> None:
    """Review ``item`` with FSRS grade ``grade`` (1 Again .. 4 Easy) at ``now`` (Unix seconds):
    stability and difficulty move by the long-term recall formulas with the configured decay;
    stability caps at ``liveCapDays`` while the item is live and at ``durableCapDays`` once it
    was stored (seed 002: "the same curve runs twice at different horizons")."""
    from veil_fsrs.fsrs import DEFAULT_PARAMETERS, review

    settings = session.config.settings.context
    w = list(DEFAULT_PARAMETERS)
    w[20] = settings.decay
    elapsed = max(0.0, (now - item.last_access) / SECONDS_PER_DAY)
    cap = settings.live_cap_days if previous_tier == "live" else settings.durable_cap_days
    stability, difficulty = review(item.stability, item.difficulty, elapsed, grade, w, cap)
    item.stability, item.difficulty = float(stability), float(difficulty)


@hookimpl
def register_settings() -> dict[str, Any]:
    """The fields of ``context`` that both veil_fsrs plugins read (the scorer's and the eviction
    policy's: :class:`~veil_fsrs.settings.FsrsContextSettings`); registered here only, since one
    section has one owner."""
    from veil_fsrs.settings import FsrsContextSettings

    return {"context": FsrsContextSettings}
