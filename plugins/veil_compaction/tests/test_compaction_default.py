"""defaultCompaction (seed 000): the worked example, batching, model resolution, instructions,
errors, the one-transaction rule and autoThreshold."""

from __future__ import annotations

import json

import pytest
from veil_compaction import ledger, prompts
from veil_compaction.planning import batch_end
from veil_compaction.summary import model_name
from veil_compaction.testing import step

from veil.core.errors import (
    CompactionDisabled,
    ProviderError,
    SessionClosed,
    SessionNotFound,
)
from veil.core.models.llm import LLM
from veil.core.prompt import compaction
from veil.core.prompt.assemble import SUMMARY_PREFIX
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel

L = 40  # characters of every message in the worked example


def equal_messages(count: int) -> list[dict]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"{n:03d}".ljust(L, ".")}
        for n in range(count)
    ]


def test_seed_worked_example_both_calls(open_project, events):
    first, second = "S" * 130, "T" * 90
    model = ScriptedModel([first, second, "next answer"])
    veil = open_project(main=model, plugins=(("events", events),))
    session = veil.new_session()
    for message in equal_messages(100):
        session.append(message)

    out = veil.compact(session.id)
    # first call: 50% of 100 x 40 characters = 2000 -> the first 50 messages
    assert (out["compactedCount"], out["newSize"], out["alreadyUpToDate"]) == (50, 50, False)
    assert out["sessionId"] == session.id
    assert out["session"]["compactSize"] == 50 and out["session"]["compactSummary"] == first
    assert "049" in model.calls[0][-1]["content"] and "050" not in model.calls[0][-1]["content"]

    out = veil.compact(session.id)
    # second call: 50% of (130 summary chars + 50 x 40) = 1065 characters; 26 x 40 = 1040 falls
    # short, 27 x 40 = 1080 reaches it -> 27 messages, compactSize 50 + 27 = 77
    assert (out["compactedCount"], out["newSize"], out["alreadyUpToDate"]) == (27, 77, False)
    request = model.calls[1][-1]["content"]
    assert first in request  # summarised together with the existing summary
    assert "050" in request and "076" in request and "077" not in request
    row = veil.store.get_session(session.id)
    assert (row["compact_size"], row["compact_summary"]) == (77, second)

    # later turns: the summary right after the system prompt, then messages 77.. only
    resumed = veil.load_session(session.id)
    veil.run_turn(resumed, "go on")
    sent = model.calls[-1]
    assert sent[0]["role"] == "system"
    assert sent[1] == {"role": "system", "content": SUMMARY_PREFIX + second}
    assert sent[2:] == [*equal_messages(100)[77:], {"role": "user", "content": "go on"}]
    compactions = events.of_kind("compaction")
    assert [e.data["newSize"] for e in compactions] == [50, 77]
    assert all(e.data["tokensBefore"] > e.data["tokensAfter"] for e in compactions)


def tool_batch_history() -> list[dict]:
    assistant = {
        "role": "assistant",
        "content": "a" * 10,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for i in ("p", "q")
        ],
    }
    return [
        {"role": "user", "content": "u" * 100},  # 100 characters
        assistant,  # 10 + (4 + 2) x 2 = 22 characters
        {"role": "tool", "tool_call_id": "q", "content": "t" * 50},
        {"role": "tool", "tool_call_id": "p", "content": "t" * 50},
        {"role": "user", "content": "v" * 78},
    ]  # 300 characters in all


def test_batch_end_grows_to_keep_parallel_results_with_their_call():
    history = tool_batch_history()
    # 40% of 300 = 120: user (100) then the assistant (122) reach it; its 2 results follow
    assert batch_end(history, 0, 0, 40) == 4
    # 33% of 300 = 99: the first user message alone (100) reaches it
    assert batch_end(history, 0, 0, 33) == 1
    # with a 300-character summary: 50% of 600 = 300 -> all but... 100+22+50+50 = 222 < 300,
    # + 78 = 300 -> all five
    assert batch_end(history, 0, 300, 50) == 5
    # starting inside nothing: compactSize at the end -> nothing to do
    assert batch_end(history, 5, 10, 50) == 5
    # at least one message even when the summary dwarfs the rest (1% of 10,078 > 0)
    assert batch_end(history, 4, 10_000, 1) == 5


def test_batch_end_takes_one_message_when_all_are_empty():
    history = [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}]
    assert batch_end(history, 0, 0, 50) == 1


def test_already_up_to_date_makes_no_model_call(open_project):
    model = ScriptedModel(["SUM"])
    veil = open_project(main=model, agent={"defaultCompaction": {"compactionCount": 99}})
    session = veil.new_session()
    # long enough that the one-word summary shrinks the prompt (a longer one is refused)
    session.append({"role": "user", "content": "hello there, " * 20})
    session.append({"role": "assistant", "content": "hi, " * 20})
    assert veil.compact(session.id)["newSize"] == 2
    out = veil.compact(session.id)
    assert (out["compactedCount"], out["newSize"], out["alreadyUpToDate"]) == (0, 2, True)
    assert len(model.calls) == 1


def test_custom_instructions_and_caller_instructions_are_appended(open_project):
    model = ScriptedModel(["SUM"])
    veil = open_project(
        main=model, agent={"defaultCompaction": {"customInstructions": "Keep the TODO list."}}
    )
    session = veil.new_session()
    session.append({"role": "user", "content": "do things " * 30})
    session.append({"role": "assistant", "content": "done " * 30})
    veil.compact(session.id, "Mention the build.")
    assert model.calls[0][0] == {
        "role": "system",
        "content": prompts.SUMMARY_SYSTEM
        + "\n\nAdditional instructions:\nKeep the TODO list.\nMention the build.",
    }


def test_snapshot_wins_over_a_later_agent_json_edit(open_project, project):
    model = ScriptedModel(["SUM"])
    veil = open_project(main=model, agent={"defaultCompaction": {"compactionCount": 99}})
    session = veil.new_session()
    for message in equal_messages(10):
        session.append(message)
    (project / ".veil" / "agents" / "default" / "agent.json").write_text(
        '{"defaultCompaction": {"compactionCount": 10}}'
    )
    # 99% of 400 = 396 -> all 10 messages (10% would have been 1)
    assert veil.compact(session.id)["newSize"] == 10


# -- model resolution -------------------------------------------------------------------------


def make_resolving(open_project, project, agent):
    settings = {
        "models": {"main": {"model": "global/main"}, "compact": {"model": "global/compact"}}
    }
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    if agent is not None:
        folder = project / ".veil" / "agents" / "default"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "agent.json").write_text(json.dumps(agent))
    llm = LLM(load_config(project))
    made: dict[str | None, ScriptedModel] = {}

    def resolve(name, role_cfg):
        if name not in made:
            made[name] = ScriptedModel([f"summary by {name}"] * 3, name=str(name))
        return made[name]

    llm._resolve = resolve
    return open_project(llm=llm), made


@pytest.mark.parametrize(
    ("agent", "expected", "source"),
    [
        (
            {"model": "agent/model", "defaultCompaction": {"model": "cheap/model"}},
            "cheap/model",
            "defaultCompaction.model",
        ),
        (
            {"model": "agent/model", "defaultCompaction": {"model": "default"}},
            "agent/model",
            "session",
        ),
        (None, "global/main", "main"),
    ],
)
def test_model_resolution_order_never_uses_the_compact_role(
    open_project, project, agent, expected, source
):
    veil, made = make_resolving(open_project, project, agent)
    session = veil.new_session()
    session.append({"role": "user", "content": "remember the plan " * 20})
    session.append({"role": "assistant", "content": "noted " * 20})
    name, found = model_name(session)
    assert found == source and name == (None if source == "main" else expected)
    veil.compact(session.id)
    assert veil.load_session(session.id).compact_summary == f"summary by {expected}"
    called = sorted(str(n) for n, m in made.items() if m.calls)
    assert called == [expected]
    assert "global/compact" not in made


# -- errors -----------------------------------------------------------------------------------


def test_error_codes(open_project):
    veil = open_project(agent={"defaultCompaction": {"enabled": False}})
    session = veil.new_session()
    session.append({"role": "user", "content": "x"})
    with pytest.raises(CompactionDisabled) as err:
        veil.compact(session.id)
    assert (err.value.code, err.value.http_status) == ("COMPACTION_DISABLED", 400)
    with pytest.raises(CompactionDisabled):  # the core's run itself refuses too
        compaction.run_default(session)
    with pytest.raises(SessionNotFound) as err:
        veil.compact("sess_missing")
    assert err.value.http_status == 404


def test_closed_session(open_project):
    veil = open_project()
    session = veil.new_session()
    session.append({"role": "user", "content": "x"})
    veil.close_session(session)
    with pytest.raises(SessionClosed) as err:
        veil.compact(session.id)
    assert (err.value.code, err.value.http_status) == ("SESSION_CLOSED", 400)


def test_llm_error_mid_way_leaves_the_session_as_it_was(open_project):
    def boom(messages, tools):
        raise ProviderError("provider down")

    # a 1024-token window forces several chunks: the first succeeds, the second fails
    model = ScriptedModel(["partial summary", boom], context_window=1024)
    veil = open_project(main=model)
    session = veil.new_session()
    for n in range(12):
        session.append({"role": "user" if n % 2 == 0 else "assistant", "content": f"{n} " * 400})
    session.compact_summary, session.compact_size = "EARLIER", 2
    session.save_state()
    with pytest.raises(ProviderError):
        veil.compact(session.id)
    assert len(model.calls) == 2
    row = veil.store.get_session(session.id)
    assert (row["compact_summary"], row["compact_size"]) == ("EARLIER", 2)
    assert len(veil.store.messages(session.id)) == 12


# -- autoThreshold ----------------------------------------------------------------------------


def test_auto_compaction_after_the_final_answer_of_a_chat_turn(open_project, events):
    model = ScriptedModel(["short answer", "CHAT SUMMARY"], context_window=2048)
    veil = open_project(
        main=model,
        agent={"defaultCompaction": {"autoThreshold": 10}},
        plugins=(("events", events),),
    )
    session = veil.new_session()
    veil.run_turn(session, "please remember " + "detail " * 120)  # ~ 300 tokens > 10% of 2048
    # 50% of (user ~860 chars + 12) is reached by the user message alone -> compactSize 1
    assert (session.compact_size, session.compact_summary) == (1, "CHAT SUMMARY")
    (event,) = events.of_kind("compaction")
    assert event.data["trigger"] == "auto" and event.data["newSize"] == 1
    assert veil.store.get_session(session.id)["compact_size"] == 1


def test_auto_compaction_runs_between_tool_batches(open_project, project, events):
    (project / "big.txt").write_text("word " * 500)
    model = ScriptedModel(
        [{"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]}, "SUMMARY", "final"],
        context_window=2048,
    )
    veil = open_project(
        main=model,
        agent={"defaultCompaction": {"autoThreshold": 20}},
        plugins=(("events", events),),
    )
    session = veil.new_session()
    result = veil.run_turn(session, "read big.txt")
    assert result.status == "done" and result.final == "final"
    assert model.calls[1][0]["content"] == prompts.SUMMARY_SYSTEM  # the summary request
    # the tool result (2,500 characters) reaches 50% -> user, call and result are summarised
    assert session.compact_size == 3
    # the model's summary, then veil's recorded section (issue 19: on every compaction path)
    summary = model.calls[2][1]["content"]
    assert summary.startswith(SUMMARY_PREFIX + "SUMMARY\n\n" + ledger.HEADING)
    assert "- Files read: big.txt" in summary
    # the request still being worked on is sent verbatim after the summary (issue 19)
    assert model.calls[2][2] == {"role": "user", "content": "read big.txt"}
    assert model.remaining == 0
    # no compaction warning; the one warning says the 2,048-token window is smaller than the
    # system prompt, tool schemas and completion reserve (a real provider would refuse)
    warnings = [e.data["text"] for e in events.of_kind("warning")]
    assert len(warnings) == 1 and "alone exceed the context window (2048" in warnings[0]


def test_no_compaction_loop_when_compaction_cannot_get_below_the_threshold(
    open_project, project, events
):
    # long enough that the summary shrinks the prompt (a compaction that does not is refused)
    (project / "a.txt").write_text("alpha\n" * 40)
    read = {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]}
    model = ScriptedModel([read, "ONLY SUMMARY", read, read, read, "final"], context_window=8192)
    veil = open_project(
        main=model,
        agent={"defaultCompaction": {"autoThreshold": 1}},  # the system prompt alone exceeds 1%
        plugins=(("events", events),),
    )
    session = veil.new_session()
    result = veil.run_turn(session, "read a.txt four times")
    assert result.status == "done"
    assert model.remaining == 0  # exactly one summary call
    assert len(events.of_kind("compaction")) == 1
    warnings = [e.data["text"] for e in events.of_kind("warning")]
    assert len(warnings) == 1 and "pauses" in warnings[0]


def test_auto_threshold_unset_means_no_auto_compaction(open_project, project):
    (project / "big.txt").write_text("word " * 500)
    read = {"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]}
    model = ScriptedModel([read, "final"], context_window=2048)
    veil = open_project(main=model)
    session = veil.new_session()
    veil.run_turn(session, "read")
    assert session.compact_size == 0 and model.remaining == 0


def test_step_helper_shapes():
    assert [m["role"] for m in step(1, calls=3)] == ["assistant", "tool", "tool", "tool"]
