"""Reading a native request as veil's chat history and writing a fitted prompt back in the
client's form (``veil_proxy.anthropic_view``, ``veil_proxy.responses_view``), on requests written
by hand after what Claude Code and Codex send."""

from __future__ import annotations

import copy

from veil_proxy import anthropic_view, responses_view

THINKING = {"type": "thinking", "thinking": "Read it.", "signature": "sig-1"}

CLAUDE = {
    "model": "claude-x",
    "max_tokens": 32000,
    "system": [
        {"type": "text", "text": "billing"},
        {"type": "text", "text": "You are Claude.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Read a.py"}]},
        {"role": "system", "content": [{"type": "text", "text": "cwd: /p"}]},
        {
            "role": "assistant",
            "content": [
                THINKING,
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x = 1", "is_error": False},
                {"type": "text", "text": "<reminder>", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ],
}


def _fitted(view, system_extra="## veil"):
    """What veil fits when it changes nothing: its system message, then the history as
    captured (a mid-history system turn is stored as a user message)."""
    system = view.system_text + "\n\n" + system_extra
    out = [{"role": "system", "content": system}]
    for message in view.messages[view.system_count :]:
        if message["role"] in ("system", "developer"):
            out.append({"role": "user", "content": f"[{message['role']}] {message['content']}"})
        else:
            out.append(message)
    return out, [None, *range(len(out) - 1)]


def test_claude_request_as_veil_history():
    view = anthropic_view.to_view(CLAUDE)
    assert view.system_text == "billing\nYou are Claude."
    assert view.messages == [
        {"role": "system", "content": "billing\nYou are Claude."},
        {"role": "user", "content": "Read a.py"},
        {"role": "system", "content": "cwd: /p"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"file_path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "x = 1"},
        {"role": "user", "content": "<reminder>"},
    ]
    assert view.kept == ["Read it."]


def test_claude_request_unchanged_goes_back_as_sent():
    view = anthropic_view.to_view(CLAUDE)
    fitted, positions = _fitted(view)
    sent = anthropic_view.render(CLAUDE, view, fitted, positions)
    assert sent["messages"] == CLAUDE["messages"]
    assert sent["system"] == [*CLAUDE["system"], {"type": "text", "text": "## veil"}]
    assert {k: v for k, v in sent.items() if k not in ("messages", "system")} == {
        "model": "claude-x",
        "max_tokens": 32000,
    }


def test_claude_stubbed_result_keeps_its_form():
    view = anthropic_view.to_view(CLAUDE)
    fitted, positions = _fitted(view)
    fitted[4] = {**fitted[4], "content": "[evicted 5 tokens #4]"}
    sent = anthropic_view.render(CLAUDE, view, fitted, positions)
    results = sent["messages"][3]["content"]
    assert results[0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "[evicted 5 tokens #4]",
        "is_error": False,
    }
    assert results[1] == CLAUDE["messages"][3]["content"][1]  # the reminder as sent
    assert sent["messages"][2]["content"][0] == THINKING


def test_claude_marker_moves_when_its_message_is_left_out():
    view = anthropic_view.to_view(CLAUDE)
    fitted, positions = _fitted(view)
    del fitted[5], positions[5]  # the reminder carrying the marker
    fitted.append({"role": "user", "content": "[veil context note] 2 items"})
    positions.append(None)
    sent = anthropic_view.render(CLAUDE, view, fitted, positions)
    last = sent["messages"][-1]["content"][-1]
    assert last == {
        "type": "text",
        "text": "[veil context note] 2 items",
        "cache_control": {"type": "ephemeral"},
    }
    assert anthropic_view.cache_breakpoints(sent) == anthropic_view.cache_breakpoints(CLAUDE) == 2


CODEX = {
    "model": "gpt-5-codex",
    "store": False,
    "input": [
        {
            "type": "message",
            "id": "m0",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Be Codex."}],
        },
        {
            "type": "message",
            "id": "m1",
            "role": "user",
            "content": [{"type": "input_text", "text": "Read a.py"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "encrypted_content": "enc",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "c1",
            "name": "exec_command",
            "arguments": '{"cmd": "cat a.py"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "x = 1"},
    ],
}


def test_codex_request_as_veil_history():
    view = responses_view.to_view(CODEX)
    assert view.system_text == "Be Codex."
    assert view.messages == [
        {"role": "developer", "content": "Be Codex."},
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd": "cat a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ]
    assert view.origins[2].extras == (2,)  # the reasoning item travels with its turn
    assert view.kept == ["plan"]


def test_codex_request_unchanged_and_stubbed():
    view = responses_view.to_view(CODEX)
    fitted, positions = _fitted(view)
    sent = responses_view.render(CODEX, view, fitted, positions)
    veil_part = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "## veil"}],
    }
    assert sent["input"] == [CODEX["input"][0], veil_part, *CODEX["input"][1:]]
    changed = copy.deepcopy(fitted)
    changed[3] = {**changed[3], "content": "[evicted 5 tokens #3]"}
    changed[2]["tool_calls"][0]["function"]["arguments"] = '{"evicted": "#2"}'
    sent = responses_view.render(CODEX, view, changed, positions)
    assert sent["input"][3] == CODEX["input"][2]  # reasoning as issued
    assert sent["input"][4] == {**CODEX["input"][3], "arguments": '{"evicted": "#2"}'}
    assert sent["input"][5] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "[evicted 5 tokens #3]",
    }
