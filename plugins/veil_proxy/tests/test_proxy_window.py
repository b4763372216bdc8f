"""The completion room: ``max_tokens`` lowered to what the window holds, or the request answered
with an error naming the window and what took it (``veil_proxy.window``), through the chat
route with the openai SDK and by the rule's own arithmetic."""

from __future__ import annotations

import openai
import pytest
from veil_proxy.window import WindowTooSmall, completion_room


def test_room_keeps_a_limit_that_fits():
    room = completion_room(100_000, 3_000, 2_000, 5, 8_000)
    assert (room.allowed, room.lowered, room.cap) == (8_000, False, 47_500)


def test_room_lowers_to_half_of_what_the_fixed_part_leaves():
    # 40,000 - 12,000 - 8,000 = 20,000 left; half of it for the answer
    room = completion_room(40_000, 12_000, 8_000, 12, 128_000)
    assert (room.allowed, room.lowered) == (10_000, True)
    assert room.header() == "10000 (lowered from 128000 to fit the 40000-token window)"


def test_room_never_below_the_floor():
    # 5,000 - 2,500 = 2,500 left: half is 1,250, above the 1,024 floor
    assert completion_room(5_000, 2_000, 500, 1, 4_000).allowed == 1_250
    # 3,000 left: 1,500; a request asking 1,200 keeps it
    assert completion_room(5_000, 1_500, 500, 1, 1_200).allowed == 1_200


def test_room_with_thinking_lowers_the_budget_under_max_tokens():
    # 20,000 - 10,000 = 10,000 left: max_tokens 5,000; a budget of 8,000 becomes 2,500
    room = completion_room(20_000, 9_000, 1_000, 3, 16_000, thinking_budget=8_000)
    assert (room.allowed, room.thinking_budget) == (5_000, 2_500)


def test_room_refused_when_the_fixed_part_fills_the_window():
    with pytest.raises(WindowTooSmall) as caught:
        completion_room(16_000, 12_300, 7_200, 12, 32_000)
    assert caught.value.message.startswith(
        "the context window of 16,000 tokens cannot hold this request: its system prompt takes "
        "12,300 tokens (the agent's own and veil's sections) and its 12 tool schemas 7,200 "
        "tokens, 19,500 before any message, which leaves 0 for the conversation and the answer "
        "(max_tokens 32,000 asked; at least 2,048 needed)"
    )
    with pytest.raises(WindowTooSmall):  # 2,047 left: one token short of the floor twice over
        completion_room(10_000, 7_953, 0, 0, None)
    assert completion_room(10_000, 7_952, 0, 0, None).allowed is None


def test_chat_max_tokens_lowered_with_a_header(run_proxy):
    run = run_proxy(["Fine."], window=6_000, model="gpt-4-turbo")
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4-turbo", max_tokens=20_000, messages=[{"role": "user", "content": "Hi"}]
    )
    assert raw.parse().choices[0].message.content == "Fine."
    (sent,) = run.upstream.requests
    assert sent.body["max_tokens"] < 20_000
    assert sent.prompt_tokens + sent.body["max_tokens"] <= 6_000
    assert raw.headers["x-veil-max-tokens"] == (
        f"{sent.body['max_tokens']} (lowered from 20000 to fit the 6000-token window)"
    )


def test_chat_window_too_small_is_an_openai_error(run_proxy):
    run = run_proxy(["never"], window=2_500, model="gpt-4-turbo")
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {"name": f"t{n}", "description": "Does it. " * 50, "parameters": {}},
        }
        for n in range(4)
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4-turbo", tools=tools, messages=[{"role": "user", "content": "Hi"}]
        )
    error = caught.value.body
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith(
        "the context window of 2,500 tokens cannot hold this request"
    )
    assert "its 4 tool schemas" in error["message"]
    assert run.upstream.requests == []
