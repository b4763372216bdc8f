"""Observation masking: which results are masked, that calls stay, that the store is untouched."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
from veil_compaction.masking import MASK, mask_observations
from veil_compaction.testing import step

from veil.core.prompt.assemble import pairing_problems
from veil.core.prompt.fit import fitted_messages
from veil.testing.scripted_model import ScriptedModel


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
    result = fitted_messages(session, history, None)
    masked = [m["tool_call_id"] for m in result if m.get("content") == MASK]
    assert masked == ["c1_0", "c2_0"]


# --- masking in blocks (issue 18) --------------------------------------------------------------


def test_block_one_is_seed_000s_masking_on_a_long_recorded_session():
    """G = 1, carried from call to call as the hook carries it, gives exactly seed 000's
    masking at every step of a real recorded session (mini-swe-agent, one result per step)."""
    from veil_compaction.masking import mask_in_blocks

    from veil.default_plugins.replay.formats import load_trajectory

    folder = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "trajectories"
    folder = folder / "mini-swe-agent"
    if not folder.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{folder} is missing under CI: the shared data must be present")
        pytest.skip(f"{folder} not present (the shared data ships beside the repo)")
    traj = load_trajectory(str(sorted(folder.glob("*.traj.json"))[0]))
    assert len(traj.steps) > 30
    history = [{"role": "user", "content": traj.task}]
    boundary = 0
    for t, recorded in enumerate(traj.steps):
        call = {"id": f"c{t}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        history.append({"role": "assistant", "content": recorded.assistant, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{t}", "content": recorded.observation})
        masked, boundary = mask_in_blocks(history, 10, 1, boundary)
        assert masked == mask_observations(history, 10)


def test_blocks_mask_g_results_at_once_and_keep_what_they_masked():
    from veil_compaction.masking import mask_in_blocks

    history: list[dict] = [{"role": "user", "content": "go"}]
    boundary, counts, boundaries = 0, [], []
    for n in range(1, 31):
        history += step(n)
        masked, boundary = mask_in_blocks(history, 10, 5, boundary)
        counts.append(sum(m.get("content") == MASK for m in masked))
        boundaries.append(boundary)
    # keep 10 steps, G = 5: after n steps n - 10 results are due; they are masked 5 at a time
    expected = [5 * max(0, (n - 10) // 5) for n in range(1, 31)]
    assert counts == expected
    # the boundary is just past the last masked result (the user message, then 2 per step)
    assert boundaries == [1 + 2 * m if m else 0 for m in expected]
    # the prompt changed only when a block was masked: at 15, 20, 25 and 30 steps
    assert [n for n in range(2, 31) if counts[n - 1] != counts[n - 2]] == [15, 20, 25, 30]
    with pytest.raises(ValueError, match="block"):
        mask_in_blocks(history, 10, 0)


def test_the_hook_masks_in_blocks_and_remembers_its_boundary(open_project):
    veil = open_project(
        settings={"compaction": {"observationMaskingTurns": 2, "observationMaskingBlock": 3}}
    )
    session = veil.new_session()
    history = [{"role": "user", "content": "q"}]
    masked_counts = []
    for n in range(1, 10):
        history += step(n)
        result = fitted_messages(session, list(history), 0)
        masked_counts.append(sum(m.get("content") == MASK for m in result))
    # keep 2 steps: due = n - 2; masked in blocks of 3 once 3 are due
    assert masked_counts == [0, 0, 0, 0, 3, 3, 3, 6, 6]
    assert session.state["veil_compaction"]["maskedBefore"] == 1 + 2 * 6


def test_unset_masking_is_seed_000s_without_the_context_layer():
    from veil_compaction.settings import (
        CONTEXT_LAYER_MASKING_BLOCK,
        CONTEXT_LAYER_MASKING_TURNS,
        MaskingSettings,
    )

    settings = MaskingSettings()
    assert (settings.masking_turns(False), settings.masking_block(False)) == (10, 1)
    assert settings.masking_turns(True) == CONTEXT_LAYER_MASKING_TURNS
    assert settings.masking_block(True) == CONTEXT_LAYER_MASKING_BLOCK
    configured = MaskingSettings(observation_masking_block=4, observation_masking_turns=3)
    assert (configured.masking_turns(True), configured.masking_block(False)) == (3, 4)


def test_the_hook_without_the_context_layer_masks_as_seed_000_every_step(open_project):
    """No scorer or eviction policy: unset settings give seed 000's masking (10 turns, G=1)."""
    veil = open_project()
    assert not veil.context_layer_on
    session = veil.new_session()
    history = [{"role": "user", "content": "q"}] + [m for n in range(1, 14) for m in step(n)]
    result = fitted_messages(session, history, 0)
    assert result == mask_observations(history, 10)
    assert sum(m.get("content") == MASK for m in result) == 3
