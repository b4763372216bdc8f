"""defaultCompaction's autoThreshold under the harness (another agent's loop recording its turns
through :class:`veil.harness.VeilHarness`), as under veil's own loop (issue 20)."""

from __future__ import annotations

from veil.harness import VeilHarness
from veil.testing.scripted_model import ScriptedModel


def test_auto_compaction_after_the_final_answer_under_the_harness(open_project, events):
    # the same chat turn as test_auto_compaction_after_the_final_answer_of_a_chat_turn, driven by
    # a host loop: the final answer ends the turn, and autoThreshold is checked there
    model = ScriptedModel(["CHAT SUMMARY"], context_window=2048)
    veil = open_project(
        main=model,
        agent={"defaultCompaction": {"autoThreshold": 10}},
        plugins=(("events", events),),
    )
    session = veil.new_session()
    harness = VeilHarness.attach(veil, session)
    harness.on_user_message("please remember " + "detail " * 120)  # ~ 300 tokens > 10% of 2048
    harness.build_prompt([])  # what the host sends its model
    assert session.compact_size == 0  # nothing compacts before the turn ends
    harness.on_assistant_message({"role": "assistant", "content": "short answer"})
    # 50% of the history is reached by the user message alone -> compactSize 1
    assert (session.compact_size, session.compact_summary) == (1, "CHAT SUMMARY")
    (event,) = events.of_kind("compaction")
    assert event.data["trigger"] == "auto" and event.data["newSize"] == 1
    assert veil.store.get_session(session.id)["compact_size"] == 1
    assert model.remaining == 0  # exactly one summary request
