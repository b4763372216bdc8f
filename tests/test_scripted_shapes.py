"""The scripted server's Anthropic Messages and OpenAI Responses answers, read by the real SDKs
(anthropic, openai), and its check of what it received (``problems``)."""

from __future__ import annotations

import anthropic
import openai
import pytest

from veil.testing.scripted_server import ScriptedOpenAIServer
from veil.testing.scripted_shapes import anthropic_prompt_tokens

TOOLS = [{"name": "read", "description": "r", "input_schema": {"type": "object"}}]
CALL = {"content": "Looking.", "tool_calls": [{"name": "read", "arguments": {"path": "a"}}]}


def test_anthropic_stream_with_signed_thinking_and_its_check():
    with ScriptedOpenAIServer([{**CALL, "thinking": "hmm"}, "Done."]) as server:
        client = anthropic.Anthropic(base_url=server.url[:-3], api_key="k", max_retries=0)
        history = [{"role": "user", "content": "hi"}]
        thinking = {"type": "enabled", "budget_tokens": 1024}
        with client.messages.stream(
            model="claude-x", max_tokens=2000, messages=history, tools=TOOLS, thinking=thinking
        ) as stream:
            first = stream.get_final_message()
        assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
        assert first.content[0].thinking == "hmm"
        assert server.issued.signatures == {first.content[0].signature: "hmm"}
        assert (first.content[2].id, first.content[2].input) == ("toolu_1_0", {"path": "a"})
        assert first.usage.input_tokens == server.requests[0].prompt_tokens
        assert first.usage.input_tokens == anthropic_prompt_tokens(server.requests[0].body)
        blocks = [b.model_dump(exclude_none=True) for b in first.content]
        blocks[0]["thinking"] = "changed"  # a client that rewrites its thinking
        history += [
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1_0", "content": "x"}],
            },
        ]
        second = client.messages.create(
            model="claude-x", max_tokens=2000, messages=history, tools=TOOLS, thinking=thinking
        )
        assert [b.type for b in second.content] == ["thinking", "text"]
        assert second.stop_reason == "end_turn"
        assert server.problems() == [
            "request 2 (anthropic): messages.1.content.0: Invalid `signature` in `thinking` block"
        ]


def test_anthropic_refuses_prompt_and_max_tokens_over_the_window():
    with ScriptedOpenAIServer(["never"], context_window=1000) as server:
        client = anthropic.Anthropic(base_url=server.url[:-3], api_key="k", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model="claude-x", max_tokens=999, messages=[{"role": "user", "content": "hi"}]
            )
    prompt = server.requests[0].prompt_tokens
    assert caught.value.body["error"]["message"] == (
        f"input length and `max_tokens` exceed context limit: {prompt} + 999 > 1000, decrease "
        "input length or `max_tokens` and try again"
    )
    assert server.problems() == [
        f"request 1 (anthropic): prompt of {prompt} tokens (completion room 999) over the window "
        "of 1000"
    ]


def test_responses_stream_with_reasoning_and_its_check():
    tools = [{"type": "function", "name": "read", "parameters": {"type": "object"}}]
    with ScriptedOpenAIServer([CALL, "Done."]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        kwargs = dict(
            model="gpt-5",
            tools=tools,
            store=False,
            reasoning={"summary": "auto"},
            include=["reasoning.encrypted_content"],
        )
        with client.responses.stream(input=[{"role": "user", "content": "hi"}], **kwargs) as s:
            first = s.get_final_response()
        assert [i.type for i in first.output] == ["reasoning", "message", "function_call"]
        assert first.output[0].encrypted_content in server.issued.encrypted
        assert first.output[2].call_id == "call_1_0"
        assert first.usage.input_tokens == server.requests[0].prompt_tokens
        # the call's output left out: the server answers, and says OpenAI would not have
        items = [
            {"role": "user", "content": "hi"},
            *(i.model_dump(exclude_none=True) for i in first.output),
        ]
        second = client.responses.create(input=items, **kwargs)
        assert second.output_text == "Done."
        assert server.problems() == [
            "request 2 (responses): input: No tool output found for function call call_1_0."
        ]
