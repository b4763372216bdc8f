"""Streaming through the proxy: the openai SDK reads the upstream's deltas in order."""

from __future__ import annotations

import json

import httpx
import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List files.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def test_stream_deltas_arrive_in_order_with_usage_when_asked(run_proxy):
    text = "one two three four five six seven eight nine ten"
    run = run_proxy([text, text])
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    messages = [{"role": "user", "content": "count to ten"}]
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    # the scripted upstream streams one word a chunk: the same ten pieces, in order
    assert pieces == ["one"] + [" " + w for w in text.split()[1:]]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    usage = [c.usage for c in chunks if c.usage]
    sent = run.upstream.requests[0]
    assert sent.body["stream"] is True
    assert usage and usage[-1].prompt_tokens == sent.prompt_tokens
    # without stream_options the client gets no usage chunk, but veil still records usage
    again = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, stream=True, extra_headers={"X-Veil-Session": "b"}
    )
    assert all(c.usage is None for c in again)
    rows = run.veil.store.reader.execute(
        "SELECT prompt_tokens FROM usage WHERE role = 'proxy' ORDER BY ts"
    ).fetchall()
    assert [r[0] for r in rows] == [r.prompt_tokens for r in run.upstream.requests]


def test_streamed_tool_calls_reach_the_client_whole(run_proxy):
    run = run_proxy([{"tool_calls": [{"name": "ls", "arguments": {"path": "src"}}]}])
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "list src"}],
        tools=TOOLS,
        stream=True,
    )
    calls: dict[int, dict] = {}
    finish = None
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                if delta.function:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    assert finish == "tool_calls"
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("call_1_0", "ls", {"path": "src"})
    ]


def test_stream_is_server_sent_events_ending_with_done(run_proxy):
    run = run_proxy(["hello there"])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with (
        httpx.Client(base_url=run.url) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-veil-session-id"].startswith("sess")
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[len("data: ") :]) for line in lines[:-1]]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    text = "".join((e["choices"][0]["delta"].get("content") or "") for e in events if e["choices"])
    assert text == "hello there"
