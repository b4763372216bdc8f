"""Anthropic's /v1/messages through the proxy, with the anthropic SDK (as Claude Code uses it)."""

from __future__ import annotations

import anthropic
import pytest

from veil.core.prompt.assemble import NOTE_PREFIX

TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def client_for(run):
    return anthropic.Anthropic(base_url=run.url, api_key="unused", max_retries=0)


def test_messages_with_tool_use_round_trip(run_proxy):
    run = run_proxy(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}, "It is empty."]
    )
    client = client_for(run)
    history = [{"role": "user", "content": "What is in a.py?"}]
    first = client.messages.create(
        model="claude-sonnet-4-5", system="Be brief.", max_tokens=200, messages=history, tools=TOOLS
    )
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert (use.id, use.name, use.input) == ("call_1_0", "read_file", {"path": "a.py"})
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "(empty)"}],
        },
    ]
    second = client.messages.create(
        model="claude-sonnet-4-5", system="Be brief.", max_tokens=200, messages=history, tools=TOOLS
    )
    assert [b.text for b in second.content if b.type == "text"] == ["It is empty."]
    assert second.stop_reason == "end_turn"
    assert second.usage.input_tokens == run.upstream.requests[1].prompt_tokens
    # what the upstream received: OpenAI messages, the system prompt first, the call paired
    sent = run.upstream.requests[1].body
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith("Be brief.")
    own = [m for m in sent["messages"] if not str(m.get("content")).startswith(NOTE_PREFIX)]
    assert [m["role"] for m in own] == ["system", "user", "assistant", "tool"]
    assert own[1]["content"] == "What is in a.py?"
    assert own[2]["tool_calls"][0]["id"] == "call_1_0"
    assert own[3] == {"role": "tool", "tool_call_id": "call_1_0", "content": "(empty)"}
    assert sent["tools"][0]["function"]["name"] == "read_file"
    assert sent["max_tokens"] == 200
    # one conversation: both requests in one veil session
    assert len({r.headers.get("x-veil-session-id") for r in run.upstream.requests}) == 1


def test_messages_stream_events_in_anthropic_format(run_proxy):
    run = run_proxy(["alpha beta gamma"])
    client = client_for(run)
    with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "three words"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds and "message_delta" in kinds
    assert [b.text for b in final.content] == ["alpha beta gamma"]
    assert final.stop_reason == "end_turn"


def test_anthropic_errors_keep_status_and_shape(run_proxy):
    run = run_proxy([])  # the upstream answers 500
    client = client_for(run)
    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 500
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "api_error"
    assert "could not answer" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=[])
    assert "messages" in bad.value.body["error"]["message"]


def test_a_bug_is_a_500_in_the_route_shape_without_traceback(run_proxy, monkeypatch):
    import httpx
    from veil_proxy import app as proxy_app

    def broken(*args, **kwargs):
        raise RuntimeError("boom at /secret/path")

    run = run_proxy(default="ok")
    monkeypatch.setattr(proxy_app.ProxyState, "prepare", broken)
    with httpx.Client(base_url=run.url) as http:
        r = http.post(
            "/v1/messages",
            json={"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        )
        assert r.status_code == 500
        assert r.json()["error"]["type"] == "api_error"
        assert "RuntimeError" in r.json()["error"]["message"]
        r = http.post(
            "/v1/chat/completions",
            json={"model": "c", "messages": [{"role": "user", "content": "x"}]},
        )
        assert r.status_code == 500 and r.json()["error"]["type"] == "api_error"
        assert "Traceback" not in r.text and "/secret/path" not in r.text


def test_count_tokens_counts_the_clients_messages(run_proxy):
    from veil.core.models.tokens import count_message_tokens

    run = run_proxy()
    client = client_for(run)
    messages = [{"role": "user", "content": "count these few words please"}]
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", messages=messages)
    expected = count_message_tokens(messages, "claude-sonnet-4-5")  # the model it goes to
    assert counted.input_tokens == expected
    assert run.upstream.requests == []  # counting calls no model
