"""Eviction of veil_fsrs: the three stages, protection, pairing, the hard budget, the
controller, the hook, and a property over random batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pluggy
import pytest
import veil_fsrs
from hypothesis import given, settings
from hypothesis import strategies as st
from veil_fsrs import evict_plugin
from veil_fsrs.eviction import Controller, evict_pass, plan_eviction
from veil_fsrs.settings import ControllerSettings, FsrsContextSettings, design_reference_context

import veil.hookspecs
from veil.core.prompt.items import ItemBatch
from veil.core.types import ITEM_KINDS, ContextItem

NOW = 1_750_000_000.0
STEP = 100  # current step: the protected window is steps 89..100
PROTECTED = "over budget: protected"


reference_settings = design_reference_context  # the values these tests were worked out on


def item(name: str, **fields) -> ContextItem:
    base = {
        "id": name,
        "content": name,
        "source": "memory",
        "step": 10,
        "tokens": 100,
        "access_count": 2,
        "created_at": NOW,
        "last_access": NOW,
    }
    base.update(fields)
    return ContextItem(**base)


def plan(items, scores, budget, used, threshold=0.7, **kwargs):
    kwargs.setdefault("settings", reference_settings())
    kwargs.setdefault("current_step", STEP)
    kwargs.setdefault("now", NOW)
    return plan_eviction(ItemBatch(items), scores, budget, used, threshold=threshold, **kwargs)


# --- stages -----------------------------------------------------------------------------------


def test_stage1_takes_stale_single_use_tool_groups_only_under_pressure():
    # S = 0.02 day = 1728 s: 2000 s after the last access R(t, S) < R(S, S) = 0.9 (stale),
    # 1000 s after it R > 0.9 (fresh).
    stale = {
        "source": "tool_result",
        "access_count": 0,
        "stability": 0.02,
        "last_access": NOW - 2000,
    }
    stale_call = {**stale, "source": "tool_call"}
    items = [
        item("stale", **stale),
        item("used_twice", **{**stale, "access_count": 2}),
        item("fresh", **{**stale, "access_count": 1, "last_access": NOW - 1000}),
        item("pinned", pinned=True, **stale),
        item("recent_step", step=95, **stale),  # in the window 89..100
        item("once", **{**stale, "access_count": 1}),
        item("old_turn", **{**stale, "source": "assistant", "kind": "exploration"}),  # a turn
        item("old_memory", **{**stale, "source": "memory"}),  # not a tool call/result
        item("call_a", tool_call_id="a", **stale_call),  # both members stale: the pair goes
        item("result_a", tool_call_id="a", **stale),
        item("call_b", tool_call_id="b", **stale_call),  # its result was used 3 times: stays
        item("result_b", tool_call_id="b", **{**stale, "access_count": 3}),
    ]
    # Scores 0.9: e = 0.1 (0.08 for the exploration turn), 1 - e >= 0.9 >= 0.7, so stage 2
    # takes nothing and only stage 1 can evict here.
    scores = [0.9] * len(items)
    # No pressure: 600 <= 0.7 x 10,000, and 700 is not > 0.7 x 1000 (strict).
    assert plan(items, scores, budget=10_000, used=600).to_warm == []
    assert plan(items, scores, budget=1000, used=700).to_warm == []
    # Pressure: 710 > 700. Stage 1 takes every stale group (4 x 100 tokens -> 310), not only
    # the 10 tokens the soft target needs.
    result = plan(items, scores, budget=1000, used=710)
    assert result.to_warm == ["stale", "once", "call_a", "result_a"]
    assert result.reasons == dict.fromkeys(result.to_warm, "stale")
    assert result.threshold == 0.7 and result.to_cold == [] and result.report == []


def test_stage2_evicts_low_scorers_down_to_the_threshold():
    items = [item(f"s{k}", tokens=60) for k in range(5)]
    scores = [0.3, 0.1, 0.9, 0.2, 0.65]
    # used 800 > 0.7 x 1000: evict the lowest (0.1 -> 740, 0.2 -> 680 <= 700) and stop.
    result = plan(items, scores, budget=1000, used=800)
    assert result.to_warm == ["s1", "s3"]
    assert set(result.reasons.values()) == {"low score"}


def test_stage2_never_takes_items_scoring_at_or_above_the_threshold():
    items = [item(f"s{k}") for k in range(4)]
    assert plan(items, [0.7, 0.75, 0.9, 1.0], budget=1000, used=950).to_warm == []
    # No pressure (used <= 0.7 x budget): low scorers stay.
    assert plan(items, [0.0, 0.1, 0.2, 0.3], budget=1000, used=700).to_warm == []


def test_stage3_forces_the_lowest_out_while_over_budget():
    items = [item(f"s{k}") for k in range(4)]
    # Nothing below 0.7; used 1150 > 1000: 0.8 (-> 1050), then 0.85 (-> 950).
    result = plan(items, [0.9, 0.8, 0.95, 0.85], budget=1000, used=1150)
    assert result.to_warm == ["s1", "s3"]
    assert set(result.reasons.values()) == {"over budget"}


def test_stages_chain_and_ties_go_to_the_older_item():
    items = [item(f"s{k}") for k in range(5)]
    # stage 2 takes s1, s3 (0.5 each; target 700 from 950 needs 250 -> three 100-token items,
    # but only two score below 0.7), then stage 3 is not needed (750 <= 1000).
    result = plan(items, [0.8, 0.5, 0.9, 0.5, 0.75], budget=1000, used=950)
    assert result.to_warm == ["s1", "s3"]
    # equal scores: the older (earlier in the batch) goes first
    result = plan(items, [0.5] * 5, budget=1000, used=780)
    assert result.to_warm == ["s0"]


def test_pointer_tokens_are_counted_against_what_an_eviction_frees():
    items = [item(f"s{k}") for k in range(5)] + [item("tiny", tokens=30)]
    scores = [0.9] * 5 + [0.0]
    assert plan(items, scores, 1000, 1100, pointer_tokens=0).to_warm == ["tiny", "s0"]
    # each 100-token item frees 60; the 30-token item frees nothing and stays
    assert plan(items, scores, 1000, 1100, pointer_tokens=40).to_warm == ["s0", "s1"]


# --- protection and pairing -----------------------------------------------------------------


def test_protected_items_are_never_picked_by_stages_1_to_3():
    items = [
        item("pinned", pinned=True),
        item("correction", kind="correction"),
        item("intent", kind="intent"),
        item("step89", step=89),  # first step of the protected window (100 - 12 + 1)
        item("step88", step=88),  # just outside it
    ]
    result = plan(items, [0.0, 0.0, 0.0, 0.0, 0.99], budget=1000, used=2000)
    assert result.to_warm == ["step88"]
    assert PROTECTED not in result.reasons.values()
    assert any(line.startswith("still over budget by 900 tokens") for line in result.report)


def test_protected_window_follows_the_setting():
    items = [item("step95", step=95), item("step96", step=96)]
    narrow = reference_settings({"protectedResults": 5})  # steps 96..100
    assert plan(items, [0.0, 0.0], 1000, 2000, settings=narrow).to_warm == ["step95"]
    off = reference_settings({"protectedResults": 0})
    assert plan(items, [0.0, 0.0], 1000, 2000, settings=off).to_warm == ["step95", "step96"]


def test_turns_and_tool_results_have_their_own_windows():
    """protectedTurns covers turns, protectedResults everything else (here: results of the
    last 2 steps only, turns of the last 12)."""
    items = [
        item("turn95", step=95, source="assistant", kind="action"),
        item("result95", step=95, source="tool_result", tool_call_id="c95"),
        item("result99", step=99, source="tool_result", tool_call_id="c99"),
    ]
    settings = reference_settings({"protectedTurns": 12, "protectedResults": 2})
    result = plan(items, [0.0, 0.0, 0.0], 250, 300, settings=settings)
    assert result.to_warm == ["result95"]  # the turn of step 95 and the step-99 result stay


def test_a_call_and_its_result_leave_together_or_not_at_all():
    call = {"source": "tool_call", "tool_call_id": "c1", "tokens": 20}
    result_ = {"source": "tool_result", "tool_call_id": "c1", "tokens": 300}
    # The call scores 0 but its result 0.9: the group keeps the better score and stays.
    items = [item("call", **call), item("result", **result_), item("other", tokens=150)]
    result = plan(items, [0.0, 0.9, 0.3], budget=1000, used=800)
    assert result.to_warm == ["other"]
    # Over budget, the pair leaves whole (320 tokens) in stage 3.
    result = plan(items, [0.0, 0.9, 0.95], budget=1000, used=1100)
    assert result.to_warm == ["call", "result"]
    # One pinned member protects its partner too.
    items[1] = item("result", pinned=True, **result_)
    result = plan(items, [0.0, 0.9, 0.95], budget=1000, used=1100)
    assert result.to_warm == ["other"]


def test_turns_score_by_kind():
    turn = {"source": "assistant"}
    items = [
        item("exploration", kind="exploration", **turn),  # e = 0.8 x 0.8 = 0.64
        item("decision", kind="decision", **turn),  # e = 0.8 x 0.1 = 0.08
        item("correction", kind="correction", **turn),  # weight 0: never
        item("status", kind="status", **turn),  # e = 0.5 x 0.7 = 0.35
    ]
    scores = [0.2, 0.2, 0.0, 0.5]
    assert plan(items, scores, budget=1000, used=900).to_warm == ["exploration", "status"]
    result = plan(items, scores, budget=1000, used=1250)
    assert result.to_warm == ["exploration", "status", "decision"]
    assert result.reasons["decision"] == "over budget"
    # A zero turn weight set by configuration protects that kind of turn.
    no_status = reference_settings({"turnWeights": {"status": 0}})
    result = plan(items, scores, budget=1000, used=1250, settings=no_status)
    assert result.to_warm == ["exploration", "decision"]


def test_old_turn_similar_to_a_recent_one_is_rescued():
    old = item("old", source="assistant", kind="exploration")
    recent = item("recent", source="user", kind="intent", step=99)
    items = [old, recent]
    assert plan(items, [0.2, 0.5], budget=1000, used=800).to_warm == ["old"]
    # cosine 0.8 > 0.7: e = 0.64 x (1 - 0.8) = 0.128 -> keep 0.872, above the threshold
    near = {"old": [1.0, 0.0], "recent": [0.8, 0.6]}
    assert plan(items, [0.2, 0.5], budget=1000, used=800, embeddings=near).to_warm == []
    # vectors need not be unit length; cosine 0.6 is no rescue
    far = {"old": [2.0, 0.0], "recent": [0.6, 0.8]}
    assert plan(items, [0.2, 0.5], budget=1000, used=800, embeddings=far).to_warm == ["old"]
    # A stale single-use turn (5000 s > S = 0.02 day = 1728 s) is not taken by stage 1 even
    # under pressure (800 > 700): stage 2 ranks it by kind, and the rescue keeps it there.
    stale_old = item(
        "old", source="assistant", kind="exploration", access_count=0, last_access=NOW - 5000
    )
    result = plan([stale_old, recent], [0.2, 0.5], budget=1000, used=800)
    assert result.to_warm == ["old"] and result.reasons == {"old": "low score"}
    assert plan([stale_old, recent], [0.2, 0.5], 1000, 800, embeddings=near).to_warm == []
    # Over budget (stage 3) the rescued turn leaves after a less rescued one: "other" scores
    # 0.7, e = 0.3 x 0.8 = 0.24 (keep 0.76: not a stage-2 pick); "old" keeps e = 0.128.
    # 1090 - 100 = 990 <= 1000 after the first pick. Without the rescue "old" (e = 0.64) goes.
    other = item("other", source="assistant", kind="exploration", step=50)
    result = plan([old, other, recent], [0.2, 0.7, 0.5], 1000, 1090, embeddings=near)
    assert result.to_warm == ["other"] and result.reasons == {"other": "over budget"}
    assert plan([old, other, recent], [0.2, 0.7, 0.5], 1000, 1090).to_warm == ["old"]


# --- the hard budget ---------------------------------------------------------------------------


def _protected_batch():
    # Everything is protected: steps 89..100 are the window, the rest is pinned. 5350 tokens.
    return [
        item("pinned4", source="tool_result", tool_call_id="c4", pinned=True, step=5, tokens=600),
        item("user", source="user", kind="intent", step=95, tokens=300),
        item("call1", source="tool_call", tool_call_id="c1", step=96, tokens=50),
        item("result1", source="tool_result", tool_call_id="c1", step=96, tokens=400),
        item("call2", source="tool_call", tool_call_id="c2", step=97, tokens=50),
        item("result2", source="tool_result", tool_call_id="c2", step=97, tokens=1500),
        item("plan", source="assistant", kind="action", step=98, tokens=200),
        item("note", source="assistant", kind="status", step=99, tokens=150),
        item(
            "pinned_turn", source="assistant", kind="exploration", pinned=True, step=99, tokens=100
        ),
        item("pinned3", source="tool_result", tool_call_id="c3", pinned=True, tokens=2000),
    ]


def _moved_line(budget: int, over: int, groups: int, turns: int) -> str:
    return (
        f"{PROTECTED}: the items eviction may not pick exceed the budget of {budget} tokens by "
        f"{over}; moved {groups} protected group(s) to the warm tier ({turns} of them turns; a "
        "call and its result always together)"
    )


def test_hard_budget_moves_window_tool_groups_oldest_first_then_turns_then_pinned():
    items = _protected_batch()
    used = sum(i.tokens for i in items)
    assert used == 5350
    scores = [0.5] * len(items)
    # Over by 350: the oldest window tool group c1 (450) is enough (4900 <= 5000); the larger
    # c2 (1550) stays although it alone would also do.
    result = plan(items, scores, budget=5000, used=used)
    assert result.to_warm == ["call1", "result1"]
    assert result.reasons == {"call1": PROTECTED, "result1": PROTECTED}
    assert result.report == [_moved_line(5000, 350, 1, 0)]
    # Over by 2050: c1 (-> 4900), c2 (-> 3350), then the oldest window turn "plan" (200 ->
    # 3150 <= 3300). The intent turn is never forced out; "note" is newer; pinned stay.
    result = plan(items, scores, budget=3300, used=used)
    assert result.to_warm == ["call1", "result1", "call2", "result2", "plan"]
    assert result.report == [_moved_line(3300, 2050, 3, 1)]
    # Over by 2750: c1, c2, plan, note (-> 3000), then the pinned tool groups largest first:
    # pinned3 (2000 -> 1000 <= 2600); the older but smaller pinned4 stays.
    result = plan(items, scores, budget=2600, used=used)
    assert result.to_warm == ["call1", "result1", "call2", "result2", "plan", "note", "pinned3"]
    assert result.report == [_moved_line(2600, 2750, 5, 2)]
    # Budget 300: every forceable group goes (5350 - 450 - 1550 - 200 - 150 - 2000 - 600 =
    # 400); the intent turn (300) and the pinned turn (100) remain: 100 over.
    result = plan(items, scores, budget=300, used=used)
    assert result.to_warm == [
        "pinned4",
        "call1",
        "result1",
        "call2",
        "result2",
        "plan",
        "note",
        "pinned3",
    ]
    assert set(result.reasons.values()) == {PROTECTED}
    assert result.report[0] == _moved_line(300, 5050, 6, 2)
    assert result.report[1].startswith("still over budget by 100 tokens")
    assert len(result.report) == 2


def test_budget_that_cannot_be_met_is_reported_not_hidden():
    items = [
        item("correction", source="assistant", kind="correction", step=97, tokens=200),
        item("t0", source="assistant", kind="status", step=98, tokens=300),
        item("intent", source="user", kind="intent", step=99, tokens=800),
        item("pinned", source="assistant", pinned=True, step=100, tokens=800),
    ]
    # 2100 used, budget 1000: only the ordinary window turn t0 may be forced out
    # (2100 - 300 = 1800); the correction, intent and pinned turns stay: 800 over.
    result = plan(items, [0.0] * 4, budget=1000, used=2100)
    assert result.to_warm == ["t0"] and result.reasons == {"t0": PROTECTED}
    assert result.report[0] == _moved_line(1000, 1100, 1, 1)
    assert result.report[1].startswith(
        "still over budget by 800 tokens: what remains cannot be evicted"
    )
    assert len(result.report) == 2


def test_an_idle_pass_does_not_read_the_scores():
    from veil.core.types import LazyScores

    calls = []

    def compute():
        calls.append(1)
        return [0.1]

    items = [item("a")]
    lazy = LazyScores(compute, 1)
    assert plan(items, lazy, 100, 70).to_warm == [] and not lazy.computed  # 70 <= 0.7 x 100
    assert plan(items, lazy, 100, 200).to_warm == ["a"] and calls == [1]
    assert plan(items, lazy, 100, 200).to_warm == ["a"] and calls == [1]  # computed once
    with pytest.raises(ValueError, match="no score implementation"):
        list(LazyScores(lambda: None, 1))


def test_bad_arguments_are_named():
    items = [item("a")]
    with pytest.raises(ValueError, match="scores: expected 1"):
        plan(items, [0.1, 0.2], 100, 10)
    with pytest.raises(ValueError, match="scores"):
        plan(items, [float("nan")], 100, 200)  # read (and checked) under pressure
    with pytest.raises(ValueError, match="budget_tokens"):
        plan(items, [0.1], 0, 10)
    with pytest.raises(ValueError, match="embeddings"):
        plan(
            [item("o", source="user"), item("r", source="user", step=99)],
            [0.1, 0.1],
            100,
            90,
            embeddings={"o": [1.0, 0.0], "r": [1.0, 0.0, 0.0]},
        )


# --- the controller ----------------------------------------------------------------------------


def controller(state=None) -> Controller:
    return Controller(
        {} if state is None else state,
        ControllerSettings(threshold=0.7, min=0.6, max=0.85, step=0.05),
    )


def test_controller_lowers_on_a_burst_of_pressure_evictions():
    c = Controller(
        {},
        ControllerSettings(
            threshold=0.7,
            min=0.6,
            max=0.85,
            step=0.05,
            low_water=0.75,
            low_water_min=0.6,
            low_water_max=0.9,
        ),
    )
    for t in (0.0, 30.0):
        c.record_pass(t, ["x"], pressure=True)
    assert c.threshold == 0.7
    c.record_pass(60.0, ["x"], pressure=True)  # 3 within 60 s (inclusive)
    assert c.threshold == 0.65
    c.record_pass(61.0, [], pressure=True)  # the burst restarts after a move
    assert c.threshold == 0.65
    c.record_pass(90.0, [], pressure=True)
    c.record_pass(120.0, [], pressure=True)
    assert c.threshold == 0.6
    for t in (121.0, 122.0, 123.0):
        c.record_pass(t, [], pressure=True)
    assert c.threshold == 0.6  # clamped at min
    assert [m["to"] for m in c.state["moves"]] == [0.65, 0.6]
    # bursts leave the low-water mark alone (issue 18: the cache cap answers frequent passes)
    assert c.state["low_water"] == 0.75 and c.low_water == 0.6  # never above the threshold


def test_controller_ignores_spaced_or_stale_only_evictions():
    c = controller()
    for t in (0.0, 61.0, 122.0):
        c.record_pass(t, ["x"], pressure=True)
    assert c.threshold == 0.7
    for t in (200.0, 201.0, 202.0, 203.0):
        c.record_pass(t, ["y"], pressure=False)
    assert c.threshold == 0.7


def test_controller_raises_after_calm_periods():
    c = controller()
    c.tick(1000.0)
    c.tick(1299.0)
    assert c.threshold == 0.7
    c.tick(1300.0)
    assert c.threshold == 0.75
    c.tick(1900.0)  # two more full periods
    assert c.threshold == 0.85
    c.tick(99_999.0)
    assert c.threshold == 0.85  # clamped at max
    # a pressure eviction restarts the calm period
    d = controller()
    d.tick(0.0)
    d.record_pass(200.0, ["x"], pressure=True)
    d.tick(450.0)
    assert d.threshold == 0.7
    d.tick(500.0)
    assert d.threshold == 0.75


def test_controller_raises_when_an_evicted_item_is_requested_again():
    c = controller()
    c.record_pass(100.0, ["a", "b"], pressure=False)
    assert c.on_rerequest("a", 1900.0) is True  # 1800 s later: inside the window
    assert c.threshold == 0.75
    assert c.on_rerequest("a", 1901.0) is False  # counted once
    assert c.on_rerequest("b", 1901.0) is False  # 1801 s: too late
    assert c.on_rerequest("never-evicted", 2000.0) is False
    assert c.threshold == 0.75


def test_controller_is_deterministic_and_json_safe():
    def run() -> dict:
        c = controller()
        for t, ids, pressure in [
            (0, ["a"], True),
            (10, ["b"], True),
            (20, [], True),
            (400, ["c"], False),
            (900, [], True),
        ]:
            c.tick(float(t))
            c.record_pass(float(t), ids, pressure)
        c.on_rerequest("c", 950.0)
        return c.state

    first, second = run(), run()
    assert first == second
    assert json.loads(json.dumps(first)) == first
    # 0.65 at t=20 (burst), 0.7 at 400 (calm since 20), 0.75 at 900 (calm since 320),
    # 0.8 at 950 (re-request of "c", evicted at 400)
    assert [m["to"] for m in first["moves"]] == [0.65, 0.7, 0.75, 0.8]
    assert first["threshold"] == 0.8


def test_controller_state_is_clamped_to_new_bounds():
    c = Controller(
        {"threshold": 0.95}, ControllerSettings(threshold=0.7, min=0.6, max=0.85, step=0.05)
    )
    assert c.threshold == 0.85


def test_evict_pass_detects_evicted_items_coming_back():
    c = controller()
    call = {"source": "tool_result", "tool_call_id": "c1"}
    # Single use, 5000 s after its last access with S = 0.02 day = 1728 s: stale.
    stale = item("stale", access_count=0, last_access=NOW - 5000, **call)
    first = evict_pass(
        ItemBatch([stale, item("b")]),
        [0.9, 0.9],
        1000,
        800,  # > 0.7 x 1000: pressure, so stage 1 runs; 800 - 100 = 700 leaves stage 2 idle
        settings=reference_settings(),
        controller=c,
        current_step=STEP,
        now=NOW,
    )
    assert first.to_warm == ["stale"] and first.reasons == {"stale": "stale"}
    assert c.state["evicted"] == {"stale": NOW}
    assert c.state["burst"] == []  # a stale-only pass is not a pressure eviction
    back = item("stale", access_count=1, last_access=NOW + 50, **call)  # hydrated: live again
    evict_pass(
        ItemBatch([back, item("b")]),
        [0.9, 0.9],
        10_000,
        200,
        settings=reference_settings(),
        controller=c,
        current_step=STEP,
        now=NOW + 60,
    )
    assert c.threshold == 0.75 and "stale" not in c.state["evicted"]


# --- hooks and packaging -------------------------------------------------------------------


def _session(**extra):
    config = SimpleNamespace(settings=SimpleNamespace(context=reference_settings()))
    return SimpleNamespace(config=config, state={}, **extra)


def test_evict_hook_keeps_controller_state_in_the_session():
    session = _session(step=STEP, clock=lambda: NOW)
    items = [item(f"s{k}", tokens=300) for k in range(4)]
    scores = np.array([0.9, 0.8, 0.95, 0.85])
    result = evict_plugin.evict(
        session=session,
        items=ItemBatch(items),
        scores=scores,
        budget_tokens=1000,
        used_tokens=1250,
        paged_out=None,
        paged_scores=None,
    )
    # A 300-token item frees 300 - 9 (its pointer stub): one leaves in stage 3, the lowest
    # score 0.8 (1250 - 291 = 959 <= 1000). With a 96-token stub two would (1046, then 842).
    assert evict_plugin.DEFAULT_POINTER_TOKENS == 9 == FsrsContextSettings().pointer_tokens
    assert result.to_warm == ["s1"] and result.report == []
    state = session.state["veil_fsrs"]["controller"]
    assert state["evicted"] == {"s1": NOW}
    assert state["burst"] == [NOW]
    json.dumps(session.state)
    # context.pointerTokens is read from the settings.
    wide = _session(step=STEP, clock=lambda: NOW)
    wide.config.settings.context = reference_settings({"pointerTokens": 96})
    result = evict_plugin.evict(
        session=wide,
        items=ItemBatch(items),
        scores=scores,
        budget_tokens=1000,
        used_tokens=1250,
        paged_out=None,
        paged_scores=None,
    )
    assert result.to_warm == ["s1", "s3"]


def test_evict_hook_without_clock_or_step_uses_the_items():
    session = _session()
    items = ItemBatch([item("old", step=1, last_access=NOW - 10), item("new", step=40)])
    result = evict_plugin.evict(
        session=session,
        items=items,
        scores=[0.1, 0.1],
        budget_tokens=100,
        used_tokens=200,
        paged_out=None,
        paged_scores=None,
    )
    assert result.to_warm == ["old"]  # "new" is in the window of the newest step (40)
    assert session.state["veil_fsrs"]["controller"]["burst"] == [NOW]
    empty = evict_plugin.evict(
        session=session,
        items=[],
        scores=[],
        budget_tokens=100,
        used_tokens=0,
        paged_out=None,
        paged_scores=None,
    )
    assert empty.to_warm == [] and empty.threshold == 0.7


class OtherScorer:
    """A third-party scorer: everything scores 0.1."""

    @veil.hookspecs.hookimpl
    def score(self, session, items, task_tags, now):
        return [0.1] * len(items)


def test_scorer_can_be_blocked_while_eviction_keeps_working():
    pm = pluggy.PluginManager("veil")
    pm.add_hookspecs(veil.hookspecs)
    pm.set_blocked("veil_fsrs")  # plugins.disable: ["veil_fsrs"]
    assert pm.register(veil_fsrs, name="veil_fsrs") is None
    pm.register(evict_plugin, name="veil_fsrs_evict")
    pm.register(OtherScorer(), name="other")
    session = _session(step=STEP, clock=lambda: NOW)
    items = ItemBatch([item("a"), item("b")])
    scores = pm.hook.score(session=session, items=items, task_tags=frozenset(), now=NOW)
    assert scores == [0.1, 0.1]
    result = pm.hook.evict(
        session=session,
        items=items,
        scores=scores,
        budget_tokens=1000,
        used_tokens=800,
        paged_out=None,
        paged_scores=None,
    )
    assert result.to_warm == ["a", "b"]
    # and the other way round: our scorer alone answers score, no evict implementation
    pm2 = pluggy.PluginManager("veil")
    pm2.add_hookspecs(veil.hookspecs)
    pm2.register(veil_fsrs, name="veil_fsrs")
    assert (
        pm2.hook.evict(
            session=session,
            items=items,
            scores=scores,
            budget_tokens=1,
            used_tokens=1,
            paged_out=None,
            paged_scores=None,
        )
        is None
    )
    assert len(pm2.hook.score(session=session, items=items, task_tags=frozenset(), now=NOW)) == 2


def test_distribution_declares_both_entry_points():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    assert data["project"]["entry-points"]["veil"] == {
        "veil_fsrs": "veil_fsrs",
        "veil_fsrs_evict": "veil_fsrs.evict_plugin",
    }


# --- property ------------------------------------------------------------------------------

TURN_SOURCES = ("user", "assistant")
SOURCES = ("user", "assistant", "tool_call", "tool_result", "memory")


@st.composite
def batches(draw):
    count = draw(st.integers(1, 30))
    items = []
    for k in range(count):
        source = draw(st.sampled_from(SOURCES))
        call_id = None
        if source in ("tool_call", "tool_result"):
            call_id = draw(st.sampled_from([None, "c0", "c1", "c2", "c3", "c4"]))
        items.append(
            item(
                f"i{k}",
                source=source,
                kind=draw(st.sampled_from(ITEM_KINDS)),
                step=draw(st.integers(0, 30)),
                tokens=draw(st.integers(0, 600)),
                tool_call_id=call_id,
                pinned=draw(st.integers(0, 3)) == 0,
                access_count=draw(st.integers(0, 3)),
                stability=draw(st.sampled_from([0.02, 0.5, 9.0])),
                last_access=NOW - draw(st.floats(0, 5 * 86_400)),
            )
        )
    scores = draw(st.lists(st.floats(0, 1), min_size=count, max_size=count))
    return items, scores


@settings(max_examples=300, deadline=None)
@given(
    batch=batches(),
    budget=st.integers(1, 6000),
    extra=st.integers(0, 400),
    threshold=st.sampled_from([0.6, 0.7, 0.85]),
    current_step=st.integers(0, 30),
    pointer_tokens=st.sampled_from([0, 20]),
)
def test_plan_invariants(batch, budget, extra, threshold, current_step, pointer_tokens):
    items, scores = batch
    used = sum(i.tokens for i in items) + extra
    result = plan(
        items,
        scores,
        budget,
        used,
        threshold=threshold,
        current_step=current_step,
        pointer_tokens=pointer_tokens,
    )
    chosen = set(result.to_warm)
    assert len(chosen) == len(result.to_warm) and chosen <= {i.id for i in items}
    assert set(result.reasons) == chosen

    groups: dict[str, list[ContextItem]] = {}  # in batch order of first appearance
    for it in items:
        groups.setdefault(it.tool_call_id or f"own:{it.id}", []).append(it)
    weights = reference_settings().turn_weights.model_dump()

    def strong(it: ContextItem) -> bool:  # blocked whatever its step
        return (
            it.pinned
            or it.kind in ("correction", "intent")
            or (it.source in TURN_SOURCES and weights.get(it.kind, 1.0) == 0)
        )

    def category(members: list[ContextItem]) -> str:
        """What stage 4 may do with a group (module docstring), judged from its members."""
        has_turn = any(m.source in TURN_SOURCES for m in members)
        has_tool = any(m.source in ("tool_call", "tool_result") for m in members)
        is_strong = any(strong(m) for m in members)
        if not is_strong and not any(m.step > current_step - 12 for m in members):
            return "free"  # stages 1-3 may take it
        if has_tool and not has_turn:
            return "pinned_tool" if is_strong else "window_tool"
        if has_turn and not has_tool and not is_strong:
            return "window_turn"
        return "never"  # intents, corrections, pinned turns, protected memory items

    protected_reasons = stale_reasons = False
    max_freeable = 0
    taken_by_category: dict[str, list[tuple[bool, int]]] = {}
    for members in groups.values():
        taken = [m.id in chosen for m in members]
        assert all(taken) or not any(taken), "a tool call was split from its result"
        freed = sum(max(m.tokens - pointer_tokens, 0) for m in members)
        kind = category(members)
        if freed > 0 and kind != "never":
            max_freeable += freed
            taken_by_category.setdefault(kind, []).append((all(taken), freed))
        if not all(taken):
            continue
        assert freed > 0, "a group that frees nothing was evicted"
        reasons = {result.reasons[m.id] for m in members}
        assert len(reasons) == 1
        reason = reasons.pop()
        assert kind != "never"
        assert not any(m.source in TURN_SOURCES and strong(m) for m in members)
        assert (reason == PROTECTED) == (kind != "free")
        protected_reasons |= reason == PROTECTED
        if reason == "stale":  # only tool calls/results, only under pressure
            stale_reasons = True
            assert all(m.source in ("tool_call", "tool_result") for m in members)
    if stale_reasons:
        assert used > threshold * budget
    assert protected_reasons == any(line.startswith(PROTECTED) for line in result.report)

    # Stage 4's order: window tool groups oldest first, then window turns oldest first, then
    # pinned tool groups largest first; a category is used only once the previous one is spent.
    def prefix(flags: list[bool]) -> bool:
        return flags == sorted(flags, reverse=True)

    window_tool = [t for t, _ in taken_by_category.get("window_tool", [])]
    window_turn = [t for t, _ in taken_by_category.get("window_turn", [])]
    pinned_tool = taken_by_category.get("pinned_tool", [])
    assert prefix(window_tool) and prefix(window_turn)
    if any(window_turn) or any(t for t, _ in pinned_tool):
        assert all(window_tool)
    if any(t for t, _ in pinned_tool):
        assert all(window_turn)
    for k, (taken_k, freed_k) in enumerate(pinned_tool):
        for taken_j, freed_j in pinned_tool[k + 1 :]:  # a later group
            assert not (taken_j and not taken_k and freed_j <= freed_k)
            assert not (taken_k and not taken_j and freed_j > freed_k)

    freed_now = sum(max(i.tokens - pointer_tokens, 0) for i in items if i.id in chosen)
    if used - max_freeable <= budget:  # the unforceable items alone fit
        assert used - freed_now <= budget
    else:
        assert freed_now == max_freeable
        assert any(line.startswith("still over budget") for line in result.report)


def test_rescue_reads_vectors_that_arrive_later_and_many_rows():
    old = item("old", source="assistant", kind="exploration")
    recent = item("recent", source="user", kind="intent", step=99)
    embeddings = {"recent": [0.8, 0.6]}
    assert plan([old, recent], [0.2, 0.5], 1000, 800, embeddings=embeddings).to_warm == ["old"]
    embeddings["old"] = [1.0, 0.0]  # embedded after the first pass
    assert plan([old, recent], [0.2, 0.5], 1000, 800, embeddings=embeddings).to_warm == []
    # Many old turns (the row store grows); only the one close to the recent turn is rescued.
    olds = [item(f"o{k}", source="assistant", kind="exploration", tokens=10) for k in range(300)]
    for k in range(300):
        embeddings[f"o{k}"] = [0.0, 1.0] if k != 123 else [0.8, 0.6]
    # used 3100 > 0.7 x 150: stage 2 takes all 299 unrescued turns (3100 - 2990 = 110 <= 150)
    result = plan(
        [*olds, recent], [0.2] * 300 + [0.5], budget=150, used=3100, embeddings=embeddings
    )
    assert "o123" not in result.to_warm and len(result.to_warm) == 299


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 400),
    st.integers(0, 2**32 - 1),
    st.sampled_from([2, 5, 1000]),  # distinct keys: heavy ties .. almost none
    st.floats(0.0, 1.2),
)
def test_ranked_prefix_equals_the_prefix_of_the_full_stable_ranking(m, seed, levels, share):
    """The partial selection takes exactly what the full stable sort would take, ties and
    all, whether the first guess is enough or has to grow (shares above 1: everything)."""
    from veil_fsrs.eviction import _ranked_prefix, _take_prefix

    rng = np.random.default_rng(seed)
    n_groups = m + 5
    key = rng.integers(0, levels, n_groups) / levels - 1.0  # like -group_e: in [-1, 0]
    if seed % 3 == 0:  # a NaN eviction score (a NaN embedding's cosine) sorts last, as argsort
        key[rng.random(n_groups) < 0.3] = np.nan
    freed = rng.choice([0.0, 1.0, 7.0, 250.0, 3000.0], n_groups)
    candidates = np.sort(rng.choice(n_groups, m, replace=False))
    used = 1_000_000.0
    target = used - share * float(freed[candidates].sum())
    expected = _take_prefix(
        candidates[np.argsort(key[candidates], kind="stable")], freed, used, target
    )
    taken, left = _ranked_prefix(candidates, key, freed, used, target)
    assert taken.tolist() == expected[0].tolist()
    assert left == expected[1]


def test_ranked_prefix_by_hand():
    from veil_fsrs.eviction import _ranked_prefix

    key = np.array([-0.9, -0.2, -0.9, -0.5, -0.9])
    freed = np.array([10.0, 10.0, 10.0, 10.0, 10.0])
    groups = np.arange(5)
    # highest eviction score first, ties oldest first: 0, 2, 4, then 3, then 1
    assert _ranked_prefix(groups, key, freed, 100.0, 75.0)[0].tolist() == [0, 2, 4]
    assert _ranked_prefix(groups, key, freed, 100.0, 65.0)[0].tolist() == [0, 2, 4, 3]
    taken, used = _ranked_prefix(groups, key, freed, 100.0, 0.0)
    assert (taken.tolist(), used) == ([0, 2, 4, 3, 1], 50.0)  # all of it: still over target
    assert _ranked_prefix(groups, key, freed, 60.0, 60.0)[0].tolist() == []  # no pressure


def test_ranked_prefix_with_mostly_nan_scores_takes_what_argsort_takes():
    """A reviewer's case: the k-th lowest key is NaN (fewer real keys than the first guess)."""
    from veil_fsrs.eviction import _stages_2_3

    group_e = np.full(1000, np.nan)
    group_e[:10] = 0.9
    freed = np.full(1000, 10.0)
    expected, got = np.zeros(1000, np.int8), np.zeros(1000, np.int8)
    ranking = np.argsort(-group_e, kind="stable")
    used_full = _stages_2_3(
        ranking, np.ones(1000, bool), expected, group_e, freed, 10_500.0, 0.7, 10_000.0, 7_000.0
    )
    used = _stages_2_3(
        None, np.ones(1000, bool), got, group_e, freed, 10_500.0, 0.7, 10_000.0, 7_000.0
    )
    assert used == used_full == 10_000.0
    assert got.tolist() == expected.tolist()
    # stage 2: the 10 scored groups (retention 0.1 < 0.7); stage 3: 40 NaN ones, oldest first
    assert np.flatnonzero(got == 2).tolist() == list(range(10))
    assert np.flatnonzero(got == 3).tolist() == list(range(10, 50))


# --- the low-water mark (issue 18) -------------------------------------------------------------


def test_a_pass_frees_room_down_to_the_low_water_mark():
    """The pass starts at the threshold but frees down to the low-water mark, so the next steps
    append without another pass."""
    items = [item(f"s{k}", tokens=60) for k in range(8)]
    scores = [0.3, 0.1, 0.5, 0.2, 0.65, 0.4, 0.35, 0.45]
    # used 800 > 0.7 x 1000. Without a low-water mark: the lowest until used <= 700 (0.1, 0.2).
    assert plan(items, scores, budget=1000, used=800).to_warm == ["s1", "s3"]
    # With low water 0.5: down to 500, lowest first: 0.1 (740), 0.2 (680), 0.3 (620),
    # 0.35 (560), 0.4 (500); the plan lists them in batch order.
    result = plan(items, scores, budget=1000, used=800, low_water=0.5)
    assert result.to_warm == ["s0", "s1", "s3", "s5", "s6"]
    assert set(result.reasons.values()) == {"low score"}
    # no pressure (700 is not > 0.7 x 1000): no pass at all, whatever the low-water mark
    assert plan(items, scores, budget=1000, used=700, low_water=0.5).to_warm == []
    # a low-water mark above the threshold counts as the threshold
    assert plan(items, scores, budget=1000, used=800, low_water=0.9).to_warm == ["s1", "s3"]


def test_the_controller_moves_the_low_water_mark_on_its_signals():
    settings = ControllerSettings(
        threshold=1.0,
        min=0.98,
        max=1.0,
        step=0.01,
        low_water=0.75,
        low_water_step=0.05,
        low_water_min=0.6,
        low_water_max=0.9,
    )
    c = Controller({}, settings)
    assert c.low_water == 0.75
    for t in (0.0, 30.0, 60.0):  # a burst of 3 passes within 60 s: the threshold only
        c.record_pass(t, ["a"], pressure=True)
    assert (c.threshold, c.low_water) == (0.99, 0.75)
    assert c.on_rerequest("a", 100.0) is True  # an evicted item asked for again: raise both
    assert (c.threshold, c.low_water) == (1.0, 0.8)
    c.tick(360.0)  # 300 s calm since the last pass (60 s): raise, within the bounds
    assert (c.threshold, c.low_water) == (1.0, 0.85)
    c.tick(5000.0)
    assert c.low_water == 0.9  # low_water_max
    # never above the threshold in effect
    low = Controller(
        {},
        ControllerSettings(
            threshold=0.7, min=0.6, max=0.85, low_water=0.8, low_water_min=0.6, low_water_max=0.9
        ),
    )
    assert low.low_water == 0.7


def test_the_low_water_settings_must_be_ordered():
    with pytest.raises(ValueError, match="lowWaterMin <= lowWater <= lowWaterMax"):
        ControllerSettings(low_water=0.95, low_water_min=0.6, low_water_max=0.9)


def test_the_cache_cap_keeps_a_step_no_dearer_than_the_whole_history():
    """Worked by hand (B 6,800, 400 tokens a step, cached input at 0.1): 20,000 tokens of
    history allow 2,000 a step; at 0.77 passes cost 400 x 0.77 / 0.23 = 1,339 and the cached
    prompt 0.1 x 6,800 x 1.77 / 2 = 602 (1,941), at 0.78 1,418 + 605 = 2,023: 0.77."""
    from veil_fsrs.controller import cache_cap

    def cap(history: float) -> float:
        return cache_cap(history, round(history / 400), 6800, price=0.1, low=0.6, high=0.9)

    assert cap(20_000) == 0.77
    assert cap(40_000) == 0.89  # 3,236 + 643 = 3,879 <= 4,000; at 0.90 4,246
    assert cap(10_000) == 0.6  # even 0.6 costs 1,144 > 1,000: the floor
    assert cap(1_000_000) == 0.9  # the ceiling
    assert cache_cap(0, 0, 6800, price=0.1, low=0.6, high=0.9) == 0.9  # nothing known yet


def test_the_cache_allowance_scales_what_a_step_may_cost():
    """By hand, as above with allowance 2: 20,000 tokens of history allow 4,000 a step; at 0.89
    passes cost 400 x 0.89 / 0.11 = 3,236 and the cached prompt 0.1 x 6,800 x 1.89 / 2 = 643
    (3,879), at 0.90 3,600 + 646 = 4,246: 0.89 instead of 0.77. Settings carry it to the pass."""
    from veil_fsrs.controller import cache_cap

    assert cache_cap(20_000, 50, 6800, price=0.1, low=0.6, high=0.9, allowance=2.0) == 0.89
    assert cache_cap(20_000, 50, 6800, price=0.1, low=0.6, high=0.9, allowance=1.0) == 0.77
    assert ControllerSettings().cache_allowance == 1.0
    assert ControllerSettings.model_validate({"cacheAllowance": 2.5}).cache_allowance == 2.5
    with pytest.raises(ValueError):
        ControllerSettings.model_validate({"cacheAllowance": 0})


def test_a_pass_frees_down_to_the_cache_cap_when_the_history_is_short():
    settings = ControllerSettings(
        threshold=1.0, min=0.98, max=1.0, low_water=0.9, low_water_min=0.6, low_water_max=0.9
    )
    items = [item(f"s{k}", tokens=100) for k in range(10)]
    scores = [0.1 * k for k in range(10)]

    def run(history):
        c = Controller({}, settings)
        return evict_pass(
            ItemBatch(items),
            scores,
            1000,
            1050,
            settings=reference_settings(),
            controller=c,
            current_step=STEP,
            now=NOW,
            history=history,
        )

    # no history known: the controller's mark, 0.9 -> 1050 - 200 = 850 <= 900
    assert len(run(None).to_warm) == 2
    # 2,000 tokens of history over 20 steps for a budget of 1,000: the cap is the floor, 0.6
    assert len(run(lambda: (2000.0, 20)).to_warm) == 5  # 1050 - 500 = 550 <= 600
    # the same history with cacheAllowance 10: a step may cost 10 x 0.1 x 2,000 = 2,000; at 0.9
    # passes cost 100 x 0.9 / 0.1 = 900 and the cached prompt 0.1 x 1,000 x 1.9 / 2 = 95: 0.9
    settings = ControllerSettings(
        threshold=1.0,
        min=0.98,
        max=1.0,
        low_water=0.9,
        cache_allowance=10,
        low_water_min=0.6,
        low_water_max=0.9,
    )
    assert len(run(lambda: (2000.0, 20)).to_warm) == 2


def test_by_default_a_pass_frees_down_to_a_fixed_low_water_mark_of_0_7():
    """Issue 29's default (bench/RESULTS.md): the mark is 0.7 of the budget, whatever the
    history. By hand: ten groups of 100 tokens, budget 1,000, 1,050 in use: down to 700 means
    freeing 350, so the four lowest scorers go (the adaptive mark before, 0.9, freed two), and
    a long or a short history changes nothing (the cache cap is held to [0.7, 0.7])."""
    settings = ControllerSettings()
    assert (settings.low_water, settings.low_water_min, settings.low_water_max) == (0.7, 0.7, 0.7)
    items = [item(f"s{k}", tokens=100) for k in range(10)]
    scores = [0.1 * k for k in range(10)]

    def run(history):
        return evict_pass(
            ItemBatch(items),
            scores,
            1000,
            1050,
            settings=reference_settings(),
            controller=Controller({}, settings),
            current_step=STEP,
            now=NOW,
            history=history,
        )

    for history in (None, lambda: (2000.0, 20), lambda: (1_000_000.0, 100)):
        assert sorted(run(history).to_warm) == ["s0", "s1", "s2", "s3"]
