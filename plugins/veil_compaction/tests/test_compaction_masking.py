"""Observation masking: which results are masked, that calls stay, that the store is untouched."""

from __future__ import annotations

import copy

from veil_compaction.masking import MASK, mask_observations
from veil_compaction.testing import step

from veil.core.context import pairing_problems
from veil.core.testing import ScriptedModel
from veil.core.types import CompactRequest


def test_mask_text_is_the_seeds():
    assert MASK == "[observation masked]"


def test_results_older_than_the_newest_steps_are_masked_and_calls_stay():
    history = [
        {"role": "user", "content": "fix it"},
        *step(1, calls=2),
        *step(2, calls=1),
        *step(3, calls=1),
        {"role": "assistant", "content": "done"},
    ]
    before = copy.deepcopy(history)
    # 4 steps (3 with tools + the final answer); keep 2 -> steps 1 and 2 are older.
    out = mask_observations(history, 2)
    assert history == before  # the input is not modified
    contents = [m.get("content") for m in out]
    assert contents == [
        "fix it",
        None,
        MASK,
        MASK,
        None,
        MASK,
        None,
        "r3_0 " + "x" * 20,
        "done",
    ]
    assert [m.get("tool_call_id") for m in out] == [m.get("tool_call_id") for m in history]
    assert out[1]["tool_calls"] == history[1]["tool_calls"]
    assert pairing_problems(out) == []


def test_zero_turns_is_off_and_large_values_mask_nothing():
    history = [{"role": "user", "content": "q"}, *step(1), *step(2)]
    assert mask_observations(history, 0) == history
    assert mask_observations(history, 2) == history
    assert [m["content"] for m in mask_observations(history, 1)][2] == MASK


def test_orphan_results_before_any_assistant_are_the_oldest_step():
    history = [{"role": "tool", "tool_call_id": "old", "content": "o"}, *step(1)]
    out = mask_observations(history, 1)
    assert out[0]["content"] == MASK
    assert out[2]["content"] == history[2]["content"]
    assert mask_observations(history, 2)[0]["content"] == "o"


def test_loop_sends_masked_results_but_stores_them_whole(open_project, project):
    (project / "a.txt").write_text("ALPHA-CONTENT\n")
    replies = [{"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]}] * 3 + ["ok"]
    model = ScriptedModel(replies)
    veil = open_project(main=model, settings={"compaction": {"observationMaskingTurns": 1}})
    session = veil.new_session()
    result = veil.run_turn(session, "read it three times")
    assert result.status == "done"
    last = model.calls[-1]
    tool_contents = [m["content"] for m in last if m["role"] == "tool"]
    assert tool_contents[:2] == [MASK, MASK]
    assert "ALPHA-CONTENT" in tool_contents[2]
    assert pairing_problems(last[1:]) == []
    stored = [m for _, m in veil.store.messages(session.id) if m["role"] == "tool"]
    assert all("ALPHA-CONTENT" in m["content"] for m in stored)


def test_hook_masks_with_the_settings_value(open_project):
    veil = open_project(settings={"compaction": {"observationMaskingTurns": 3}})
    session = veil.new_session()
    history = [{"role": "user", "content": "q"}] + [m for n in range(1, 6) for m in step(n)]
    result = veil.pm.hook.compact(session=session, request=CompactRequest("masking", history))
    masked = [m["tool_call_id"] for m in result.messages if m.get("content") == MASK]
    assert masked == ["c1_0", "c2_0"]
