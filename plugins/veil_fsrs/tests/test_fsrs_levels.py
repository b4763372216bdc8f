"""Levels (issue 29): whole, excerpt or stub per item, chosen by the value of the names each
line owns (veil_fsrs.levels), the reference-weight table, and the hook's use of both."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from veil_fsrs.levels import (
    EXCERPT,
    LOW_VALUE,
    MARKER_TOKENS,
    NameStats,
    line_info,
    plan_levels,
)
from veil_fsrs.reference_weights import age_bucket, features, reference_weight
from veil_fsrs.settings import FsrsContextSettings

from veil.core.prompt.items import ItemBatch
from veil.core.prompt.tags import identifier_tokens
from veil.core.types import ContextItem

STEP = 40


def _item(name, content, *, index, step, source="tool_result", tokens=None, **fields):
    return ContextItem(
        id=name,
        content=content,
        source=source,
        kind=fields.pop("kind", "episodic" if source == "tool_result" else "action"),
        message_index=index,
        step=step,
        tokens=tokens if tokens is not None else len(content),
        **fields,
    )


def _stats(items):
    stats = NameStats()
    for item in items:
        stats.add(item, frozenset(identifier_tokens(item.content)))
    return stats


def _settings(**extra):
    base = {"protectedTurns": 0, "protectedResults": 1, "shallowReach": 0, "retentionWeight": 0}
    base.update(extra)
    return FsrsContextSettings.model_validate(base)


def _plan(items, budget, used, *, settings=None, low_water=None, paged=None, stats=None):
    return plan_levels(
        ItemBatch(items),
        np.full(len(items), 0.5),
        budget,
        used,
        settings=settings or _settings(),
        threshold=1.0,
        low_water=low_water,
        current_step=STEP,
        stats=stats or _stats([*items, *(paged or [])]),
        lines_of=line_info,
        pointer_tokens=9,
        paged_out=paged,
    )


# --- the weight table -----------------------------------------------------------------------


def test_age_buckets_follow_the_bounds():
    # bounds 1, 2, 4, 8, 16, 32: 0-1 -> 0, 2 -> 1, 3-4 -> 2, 5-8 -> 3, ..., 33+ -> 6
    assert [age_bucket(a) for a in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 500)] == [
        0, 0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
    ]  # fmt: skip
    assert features(9, 7, 3, None) == (6, 2, 3, 8)
    assert features(2, 0, 40, 5) == (2, 6, 0, 3)


def test_reference_weight_reads_its_cell_then_the_coarse_one_then_the_prior():
    raw = json.loads(
        resources.files("veil_fsrs").joinpath("data/reference_weights.json").read_text("utf-8")
    )
    cell, probability = next(iter(raw["table"].items()))
    a, age, r, said = (int(x) for x in cell.split(","))
    ages = {0: 0, 1: 2, 2: 3, 3: 5, 4: 9, 5: 17, 6: 40}
    assert reference_weight(a, r, ages[age], None if said == 8 else ages[said]) == probability
    # no fine cell for 6 mentions said 40 steps ago but seen 0 steps ago: the coarse (6, 0)
    assert "6,0,0,6" not in raw["table"]
    assert reference_weight(6, 0, 0, 40) == raw["coarse"]["6,0"]
    # names the agent keeps using weigh more than names seen once long ago
    assert reference_weight(6, 3, 0, 0) > 20 * reference_weight(0, 1, 40, None)


def test_name_stats_give_the_newest_holder_of_each_name():
    older = _item("older", "see src/a.py", index=3, step=1)
    turn = _item("turn", "I will edit src/a.py", index=4, step=2, source="assistant")
    newer = _item("newer", "src/a.py and src/b.py", index=5, step=2)
    stats = _stats([older, turn, newer])
    assert stats.owner == {"src/a.py": "newer", "src/b.py": "newer"}
    assert stats.assistant == {"src/a.py": 1}
    assert stats.results == {"src/a.py": 2, "src/b.py": 1}
    assert stats.last_step["src/a.py"] == 2 and stats.last_assistant_step["src/a.py"] == 2


# --- the choice -----------------------------------------------------------------------------


FILE = "\n".join(
    [
        "header line",  # 0: no name
        "def parse_value(text):",  # 1: parse_value
        "    pass",  # 2
        "class Parser_X:",  # 3: Parser_X
        "    pass",  # 4
        "footer",  # 5
    ]
)


def test_a_read_keeps_the_lines_whose_names_it_owns_and_a_superseded_copy_leaves():
    # two reads of the same file at steps 1 and 2, the newest step (40) fixed and large.
    # The newer read owns parse_value and Parser_X; the older owns nothing: a stub.
    old = _item("old", FILE, index=1, step=1, tokens=600)
    new = _item("new", FILE, index=3, step=2, tokens=600)
    now = _item("now", "x" * 10, index=5, step=STEP, tokens=500)
    used = 600 + 600 + 500
    plan = _plan([old, new, now], budget=1000, used=used, low_water=0.9)
    # Target 900: what stays is 500 + two stubs (18) -> room 382. Lines cost 600 x (chars+1) /
    # (len(FILE)+1); line 1 ("def parse_value(text):", 22 chars) ~ 198, line 3 ("class
    # Parser_X:", 15 chars) ~ 137, plus a marker each (12): 347 <= 382. Whole new (600) > 382.
    assert plan.to_warm == ["old", "new"]
    assert plan.excerpts == {"new": (1, 3)}
    assert plan.reasons == {"old": LOW_VALUE, "new": EXCERPT}


def test_an_excerpt_costing_most_of_its_item_is_shown_whole():
    # one line of two holds the name: excerpt = that line + 1 marker, about 2/3 of the item
    small = _item("small", "src/x.py is here\nok", index=1, step=1, tokens=30)
    filler = _item("filler", "y" * 50, index=3, step=2, tokens=400)
    now = _item("now", "z", index=5, step=STEP, tokens=500)
    plan = _plan([small, filler, now], budget=900, used=930, low_water=0.98)
    # small's excerpt: line 0 ~ 30 x 17/20 = 25.5 + 12 = 37.5 >= 0.6 x 30: whole (it fits)
    assert "small" not in plan.to_warm
    assert plan.to_warm == ["filler"] and plan.excerpts == {}


def test_protected_turns_keep_at_least_their_command():
    turn = _item(
        "turn",
        'Let me look.\n\n```bash\ncat src/big.py\n```\nbash({"command": "cat src/big.py"})',
        index=2,
        step=STEP - 3,
        source="assistant",
        tokens=300,
    )
    now = _item("now", "z", index=5, step=STEP, tokens=700)
    settings = _settings(protectedTurns=12)
    plan = _plan([turn, now], budget=800, used=1000, settings=settings)
    # the turn is worth less than its size, but protected: it keeps the fenced command line
    assert plan.to_warm == ["turn"]
    assert plan.excerpts == {"turn": (3,)}
    unprotected = _plan([turn, now], budget=800, used=1000, settings=_settings())
    assert unprotected.excerpts.get("turn", ()) != (3,) or "turn" not in unprotected.excerpts


def test_no_pass_under_the_threshold_and_fixed_items_never_move():
    pinned = _item("pinned", FILE, index=1, step=1, tokens=600, pinned=True)
    intent = _item("ask", "fix src/a.py", index=0, step=0, source="user", kind="intent")
    now = _item("now", "z", index=5, step=STEP, tokens=100)
    items = [intent, pinned, now]
    assert _plan(items, budget=2000, used=700).to_warm == []  # 700 <= 2000
    plan = _plan(items, budget=500, used=700 + len(intent.content))
    # only the pinned read and the newest step are large: the pinned one moves only as the
    # hard budget's last resort (it is a tool result, so before turns), reported
    assert plan.to_warm == ["pinned"] and plan.reasons["pinned"] == "over budget: protected"
    assert any("over budget: protected" in line for line in plan.report)


def test_a_shallow_pass_leaves_older_levels_as_they_are():
    old = _item("old", FILE, index=1, step=1, tokens=600)
    mid = _item("mid", FILE.replace("parse_value", "parse_other"), index=3, step=2, tokens=600)
    new = _item("new", FILE.replace("Parser_X", "Parser_Y"), index=5, step=3, tokens=600)
    now = _item("now", "z", index=7, step=STEP, tokens=100)
    items = [old, mid, new, now]
    used = 1900
    # over the budget of 1800; the target 0.9 x 1800 = 1620 means freeing 280; reach 2 x 280 =
    # 560 is covered by `new` alone (600): only `new` may change (room left 1620 - 100 - 1200 -
    # 9 = 311, more than a fifth of 280), and `old`, which owns no name (`mid` and `new` hold
    # all of its), stays whole
    shallow = _plan(
        items, budget=1800, used=used, low_water=0.9, settings=_settings(shallowReach=2)
    )
    assert shallow.to_warm == ["new"]
    # a deep pass chooses every level: `old` owns nothing and becomes a stub
    deep = _plan(items, budget=1800, used=used, low_water=0.9)
    assert "old" in deep.to_warm and deep.reasons["old"] == LOW_VALUE


def test_a_paged_out_item_comes_back_whole_or_changes_lines():
    warm = _item("warm", FILE, index=1, step=1, tokens=100, tier="warm")
    warm.excerpt = (1,)
    live = _item("live", "y" * 80, index=3, step=2, tokens=800)
    now = _item("now", "z", index=5, step=STEP, tokens=100)
    used = 800 + 100 + 40  # the excerpt shows ~40 tokens
    plan = _plan([live, now], budget=900, used=used, low_water=0.5, paged=[warm])
    # target 450: the live filler (no names) leaves; the warm read (100 tokens) fits whole
    assert plan.to_warm == ["live"] and plan.to_live == ["warm"]


def test_bad_arguments_are_refused():
    now = _item("now", "z", index=5, step=STEP, tokens=100)
    with pytest.raises(ValueError, match="budget_tokens"):
        _plan([now], budget=0, used=10)
    with pytest.raises(ValueError, match="scores"):
        plan_levels(
            ItemBatch([now]),
            [0.5, 0.5],
            100,
            200,
            settings=_settings(),
            threshold=1.0,
            low_water=None,
            current_step=STEP,
            stats=NameStats(),
            lines_of=line_info,
        )


def test_marker_tokens_match_the_tokenizer():
    from veil.core.models.tokens import cl100k_count

    sizes = [
        cl100k_count(f"[... {n} lines elided: #{m} ...]\n")
        for n, m in ((1, 3), (120, 42), (9999, 1234))
    ]
    assert sizes == [12, 12, 14] and min(sizes) == MARKER_TOKENS


# --- a target for large windows ---------------------------------------------------------------


def _recording(steps: int = 24):
    from veil.default_plugins.replay.formats import ReplayStep, Trajectory

    return Trajectory(
        path="synthetic.traj.json",
        format="mini-swe-agent",
        system="You are a careful coding agent.",
        task="Fix the bug in src/app.py.",
        steps=[
            ReplayStep(
                index=t,
                assistant=f"Look at part {t}.\n\n```bash\ncat src/mod_{t}.py\n```",
                action=f"cat src/mod_{t}.py",
                observation="\n".join(
                    f"def func_{t}_{n}(value_{n}): return helper_{n}(value_{n})" for n in range(40)
                ),
            )
            for t in range(steps)
        ],
    )


def _prompt_sizes(project, window, *, from_window):
    from veil.core.models.tokens import cl100k_count
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    traj = _recording()
    policy = VeilReplayPolicy(traj, window, project_dir=project, budget_from_window=from_window)
    try:
        return [
            sum(cl100k_count(m.get("content") or "") for m in policy.prompt_for_step(traj, t)[0])
            for t in range(len(traj.steps))
        ]
    finally:
        policy.close()


def test_a_large_window_aims_at_the_target_and_a_set_budget_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    (project / ".veil").mkdir(parents=True)
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"context": {"targetTokens": 6000}}), encoding="utf-8"
    )
    # 24 steps of ~700 tokens: the whole history reaches ~17,000 tokens, under the window
    unset = _prompt_sizes(project, 40_000, from_window=True)
    assert max(unset) <= 6000 + 200  # the target (the manifest's note may sit on top)
    assert max(unset) < 0.5 * 17_000
    # the same window given as the user's own budget (context.budgetTokens): no target
    explicit = _prompt_sizes(project, 40_000, from_window=False)
    assert max(explicit) > 15_000


def test_a_protected_turn_older_than_what_a_pass_reads_stays():
    # A 100,000-token result fills the pass's window (4 x the 1,000 target) alone, so the
    # pass reads nothing older: older live candidates leave as stubs, but the turn that
    # called for the result is one of the last 12 turns (seed 002: protected outright).
    turn = _item("turn", "read big.log", index=1, step=38, source="assistant", tokens=30)
    old = _item("old", "an older result", index=0, step=10, tokens=40)
    big = _item("big", "x" * 200, index=2, step=38, tokens=100_000)
    now = _item("now", "z", index=3, step=STEP, tokens=100)
    settings = _settings(protectedTurns=12)
    plan = _plan([old, turn, big, now], budget=1000, used=100_170, settings=settings)
    assert "turn" not in plan.to_warm
    assert "old" in plan.to_warm and "big" in plan.to_warm


def test_protected_turns_go_to_stubs_when_what_they_keep_exceeds_the_budget():
    # Two protected turns of 60 tokens each, one line each (their anchor, kept as an excerpt
    # of that line: 60 tokens + a marker of 12, and the pass's estimate counts a stub of 9 for
    # each item it may change), and the newest step at 100: the estimate is 100 + 2 x 9 +
    # 2 x 72 = 262 against a budget of 170. Stubs free 51 each (60 - 9); both together bring it
    # to 160 <= 170, so they go, the older first (262 - 51 = 211 is still over).
    first = _item("first", "run pytest", index=1, step=30, source="assistant", tokens=60)
    second = _item("second", "edit src/a.py", index=3, step=35, source="assistant", tokens=60)
    now = _item("now", "z", index=5, step=STEP, tokens=100)
    plan = _plan([first, second, now], budget=170, used=220, settings=_settings(protectedTurns=12))
    assert plan.to_warm == ["first", "second"]
    assert plan.reasons == {"first": "over budget: protected", "second": "over budget: protected"}
    assert plan.excerpts == {}
    # at 150 the stubs cannot bring it under (262 - 102 = 160): the turns keep their lines
    kept = _plan([first, second, now], budget=150, used=220, settings=_settings(protectedTurns=12))
    assert kept.reasons == {"first": "excerpt", "second": "excerpt"}
