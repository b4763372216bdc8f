"""The two ``item_accessed`` hookimpls of veil_fsrs: the scorer's FSRS-6 review (checked
against the ``fsrs`` package, the oracle) and the eviction controller's re-request signal.

Like test_fsrs_oracle.py, every review here is whole days (>= 1) after the previous access:
the package switches to a short-term formula below one day, veil does not.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pluggy
import pytest
import veil_fsrs
from veil_fsrs import evict_plugin
from veil_fsrs.settings import FsrsContextSettings, design_reference_context

import veil.hookspecs
from veil.core.prompt.items import ItemBatch
from veil.core.types import ContextItem

oracle = pytest.importorskip(
    "fsrs", reason="the fsrs package is the test oracle (pip install fsrs)"
)

NOW = 1_750_000_000.0
DAY = 86_400.0
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


reference_settings = design_reference_context  # the values these tests were worked out on


def _session(context: FsrsContextSettings | None = None, **extra) -> SimpleNamespace:
    config = SimpleNamespace(settings=SimpleNamespace(context=context or reference_settings()))
    return SimpleNamespace(config=config, state={}, **extra)


def _item(name: str, **fields) -> ContextItem:
    base = {
        "id": name,
        "content": name,
        "source": "tool_result",
        "step": 10,
        "tokens": 300,
        "access_count": 2,
        "created_at": NOW,
        "last_access": NOW,
    }
    base.update(fields)
    return ContextItem(**base)


def _oracle_review(stability: float, difficulty: float, days: int, grade: int, decay=0.1542):
    """(stability, difficulty) the fsrs package gives for a review ``days`` after the last."""
    params = list(oracle.scheduler.DEFAULT_PARAMETERS)
    params[20] = decay
    scheduler = oracle.Scheduler(parameters=params, enable_fuzzing=False)
    card = oracle.Card(
        card_id=1,
        state=oracle.State.Review,
        stability=stability,
        difficulty=difficulty,
        due=T0,
        last_review=T0,
    )
    reviewed, _ = scheduler.review_card(card, oracle.Rating(grade), T0 + timedelta(days=days))
    return reviewed.stability, reviewed.difficulty


def _access(session, item, days: float, tier: str, grade: int = 3) -> None:
    veil_fsrs.review_item(session, item, grade, item.last_access + days * DAY, tier)


# --- the scorer's review ----------------------------------------------------------------------


@pytest.mark.parametrize("grade", [1, 3])
@pytest.mark.parametrize("days", [1, 3])
def test_access_is_an_fsrs6_review_matching_the_oracle(days, grade):
    # S = 2.5 days, D = 5: the oracle gives S' = 5.881 (1 day, Good), 10.381 (3 days, Good),
    # 0.569 / 0.632 (Again); D' = 4.990 (Good), 8.342 (Again). All below the durable cap.
    expected_s, expected_d = _oracle_review(2.5, 5.0, days, grade)
    item = _item("x", stability=2.5, difficulty=5.0)
    _access(_session(), item, days, "warm", grade)
    assert item.stability == pytest.approx(expected_s, rel=1e-12)
    assert item.difficulty == pytest.approx(expected_d, rel=1e-12)
    assert isinstance(item.stability, float) and isinstance(item.difficulty, float)
    # Live, the same review is capped at liveCapDays (7): only 3 days Good (10.381) exceeds it.
    live = _item("y", stability=2.5, difficulty=5.0)
    _access(_session(), live, days, "live", grade)
    assert live.stability == pytest.approx(min(expected_s, 7.0), rel=1e-12)
    assert live.difficulty == pytest.approx(expected_d, rel=1e-12)


def test_values_of_the_oracle_used_above():
    # Pins the oracle itself, so a changed fsrs release shows here rather than as a puzzle.
    assert _oracle_review(2.5, 5.0, 1, 3)[0] == pytest.approx(5.881364, rel=1e-6)
    assert _oracle_review(2.5, 5.0, 3, 3)[0] == pytest.approx(10.380948, rel=1e-6)


def test_the_cap_depends_on_the_tier_the_item_came_from():
    # S = 300, D = 2, Easy 300 days later: the oracle gives 1353.4 days, over both caps.
    uncapped, _ = _oracle_review(300.0, 2.0, 300, 4)
    assert uncapped > 365.0
    caps = {"live": 7.0, "warm": 365.0, "cold": 365.0}
    for tier, cap in caps.items():
        item = _item(tier, stability=300.0, difficulty=2.0)
        _access(_session(), item, 300, tier, grade=4)
        assert item.stability == cap, tier
    # The caps are the settings', not constants.
    custom = reference_settings({"liveCapDays": 3, "durableCapDays": 500})
    live, warm = _item("l", stability=300.0), _item("w", stability=300.0)
    _access(_session(custom), live, 300, "live", grade=4)
    _access(_session(custom), warm, 300, "warm", grade=4)
    assert (live.stability, warm.stability) == (3.0, 500.0)


def test_the_review_uses_the_configured_decay():
    # decay (w20) 0.5 instead of 0.1542: the oracle with w20 = 0.5 gives S' = 10.645 after 3
    # days (10.381 with the default), so an implementation ignoring the setting fails here.
    expected_s, expected_d = _oracle_review(2.5, 5.0, 3, 3, decay=0.5)
    assert expected_s == pytest.approx(10.645352, rel=1e-6)
    item = _item("x", stability=2.5, difficulty=5.0)
    _access(_session(reference_settings({"decay": 0.5})), item, 3, "warm")
    assert item.stability == pytest.approx(expected_s, rel=1e-12)
    assert item.difficulty == pytest.approx(expected_d, rel=1e-12)


def test_an_access_before_the_last_one_counts_as_no_time():
    # A clock step back: elapsed 0, R = 1, so Good leaves S unchanged (e^(w10 x 0) - 1 = 0).
    item = _item("x", stability=2.5, difficulty=5.0)
    _access(_session(), item, -1, "warm")
    assert item.stability == pytest.approx(2.5, rel=1e-12)


# --- the eviction controller ------------------------------------------------------------------


def _evicted_session() -> tuple[SimpleNamespace, list[ContextItem]]:
    """A session whose eviction pass at NOW evicted s0, s1 and s3 (stage 3)."""
    session = _session(step=100, clock=lambda: NOW)
    items = [_item(f"s{k}") for k in range(4)]
    # Each 300-token item frees 286 (14-token stub); nothing scores below 0.7, so stage 3
    # takes the lowest first: s1 (1590 -> 1304), s3 (-> 1018), s0 (-> 732 <= 1000); the plan
    # lists one stage's items in batch order.
    plan = evict_plugin.evict(
        session=session,
        items=ItemBatch(items),
        scores=[0.9, 0.8, 0.95, 0.85],
        budget_tokens=1000,
        used_tokens=1590,
        paged_out=None,
        paged_scores=None,
    )
    assert plan.to_warm == ["s0", "s1", "s3"]
    return session, items


@pytest.mark.parametrize(
    ("access", "grade"),
    [("hydrate", 3), ("pin", 3), ("related", 3), ("promote", 4), ("a_later_kind", 3)],
)
def test_the_hookimpl_grades_each_kind_of_access(access, grade):
    # The core reports how an item was used; veil_fsrs decides the grade: a promotion (loaded by
    # hand) is Easy, every other access Good. S = 2.5, D = 5, 3 days later, warm (no live cap):
    # the oracle gives S' = 10.381 for Good and a larger S' for Easy.
    expected_s, expected_d = _oracle_review(2.5, 5.0, 3, grade)
    item = _item("x", stability=2.5, difficulty=5.0)
    veil_fsrs.item_accessed(
        session=_session(), item=item, access=access, now=NOW + 3 * DAY, previous_tier="warm"
    )
    assert item.stability == pytest.approx(expected_s, rel=1e-12)
    assert item.difficulty == pytest.approx(expected_d, rel=1e-12)


def _controller_state(session) -> dict:
    return session.state["veil_fsrs"]["controller"]


def test_a_re_request_within_the_window_raises_the_threshold():
    session, items = _evicted_session()
    s0, s1, s3 = items[0], items[1], items[3]

    def access(item, seconds, tier):
        evict_plugin.item_accessed(
            session=session, item=item, now=NOW + seconds, previous_tier=tier
        )

    state = _controller_state(session)
    assert state["threshold"] == 0.7
    access(s1, 100, "live")  # a live access is no re-request
    assert state["threshold"] == 0.7 and "s1" in state["evicted"]
    access(s1, 1800, "warm")  # 1800 s after the eviction: inside the window (inclusive)
    assert state["threshold"] == 0.75 and "s1" not in state["evicted"]
    access(s1, 1800, "warm")  # each eviction counts once
    access(s0, 1801, "cold")  # 1801 s: too late
    assert state["threshold"] == 0.75
    access(s3, 900, "cold")  # a cold item counts like a warm one
    assert state["threshold"] == 0.8
    assert [m["to"] for m in state["moves"]] == [0.75, 0.8]


def test_never_evicted_items_and_empty_sessions_leave_the_threshold_alone():
    session = _session()
    evict_plugin.item_accessed(session=session, item=_item("x"), now=NOW, previous_tier="warm")
    assert _controller_state(session)["threshold"] == 0.7
    assert _controller_state(session)["moves"] == []


def test_both_hookimpls_answer_one_access_through_pluggy():
    pm = pluggy.PluginManager("veil")
    pm.add_hookspecs(veil.hookspecs)
    pm.register(veil_fsrs, name="veil_fsrs")
    pm.register(evict_plugin, name="veil_fsrs_evict")
    session, items = _evicted_session()
    s1 = items[1]  # evicted at NOW, S = 0.02 day (the default), D = 5
    expected_s, expected_d = _oracle_review(0.02, 5.0, 1, 3)
    pm.hook.item_accessed(
        session=session, item=s1, access="hydrate", now=NOW + DAY, previous_tier="warm"
    )
    # The scorer reviewed it: S 0.02 -> 0.670 day one day later, as the oracle says...
    assert s1.stability == pytest.approx(expected_s, rel=1e-12)
    assert s1.difficulty == pytest.approx(expected_d, rel=1e-12)
    # ...but a day is past the 1800 s re-request window: the threshold stays.
    assert _controller_state(session)["threshold"] == 0.7
    s3 = items[3]
    pm.hook.item_accessed(
        session=session, item=s3, access="hydrate", now=NOW + 600, previous_tier="warm"
    )
    assert _controller_state(session)["threshold"] == 0.75
