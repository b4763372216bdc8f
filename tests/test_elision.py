"""Repeated-line elision (default plugin veil.elision) and its place in the prompt builder."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.core.prompt.context import build_prompt
from veil.default_plugins.elision.repeats import MARKER, elide_repeats

TEST_OUTPUT = "\n".join(
    [
        "FAILED tests/test_config.py::test_env_file - AssertionError: assert 'dev' == 'prod'",
        "FAILED tests/test_config.py::test_defaults - KeyError: 'DATABASE_URL' not found",
        "========== 2 failed, 41 passed in 0.52s ==========",
    ]
)


def _tool(text: str, call: str = "c1") -> dict:
    return {"role": "tool", "tool_call_id": call, "content": text}


def test_an_older_result_repeated_by_a_newer_one_is_elided_to_a_marker():
    older = _tool("$ pytest\n" + TEST_OUTPUT, "c1")
    newer = _tool("$ pytest -x\n" + TEST_OUTPUT, "c2")
    out, lines = elide_repeats([older, newer])
    assert lines == 3
    assert out[0]["content"] == "$ pytest\n" + MARKER.format(n=3)
    assert out[1] is newer  # the newest copy is the one kept
    assert older["content"].endswith("0.52s ==========")  # the input is not modified


def test_short_runs_short_lines_user_messages_and_the_newest_copy_stay():
    short = "x = compute(a)"  # 14 characters: one line, below the 80-character run minimum
    task = {"role": "user", "content": "fix it\n" + TEST_OUTPUT}
    answer = {"role": "assistant", "content": "}\n" + short}
    later = _tool("}\n" + short + "\nok")
    out, lines = elide_repeats([task, answer, later])
    assert lines == 0 and out == [task, answer, later]


def test_lines_of_the_task_count_as_shown_wherever_it_stands():
    task = {"role": "user", "content": "The tests say:\n" + TEST_OUTPUT}
    result = _tool("collected 43 items\n" + TEST_OUTPUT)
    out, lines = elide_repeats([task, result])
    assert lines == 3 and out[0] is task
    assert out[1]["content"] == "collected 43 items\n" + MARKER.format(n=3)


def test_blank_lines_inside_a_run_go_with_it_but_not_after_it():
    block = TEST_OUTPUT.split("\n")
    older = _tool("\n".join([block[0], "", block[1], block[2], "", "tail note"]))
    out, lines = elide_repeats([older, _tool(TEST_OUTPUT, "c2")])
    assert lines == 4  # three repeated lines and the blank line between them
    assert out[0]["content"] == "\n".join([MARKER.format(n=4), "", "tail note"])


lines_strategy = st.lists(
    st.sampled_from(
        [
            "",
            "}",
            "def parse_config(path: str) -> dict[str, str]:",
            "    return load_yaml(path, strict=True)",
            "ERROR src/app/config.py:42 missing key DATABASE_URL",
            "    assert settings.mode == 'prod'",
            "ok",
        ]
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool"]), lines_strategy),
        min_size=1,
        max_size=6,
    )
)
def test_no_line_leaves_the_prompt(spec):
    """Lossless: every line of the input is still somewhere in the output, and what replaced
    lines is only markers; messages keep their roles and order."""
    messages = [
        {
            "role": role,
            "content": "\n".join(lines),
            **({"tool_call_id": "c"} if role == "tool" else {}),
        }
        for role, lines in spec
    ]
    out, _ = elide_repeats(messages)
    assert [m["role"] for m in out] == [m["role"] for m in messages]
    shown = "\n".join(m["content"] for m in out)
    for m in messages:
        for line in m["content"].split("\n"):
            assert line in shown
    marker = re.compile(r"\[\d+ lines repeated later in this conversation\]")
    for before, after in zip(messages, out, strict=True):
        kept = [x for x in after["content"].split("\n") if not marker.fullmatch(x)]
        original = before["content"].split("\n")
        assert all(x in original for x in kept)  # nothing but markers was added


def test_the_prompt_builder_elides_only_over_budget(make_veil):
    """Under the budget the prompt is sent as it is; over it, repeats go first (no eviction is
    loaded here, so elision is all that happens)."""
    veil = make_veil(context_window=100_000)
    session = veil.new_session()
    session.config.settings.context.elide_repeats = True  # off by default (issue 29)
    session.append({"role": "user", "content": "run the tests"})
    for n in range(3):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        session.append({"role": "assistant", "content": "", "tool_calls": [call]})
        session.append(_tool(f"attempt {n}\n" + "\n".join([TEST_OUTPUT] * 20), f"c{n}"))
    whole = build_prompt(session)
    assert not any(MARKER.format(n=60) in (m.get("content") or "") for m in whole.messages)

    session.config.settings.context.budget_tokens = whole.tokens // 2
    elided = build_prompt(session)
    tool_texts = [m["content"] for m in elided.messages if m["role"] == "tool"]
    assert tool_texts[-1] == "attempt 2\n" + "\n".join([TEST_OUTPUT] * 20)
    assert tool_texts[0].startswith("attempt 0\n[") and len(tool_texts[0]) < 200
    assert elided.tokens < whole.tokens
    assert any(n.startswith("elided repeated lines") for n in elided.notes)
    assert session.messages[2]["content"].startswith("attempt 0\nFAILED")  # history untouched


def test_elision_is_frozen_between_change_moments(make_veil):
    """Issue 18: once elision has rewritten the prompt, the next prompts send those messages
    as they were and append the new ones whole (a new repeat of an older message does not
    rewrite it again), as long as they fit; over the budget it runs again."""
    veil = make_veil(context_window=100_000)
    session = veil.new_session()
    session.config.settings.context.elide_repeats = True  # off by default (issue 29)
    session.append({"role": "user", "content": "run the tests"})

    def attempt(n: int, text: str) -> None:
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        session.append({"role": "assistant", "content": "", "tool_calls": [call]})
        session.append(_tool(f"attempt {n}\n" + text, f"c{n}"))

    other = "\n".join(f"collected item number {k} of the suite" for k in range(40))
    attempt(0, other)
    attempt(1, "\n".join([TEST_OUTPUT] * 20))
    attempt(2, "\n".join([TEST_OUTPUT] * 20))
    whole = build_prompt(session)
    session.config.settings.context.budget_tokens = int(whole.tokens * 0.8)
    first = build_prompt(session)  # over budget: attempt 1 elided
    tools = [m["content"] for m in first.messages if m["role"] == "tool"]
    assert tools[0] == session.messages[2]["content"] and tools[1].startswith("attempt 1\n[")
    attempt(3, other)  # repeats attempt 0, which is not elided again while the prompt fits
    second = build_prompt(session)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[-1]["content"] == "attempt 3\n" + other
    assert second.tokens <= session.config.settings.context.budget_tokens
    # over the budget: a change moment; elision runs over everything again
    session.config.settings.context.budget_tokens = int(whole.tokens * 0.6)
    third = build_prompt(session)
    tools = [m["content"] for m in third.messages if m["role"] == "tool"]
    assert tools[0].startswith("attempt 0\n[") and tools[-1] == "attempt 3\n" + other


def test_by_default_nothing_is_elided_over_the_budget(make_veil):
    """Issue 29: ``context.elideRepeats`` is off by default (elision's rewrites of old messages
    broke the cached prefix at each pass, at 12% more effective tokens on the 84 recordings):
    the same repeated test output over the budget goes out as it is."""
    veil = make_veil(context_window=100_000)
    session = veil.new_session()
    session.append({"role": "user", "content": "run the tests"})
    for n in range(3):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        session.append({"role": "assistant", "content": "", "tool_calls": [call]})
        session.append(_tool(f"attempt {n}\n" + "\n".join([TEST_OUTPUT] * 20), f"c{n}"))
    whole = build_prompt(session)
    session.config.settings.context.budget_tokens = whole.tokens // 2
    fitted = build_prompt(session)
    tool_texts = [m["content"] for m in fitted.messages if m["role"] == "tool"]
    assert tool_texts[0] == "attempt 0\n" + "\n".join([TEST_OUTPUT] * 20)
    assert not any(n.startswith("elided repeated lines") for n in fitted.notes)


LOG_LINES = [f"2026-12-07 build step {k:02d}: compiled module_{k:02d}.py" for k in range(20)]


@pytest.mark.parametrize("blocked", [False, True])
def test_a_session_elides_a_repeated_result_only_with_the_plugin_loaded(
    make_veil, scripted_server, veil_project, blocked
):
    """Issue 33: elision is the default plugin ``veil.elision`` (the ``elide_messages`` hook).
    A real session through the scripted provider reads the same 20-line log twice with
    ``context.elideRepeats`` on and the kept messages over the budget: the third request sends
    the first read as one marker for its 20 lines (every one shown again in the second) and the
    second whole; with the plugin blocked, the first read goes out whole (and the last resort
    cuts the second behind a pointer to keep to the budget)."""
    (veil_project / "build.log").write_text("\n".join(LOG_LINES) + "\n")

    def read(n: int) -> dict:
        return {"tool_calls": [{"id": f"r{n}", "name": "read", "arguments": {"path": "build.log"}}]}

    veil = make_veil(
        [read(0), read(1), "done"],
        server=scripted_server,
        settings={"context": {"elideRepeats": True, "budgetTokens": 560}},
        disable=("veil.elision",) if blocked else (),
    )
    result = veil.run_turn(veil.new_session(), "what did the build compile?")
    assert result.final == "done"
    third = scripted_server.requests[2].body["messages"]
    first, second = (m["content"] for m in third if m.get("role") == "tool")
    if blocked:  # nothing elided: over the budget, the last resort cuts the newest read instead
        assert all(line in first for line in LOG_LINES)
        assert "repeated later in this conversation" not in first + second
    else:
        assert first == MARKER.format(n=20)
        assert all(line in second for line in LOG_LINES)  # the newest read is sent whole
