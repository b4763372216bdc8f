"""The agent loop with a scripted model: tool round trips, pairing, hooks, limits, interrupts."""

from __future__ import annotations

import json
import re

from veil.core.models.tokens import estimate_tokens
from veil.core.prompt.assemble import pairing_problems, repair_pairing
from veil.core.types import EvictionPlan, PromptSection, Tool, ToolResult
from veil.hookspecs import hookimpl


class Recorder:
    """A plugin that records every hook call the loop makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl
    def capture(self, session, event):
        self.calls.append(("capture", event.phase, event.tool_name, event.tool_call_id))

    @hookimpl
    def render(self, event):
        if event.kind != "token":
            self.calls.append(("render", event.kind))

    @hookimpl
    def fit_prompt(self, session, messages, first_index):
        self.calls.append(("fit_prompt", first_index))

    @hookimpl
    def after_iteration(self, session, iteration):
        self.calls.append(("after_iteration", iteration))

    @hookimpl
    def turn_end(self, session, final_message):
        self.calls.append(("turn_end", final_message["role"]))

    @hookimpl
    def system_prompt_sections(self, session):
        return PromptSection("probe", "PROBE-SECTION", order=50)


def test_tool_round_trip_runs_the_tool_and_returns_its_result_to_the_model(make_veil, project):
    (project / "a.py").write_text("x = 1\n")
    (project / "b.py").write_text("y = 2\n")
    veil = make_veil(
        [{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, "There are 2 Python files."]
    )
    session = veil.new_session()
    result = veil.run_turn(session, "How many Python files?")

    assert result.status == "done"
    assert result.final == "There are 2 Python files."
    assert result.iterations == 2
    roles = [m["role"] for m in session.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_msg = session.messages[2]
    assert tool_msg["tool_call_id"] == session.messages[1]["tool_calls"][0]["id"]
    assert "a.py" in tool_msg["content"] and "b.py" in tool_msg["content"]
    # the second model call saw the tool result, right after its call
    second = veil.model.calls[1]
    assert second[-1]["role"] == "tool" and "a.py" in second[-1]["content"]
    assert second[0]["role"] == "system" and str(project) in second[0]["content"]


def test_parallel_tool_calls_each_get_their_own_result_in_order(make_veil, project):
    (project / "one.txt").write_text("ONE\n")
    (project / "two.txt").write_text("TWO\n")
    veil = make_veil(
        [
            {
                "tool_calls": [
                    {"name": "read", "arguments": {"path": "two.txt"}, "id": "c2"},
                    {"name": "read", "arguments": {"path": "one.txt"}, "id": "c1"},
                ]
            },
            "done",
        ]
    )
    session = veil.new_session()
    veil.run_turn(session, "read both")
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert "TWO" in results["c2"] and "ONE" in results["c1"]
    assert [m.get("tool_call_id") for m in session.messages[2:4]] == ["c2", "c1"]
    assert pairing_problems(veil.model.calls[1][1:]) == []


def test_hooks_are_called_in_and_out_of_every_tool_call_in_data_flow_order(make_veil, project):
    rec = Recorder()
    veil = make_veil(
        [{"tool_calls": [{"name": "ls", "arguments": {}, "id": "t1"}]}, "ok"],
        plugins=[("recorder", rec)],
    )
    session = veil.new_session()
    veil.run_turn(session, "list")
    seq = [c for c in rec.calls if c[0] != "render"]
    assert seq == [
        ("capture", "user", None, None),
        ("fit_prompt", 0),
        ("capture", "assistant", None, None),
        ("capture", "tool_call", "ls", "t1"),
        ("capture", "tool_result", "ls", "t1"),
        ("after_iteration", 1),
        ("fit_prompt", 0),
        ("capture", "assistant", None, None),
        ("turn_end", "assistant"),
    ]
    kinds = [c[1] for c in rec.calls if c[0] == "render"]
    call = ["model_call", "usage", "assistant"]  # front ends: a spinner, then the figures
    assert kinds == [*call, "tool_call", "tool_result", *call]
    assert "PROBE-SECTION" in veil.model.calls[0][0]["content"]


def test_max_iterations_stops_a_model_that_never_answers(make_veil):
    loop_forever = {"tool_calls": [{"name": "ls", "arguments": {}}]}
    veil = make_veil([loop_forever] * 3)
    session = veil.new_session()
    result = veil.run_turn(session, "go", max_iterations=3)
    assert result.status == "max_iterations"
    assert result.iterations == 3
    assert pairing_problems(session.messages[1:]) == []


def test_bad_json_arguments_and_unknown_tools_are_reported_to_the_model(make_veil):
    veil = make_veil(
        [
            {
                "tool_calls": [
                    {"name": "ls", "arguments": "{not json", "id": "bad"},
                    {"name": "nope", "arguments": {}, "id": "unk"},
                ]
            },
            "sorry",
        ]
    )
    session = veil.new_session()
    veil.run_turn(session, "x")
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert "invalid JSON arguments" in results["bad"]
    assert "unknown tool 'nope'" in results["unk"] and "read" in results["unk"]


def test_ctrl_c_during_a_tool_keeps_the_session_consistent(make_veil):
    def interrupting(ctx, args):
        raise KeyboardInterrupt

    class Plug:
        @hookimpl
        def register_tools(self, veil):
            return [Tool("stall", "waits", {"type": "object", "properties": {}}, interrupting)]

    veil = make_veil(
        [
            {
                "tool_calls": [
                    {"name": "stall", "arguments": {}, "id": "s1"},
                    {"name": "ls", "arguments": {}, "id": "s2"},
                ]
            }
        ],
        plugins=[("staller", Plug())],
    )
    session = veil.new_session()
    result = veil.run_turn(session, "wait")
    assert result.status == "interrupted"
    assert pairing_problems(session.messages[1:]) == []
    assert [m.get("content") for m in session.messages if m["role"] == "tool"] == [
        "[interrupted by the user]",
        "[interrupted by the user]",
    ]
    # the stored history matches, and the session can continue
    reloaded = veil.load_session(session.id)
    assert reloaded.messages == session.messages
    veil.model.add("back")
    assert veil.run_turn(reloaded, "again").final == "back"


def test_halt_requested_by_a_plugin_ends_the_run_with_the_reason(make_veil):
    class Halter:
        @hookimpl
        def capture(self, session, event):
            if event.phase == "tool_result":
                session.request_halt("same failure 3 times")

    veil = make_veil([{"tool_calls": [{"name": "ls", "arguments": {}}]}], plugins=[("h", Halter())])
    session = veil.new_session()
    result = veil.run_turn(session, "go")
    assert (result.status, result.reason) == ("halted", "same failure 3 times")


def test_eviction_replaces_content_by_a_pointer_and_keeps_the_call(make_veil, project):
    (project / "big.txt").write_text("SECRET-CONTENT\n" * 50)

    class EvictAll:
        @hookimpl
        def score(self, session, items, task_tags, now):
            return [0.0] * len(items)

        @hookimpl
        def evict(self, session, items, scores, budget_tokens, used_tokens):
            ids = [i.id for i in items if i.source == "tool_result"]
            return EvictionPlan(to_warm=ids, reasons={i: "test" for i in ids})

    veil = make_veil(
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}, "id": "r1"}]},
            {"tool_calls": [{"name": "ls", "arguments": {}, "id": "r2"}]},
            "done",
        ],
        plugins=[("ev", EvictAll())],
    )
    session = veil.new_session()
    veil.run_turn(session, "read it")
    # the newest step is never evicted (issue 19): the model sees its last call's result
    assert "SECRET-CONTENT" in veil.model.calls[1][-1]["content"]
    sent = veil.model.calls[2]
    tool_msgs = [m for m in sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["r1", "r2"]
    assert tool_msgs[1]["content"] == session.messages[4]["content"]  # r2 whole
    assert len(tool_msgs[0]["content"]) < 400  # a stub, not the 750-character result
    # the stub names the tool message by its index in the session (2 tokens, not an item id)
    assert re.fullmatch(r"\[evicted \d+ tokens #2\]", tool_msgs[0]["content"])
    assert session.messages[2]["role"] == "tool"
    # the manifest says once how a stub is followed back
    assert "veil_hydrate(#N or the id)" in sent[0]["content"]
    # stored history is untouched and the event log recorded the eviction
    assert "SECRET-CONTENT" in session.messages[2]["content"]
    events = veil.store.events(session.id, ("evict",))
    assert len(events) == 1 and events[0]["tool_call_id"] == "r1"
    [entry] = events[0]["payload"]["items"]
    assert entry["toolCallId"] == "r1" and entry["tier"] == "warm" and entry["messageIndex"] == 2
    assert veil.store.eviction_count(session.id) == 1
    assert veil.store.tier_counts(session.id) == {"live": 5, "warm": 1, "cold": 0}
    # a resumed session still sends the stub
    assert veil.load_session(session.id).stubs.keys() == {2}


def test_repair_pairing_drops_orphan_results_and_answers_dangling_calls():
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ],
    }
    msgs = [
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
        {"role": "user", "content": "hi"},
        call,
        {"role": "tool", "tool_call_id": "b", "content": "B"},
    ]
    fixed = repair_pairing(msgs)
    assert [m.get("tool_call_id") for m in fixed] == [None, None, "a", "b"]
    assert fixed[2]["content"] == "[no result: interrupted]" and fixed[3]["content"] == "B"
    assert pairing_problems(fixed) == []
    assert len(pairing_problems(msgs)) == 2


def test_usage_is_recorded_per_model_call(make_veil):
    veil = make_veil(["hello there"])
    session = veil.new_session()
    result = veil.run_turn(session, "hi")
    rows = veil.store.conn.execute(
        "SELECT * FROM usage WHERE session_id = ?", (session.id,)
    ).fetchall()
    assert len(rows) == 1
    assert rows[0]["prompt_tokens"] == result.usage["prompt_tokens"] > 0
    assert rows[0]["completion_tokens"] == result.usage["completion_tokens"] > 0


def test_tool_handler_result_outcome_reaches_capture(make_veil):
    seen = []

    class Plug:
        @hookimpl
        def register_tools(self, veil):
            return [
                Tool(
                    "probe",
                    "p",
                    {"type": "object", "properties": {}},
                    lambda ctx, args: ToolResult("fine", outcome="pass"),
                )
            ]

        @hookimpl
        def capture(self, session, event):
            if event.phase == "tool_result":
                seen.append((event.result.outcome, json.dumps(event.arguments)))

    veil = make_veil(
        [{"tool_calls": [{"name": "probe", "arguments": {}}]}, "ok"], plugins=[("p", Plug())]
    )
    veil.run_turn(veil.new_session(), "x")
    assert seen == [("pass", "{}")]


def test_a_prompt_the_provider_refuses_as_too_long_is_compacted_and_retried(make_veil):
    from veil_compaction.testing import SeedPlanner

    from veil.core.models.llm import ContextWindowExceededError
    from veil.core.types import Summary

    folded = []

    class Summariser:
        @hookimpl
        def summarise(self, session, messages, previous, instructions, mode):
            folded.append((mode, [m["content"] for m in messages]))
            return Summary("earlier: greeted", calls=0)

    def too_long(messages, tools):
        raise ContextWindowExceededError("prompt is 9000 tokens, window 8192")

    long_hello = "hi " * 300  # the fold must shrink the prompt, or the core refuses it
    veil = make_veil(
        ["hello", "sure", too_long, "fits now"],
        plugins=[("s", Summariser()), ("planner", SeedPlanner())],
        settings={"compaction": {"keepRecentTurns": 1}},
    )
    session = veil.new_session()
    veil.run_turn(session, long_hello)
    veil.run_turn(session, "more")
    result = veil.run_turn(session, "again")
    assert (result.status, result.final) == ("done", "fits now")
    # the newest step ("sure") and the request before it are kept; the first exchange folded
    assert folded == [("full", [long_hello, "hello"])]
    assert (session.compact_summary, session.compact_size) == ("earlier: greeted", 2)
    assert veil.model.calls[-1][1]["content"].endswith("earlier: greeted")
    assert [m["content"] for m in veil.model.calls[-1][2:]] == ["more", "sure", "again"]


def test_without_a_compaction_plugin_the_refusal_reaches_the_caller(make_veil):
    import pytest

    from veil.core.models.llm import ContextWindowExceededError

    def too_long(messages, tools):
        raise ContextWindowExceededError("too long")

    veil = make_veil([too_long])
    with pytest.raises(ContextWindowExceededError):
        veil.run_turn(veil.new_session(), "hi")


def test_an_evicted_turn_takes_its_tool_call_arguments_with_it(make_veil):
    from veil.core.prompt.assemble import kept_messages
    from veil.core.turn import capture
    from veil.core.types import CaptureEvent

    veil = make_veil([])
    session = veil.new_session()
    arguments = json.dumps({"path": "src/very/long/path/module.py", "start": 1, "end": 400})
    msg = {
        "role": "assistant",
        "content": "I will read the module.",
        "tool_calls": [
            {"id": "r1", "type": "function", "function": {"name": "read", "arguments": arguments}}
        ],
    }
    idx = session.append(msg)
    [turn] = capture(session, CaptureEvent("assistant", msg, 1, message_index=idx))
    session.append({"role": "tool", "tool_call_id": "r1", "content": "x = 1"})
    # the turn item costs what its message costs in the prompt: content, name and arguments
    assert turn.tokens == session.count_tokens([msg]) - session.message_overhead_tokens
    session.apply_eviction(EvictionPlan(to_warm=[turn.id]))
    sent = kept_messages(session)
    assert sent[0]["content"] == f"[evicted turn #{idx}]"
    [call] = sent[0]["tool_calls"]
    assert call["id"] == "r1" and call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"evicted": f"#{idx}"}
    assert sent[1] == {"role": "tool", "tool_call_id": "r1", "content": "x = 1"}
    assert session.messages[idx]["tool_calls"][0]["function"]["arguments"] == arguments


def test_eviction_keeps_the_prompt_under_the_full_compaction_trigger(make_veil):
    seen = []

    class Spy:
        @hookimpl
        def score(self, session, items, task_tags, now):
            return [0.5] * len(items)

        @hookimpl
        def evict(self, session, items, scores, budget_tokens, used_tokens):
            seen.append(budget_tokens)
            return EvictionPlan()

    veil = make_veil(
        ["done"],
        plugins=[("spy", Spy())],
        settings={"compaction": {"threshold": 0.5}, "loop": {"completionReserve": 100}},
        context_window=8000,
    )
    session = veil.new_session()
    veil.run_turn(session, "hello")
    sent = veil.model.calls[0]
    # the system message and the context note (the manifest's counts) sent with it
    fixed = session.count_tokens([sent[0], sent[-1]])
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("[veil context note")
    # the provider counts the tool schemas offered inside the window too (issue 18)
    tools = veil.model.tools_seen[0]
    schemas = estimate_tokens(json.dumps(tools, ensure_ascii=False))
    assert schemas > 500
    # min(8000 - 100 - schemas, 0.5 x 8000 - schemas) = 4000 - schemas for the prompt,
    # less the system message and the note
    assert seen and seen[0] == 4000 - schemas - fixed


def test_ctrl_c_while_the_answer_streams_keeps_its_text(make_veil):
    """Issue 30: an answer the user stopped while it streamed was lost (a resumed session
    showed "(no answer)"). The text streamed so far is stored as the assistant's message, with
    a note that it was cut, and the session goes on from it."""
    from veil.core.loop import INTERRUPTED_NOTE

    class Stopped:
        """Streams two pieces, then the user presses Ctrl-C."""

        name, provider, context_window = "stopping", "scripted", 8192

        def complete(self, messages, tools=None, on_token=None):
            on_token("The bug is in ")
            on_token("parse(), line 12")
            raise KeyboardInterrupt

        def count_tokens(self, messages):
            return 10

    class Screen:
        def __init__(self) -> None:
            self.tokens: list[str] = []

        @hookimpl
        def render(self, event):
            if event.kind == "token":
                self.tokens.append(event.data["text"])

    screen = Screen()
    veil = make_veil(model=Stopped(), plugins=[("screen", screen)])
    session = veil.new_session()
    shown = screen.tokens
    result = veil.run_turn(session, "where is the bug?")
    assert result.status == "interrupted"
    assert "".join(shown) == "The bug is in parse(), line 12"
    expected = "The bug is in parse(), line 12" + INTERRUPTED_NOTE
    assert session.messages[-1] == {"role": "assistant", "content": expected}
    assert result.final == expected
    reloaded = veil.load_session(session.id)
    assert reloaded.messages[-1]["content"] == expected
    assert pairing_problems(reloaded.messages[1:]) == []
