"""veil.testing.provider_checks: each rule a provider applies, on a request it accepts and on
the same request broken one way (bodies written by hand from each API's reference)."""

from __future__ import annotations

import copy

import pytest

from veil.testing.provider_checks import (
    BARE_REASONING,
    ROOM_OVER_WINDOW,
    UNPAIRED_CALL,
    UNSIGNED_THINKING,
    anthropic_request_problems,
    broken_copies,
    cache_breakpoints,
    chat_request_problems,
    responses_request_problems,
)
from veil.testing.scripted_server import ScriptedOpenAIServer
from veil.testing.scripted_shapes import anthropic_prompt_tokens

CHAT = {
    "model": "gpt-4o",
    "max_tokens": 100,
    "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
        {"role": "tool", "tool_call_id": "c2", "content": "y = 2"},
        {"role": "assistant", "content": "Done."},
    ],
}


def test_chat_accepts_a_paired_history():
    assert chat_request_problems(CHAT) == []


def test_chat_call_without_its_result():
    body = copy.deepcopy(CHAT)
    del body["messages"][4]
    assert chat_request_problems(body) == [
        "messages[4]: an assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'; not answered: c2"
    ]


def test_chat_result_without_its_call():
    body = copy.deepcopy(CHAT)
    body["messages"].insert(1, {"role": "tool", "tool_call_id": "c9", "content": "?"})
    assert chat_request_problems(body) == [
        "messages[1]: a message with role 'tool' must be a response to a preceding message with "
        "'tool_calls' (tool_call_id 'c9')"
    ]


def test_chat_tool_name_and_limits():
    body = copy.deepcopy(CHAT)
    body["tools"][0]["function"]["name"] = "read file"
    body["max_tokens"] = 0
    assert chat_request_problems(body) == [
        "max_tokens: must be a positive integer, got 0",
        "tools[0].function.name: 'read file' does not match ^[a-zA-Z0-9_-]{1,64}$",
    ]


ANTHROPIC = {
    "model": "claude-x",
    "max_tokens": 4000,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Read it.", "signature": "sig-1"},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"},
                {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ],
}
ISSUED = {"sig-1": "Read it."}


def test_anthropic_accepts_a_tool_loop_with_its_thinking():
    assert anthropic_request_problems(ANTHROPIC, "", ISSUED) == []
    assert cache_breakpoints(ANTHROPIC) == 2


def test_anthropic_thinking_dropped_from_the_tool_loop():
    body = copy.deepcopy(ANTHROPIC)
    del body["messages"][1]["content"][0]
    assert anthropic_request_problems(body, "", ISSUED) == [
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block"
    ]
    body["thinking"] = {"type": "disabled"}  # thinking off: no thinking block needed
    assert anthropic_request_problems(body, "", ISSUED) == []


def test_anthropic_changed_signature():
    body = copy.deepcopy(ANTHROPIC)
    body["messages"][1]["content"][0]["thinking"] = "Read it now."
    assert anthropic_request_problems(body, "", ISSUED) == [
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    ]


def test_anthropic_pairs():
    body = copy.deepcopy(ANTHROPIC)
    body["messages"][2]["content"][0]["tool_use_id"] = "t9"
    assert anthropic_request_problems(body, "", ISSUED) == [
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: t1",
        "messages.2.content: unexpected `tool_use_id` found in `tool_result` blocks: t9. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ]


def test_anthropic_limits_and_roles():
    body = copy.deepcopy(ANTHROPIC)
    body["thinking"]["budget_tokens"] = 4000
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block["cache_control"] = {"type": "ephemeral"}
    body["messages"].insert(1, {"role": "system", "content": "Be careful."})
    assert anthropic_request_problems(body, "", ISSUED) == [
        "max_tokens: must be greater than thinking.budget_tokens (4000), got 4000",
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        "messages.1.role: 'system' is not one of user, assistant",
    ]
    # a system turn is Claude Code's per-turn-control beta
    assert anthropic_request_problems(body, "per-turn-control-2026-07-01", ISSUED)[2:] == []


RESPONSES = {
    "model": "gpt-5",
    "store": False,
    "input": [
        {"type": "message", "role": "user", "content": "Read a.py"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"},
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "x = 1"},
    ],
}


def test_responses_accepts_a_paired_input():
    assert responses_request_problems(RESPONSES, {"enc-1": "rs_1"}) == []


def test_responses_pairs_and_reasoning():
    body = copy.deepcopy(RESPONSES)
    body["input"][3]["call_id"] = "c9"
    assert responses_request_problems(body) == [
        "input[3]: No tool call found for function call output with call_id c9.",
        "input: No tool output found for function call c1.",
    ]
    body = copy.deepcopy(RESPONSES)
    del body["input"][2]  # the reasoning item's output item is gone
    del body["input"][1]["encrypted_content"]
    assert responses_request_problems(body) == [
        "input[1]: Item 'rs_1' of type 'reasoning' was provided without its required following "
        "item.",
        "input[1]: Item with id 'rs_1' not found. Items are not persisted when `store` is set "
        "to false.",
        "input[2]: No tool call found for function call output with call_id c1.",
    ]


def test_responses_changed_encrypted_content():
    body = copy.deepcopy(RESPONSES)
    body["input"][1]["encrypted_content"] = "enc-2"
    assert responses_request_problems(body, {"enc-1": "rs_1"}) == [
        "input[1].encrypted_content: could not be verified"
    ]


def test_broken_copies_are_each_refused_for_their_reason():
    # each copy of an accepted request breaks one rule; the server's check names that rule
    # (a 5,000-token window holds each request and ANTHROPIC's max_tokens of 4,000)
    with ScriptedOpenAIServer(context_window=5000) as server:
        server.issued.signatures["sig-1"] = "Read it."
        server.issued.encrypted["enc-1"] = "rs_1"
        caught = {}
        for api, body in (("chat", CHAT), ("anthropic", ANTHROPIC), ("responses", RESPONSES)):
            assert server.check(api, body) == []
            copies = broken_copies(api, body, 5000)
            caught[api] = {name: server.check(api, copy_) for name, copy_ in copies.items()}
    assert caught["chat"] == {
        UNPAIRED_CALL: [
            "messages[4]: an assistant message with 'tool_calls' must be followed by tool "
            "messages responding to each 'tool_call_id'; not answered: c2"
        ],
        ROOM_OVER_WINDOW: [],  # chat counts the prompt alone unless count_completion
    }
    anthropic_tokens = anthropic_prompt_tokens(ANTHROPIC)
    assert caught["anthropic"] == {
        UNPAIRED_CALL: [
            "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: t1"
        ],
        UNSIGNED_THINKING: ["messages.1.content.0: Invalid `signature` in `thinking` block"],
        ROOM_OVER_WINDOW: [
            f"prompt of {anthropic_tokens} tokens (completion room 5000) over the window of 5000"
        ],
    }
    assert caught["responses"] == {
        UNPAIRED_CALL: ["input: No tool output found for function call c1."],
        BARE_REASONING: [
            "input[1]: Item with id 'rs_1' not found. Items are not persisted when `store` is "
            "set to false."
        ],
        ROOM_OVER_WINDOW: [],
    }
    with ScriptedOpenAIServer(context_window=5000, count_completion=True) as server:
        server.issued.encrypted["enc-1"] = "rs_1"
        for api, body in (("chat", CHAT), ("responses", RESPONSES)):
            (roomy,) = [
                b for n, b in broken_copies(api, body, 5000).items() if n == ROOM_OVER_WINDOW
            ]
            assert roomy.get("max_tokens", roomy.get("max_output_tokens")) == 5000
            (problem,) = server.check(api, roomy)
            assert problem.endswith("(completion room 5000) over the window of 5000")


def test_broken_copies_leave_out_what_a_request_does_not_hold():
    plain = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert sorted(broken_copies("chat", plain, 100)) == [ROOM_OVER_WINDOW]
    assert "max_tokens" not in plain  # the request itself is left as it was
    with pytest.raises(ValueError, match="api: 'gemini'"):
        broken_copies("gemini", plain, 100)
