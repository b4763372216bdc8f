"""The summariser: one request when it fits, chunks and merges that fit the window otherwise."""

from __future__ import annotations

import math

import pytest
from veil_compaction import prompts
from veil_compaction.summariser import Summariser, render_message
from veil_compaction.testing import ScriptedSummariser, step, synthetic_history

from veil.core.errors import ConfigError, ProviderError
from veil.testing.scripted_model import ScriptedModel


def test_render_message():
    assistant, result = step(3)
    assert render_message({"role": "user", "content": "hi"}) == "[user] hi"
    assert render_message(assistant) == ('[assistant]\n  -> read({"path": "src/f3_0.py"}) [c3_0]')
    assert render_message(result) == "[tool result c3_0] r3_0 " + "x" * 20
    parts = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}
    assert render_message(parts) == "[user] a\n[image_url]"


def test_small_input_is_one_request_with_the_earlier_summary():
    model = ScriptedSummariser()
    messages = [{"role": "user", "content": "fix src/app.py"}, *step(1)]
    outcome = Summariser(model, ["Keep the TODO list."]).summarise(messages, previous="EARLIER")
    transcript = "\n\n".join(render_message(m) for m in messages)
    assert model.requests == [
        [
            {
                "role": "system",
                "content": prompts.SUMMARY_SYSTEM
                + "\n\nAdditional instructions:\nKeep the TODO list.",
            },
            {"role": "user", "content": prompts.summary_request(transcript, "EARLIER")},
        ]
    ]
    assert (outcome.calls, outcome.chunks, outcome.text) == (1, 1, model.replies[0])


def test_a_long_history_is_summarised_in_chunks_that_fit_an_8k_model():
    model = ScriptedSummariser(context_window=8192, reply_tokens=1500)
    history = synthetic_history(300, seed=7)
    total = model.count_tokens(history)
    assert total > 100_000
    summariser = Summariser(model)
    outcome = summariser.summarise(history, previous="EARLIER-SUMMARY-MARKER")
    budget = 8192 - 8192 // 4  # the reply keeps a quarter of the window
    assert summariser.input_budget == budget == 6144
    assert max(model.request_tokens) <= budget
    assert outcome.largest_request == max(model.request_tokens)
    # every chunk holds at most `room` tokens of transcript, so at least total / room chunks
    assert outcome.chunks >= math.ceil(total / summariser.room)
    summary_calls = [r for r in model.requests if r[0]["content"] == prompts.SUMMARY_SYSTEM]
    merge_calls = [r for r in model.requests if r[0]["content"] == prompts.MERGE_SYSTEM]
    assert len(summary_calls) == outcome.chunks
    assert len(summary_calls) + len(merge_calls) == outcome.calls == len(model.requests)
    assert outcome.text == model.replies[-1] and model.requests[-1] in merge_calls
    # the earlier summary is merged first; every tool call id reached some chunk
    first_merge = merge_calls[0][-1]["content"]
    assert first_merge.startswith('<summary part="1">\nEARLIER-SUMMARY-MARKER')
    sent = "".join(r[-1]["content"] for r in summary_calls)
    ids = {c["id"] for m in history for c in m.get("tool_calls") or []}
    assert ids and all(i in sent for i in ids)


def test_one_huge_tool_result_is_split_into_pieces():
    model = ScriptedSummariser(context_window=8192)
    huge = {"role": "tool", "tool_call_id": "big", "content": "line of output 12345\n" * 10_000}
    messages = [step(1)[0] | {"tool_calls": [step(1)[0]["tool_calls"][0] | {"id": "big"}]}, huge]
    summariser = Summariser(model)
    outcome = summariser.summarise(messages)
    assert outcome.chunks > 1
    assert max(model.request_tokens) <= summariser.input_budget
    sent = sum(
        r[-1]["content"].count("line of output")
        for r in model.requests
        if r[0]["content"] == prompts.SUMMARY_SYSTEM
    )
    assert sent == 10_000  # nothing was dropped on the way


def test_a_window_too_small_is_a_clear_error():
    with pytest.raises(ConfigError, match="too small"):
        Summariser(ScriptedSummariser(context_window=600))


def test_an_empty_summary_is_an_error():
    with pytest.raises(ProviderError, match="empty summary"):
        Summariser(ScriptedModel(["   "])).summarise([{"role": "user", "content": "x"}])


def test_clip_keeps_within_the_limit():
    summariser = Summariser(ScriptedSummariser())
    text = "word " * 1000
    clipped = summariser.clip(text, 100)
    assert clipped.endswith(prompts.TRUNCATED_NOTE)
    assert summariser.model.count_tokens(clipped) <= 100
    assert summariser.clip("short", 100) == "short"
