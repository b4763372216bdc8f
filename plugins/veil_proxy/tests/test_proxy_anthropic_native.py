"""Anthropic's Messages API through the proxy to an Anthropic upstream (a provider of type
``anthropic``): the client's request goes in its own form, with only the conversation fitted:
thinking blocks and their signatures, ``cache_control`` markers, betas and fields litellm does
not model all reach the upstream as the client sent them."""

from __future__ import annotations

import anthropic
import httpx

MODEL = "claude-sonnet-4-5"

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

SYSTEM = [
    {"type": "text", "text": "You are a careful agent."},
    {"type": "text", "text": "Read files, then answer.", "cache_control": {"type": "ephemeral"}},
]


def file_text(n: int) -> str:
    """A distinct tool result of about 330 tokens."""
    return "\n".join(
        f"def handler_{n}_{k}(request): return render(request, {k})" for k in range(22)
    )


def client_for(run):
    return anthropic.Anthropic(base_url=run.url, api_key="unused", max_retries=0)


def converse(client, steps: int, **extra):
    """A Claude Code-like loop: ``steps`` read_file calls with thinking on, the newest user
    message marked for caching; returns the client's history and the last answer."""
    history: list[dict] = [
        {"role": "user", "content": [{"type": "text", "text": "Read the files."}]}
    ]
    for n in range(steps + 1):
        marked = [*history[:-1], _marked(history[-1])]
        with client.messages.stream(
            model=MODEL,
            max_tokens=4000,
            system=SYSTEM,
            tools=TOOLS,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=marked,
            extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
            **extra,
        ) as stream:
            answer = stream.get_final_message()
        history.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in answer.content],
            }
        )
        uses = [b for b in answer.content if b.type == "tool_use"]
        if not uses:
            break
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": file_text(n)}
                    for u in uses
                ],
            }
        )
    return history, answer


def _marked(message: dict) -> dict:
    content = [dict(b) for b in message["content"]]
    content[-1]["cache_control"] = {"type": "ephemeral"}
    return {**message, "content": content}


def _clean(block: dict) -> dict:
    """A block as the client sent it (the SDK's dump has fields the API leaves out as null)."""
    return {k: v for k, v in block.items() if v is not None}


def test_thinking_blocks_and_cache_markers_reach_the_upstream(run_proxy):
    steps = [
        {
            "content": "Reading.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],
            "thinking": "I should read a.",
        },
        "It is a handler file.",
    ]
    run = run_proxy(steps, window=20_000, model=MODEL, provider="anthropic")
    history, answer = converse(client_for(run), 1)
    assert [b.text for b in answer.content if b.type == "text"] == ["It is a handler file."]
    sent = run.upstream.requests
    assert [r.api for r in sent] == ["anthropic", "anthropic"]
    assert run.upstream.problems() == []  # the signature checked against the one issued
    second = sent[1].body
    # the assistant turn went back as the client sent it: thinking block, text, tool_use
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == [_clean(b) for b in history[1]["content"]]
    assert assistant["content"][0]["type"] == "thinking"
    assert assistant["content"][0]["thinking"] == "I should read a."
    # the client's system blocks first, its marker kept; veil's sections after them
    assert second["system"][:2] == SYSTEM
    assert "Context manifest" in second["system"][2]["text"]
    # the client's marker on its newest message kept (2 breakpoints, as it sent)
    results = second["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["cache_control"] == {
        "type": "ephemeral"
    }
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent[1].headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert (
        sent[1].headers["x-api-key"] == "sk-scripted-test-key"
    )  # the provider's, not the client's


def test_evicted_turns_keep_their_thinking_and_pairs(run_proxy):
    count = 8
    steps = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"m{n}.py"}}]}
        for n in range(count)
    ]
    run = run_proxy([*steps, "Read them all."], window=5_000, model=MODEL, provider="anthropic")
    history, answer = converse(client_for(run), count)
    assert [b.text for b in answer.content if b.type == "text"] == ["Read them all."]
    sent = run.upstream.requests
    assert len(sent) == count + 1
    assert run.upstream.problems() == []
    assert all(r.prompt_tokens + r.body["max_tokens"] <= 5_000 for r in sent)
    final = sent[-1].body["messages"]
    results = [
        b
        for m in final
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert len(results) == count
    assert any(str(r["content"]).startswith("[evicted") for r in results)
    turns = [m for m in final if m["role"] == "assistant"]
    assert len(turns) == count and all(t["content"][0]["type"] == "thinking" for t in turns)


def test_max_tokens_lowered_to_fit(run_proxy):
    run = run_proxy(["Fine."], window=9_000, model=MODEL, provider="anthropic")
    answer = httpx.post(
        run.url + "/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 32_000,
            "messages": [{"role": "user", "content": "Hi"}],
        },
    )
    assert answer.status_code == 200, answer.text
    (sent,) = run.upstream.requests
    allowed = sent.body["max_tokens"]
    assert sent.prompt_tokens + allowed <= 9_000
    assert answer.headers["x-veil-max-tokens"] == (
        f"{allowed} (lowered from 32000 to fit the 9000-token window)"
    )


def test_a_window_that_cannot_hold_the_request_is_answered_not_forwarded(run_proxy):
    run = run_proxy(["never"], window=3_000, model=MODEL, provider="anthropic")
    tools = [
        {
            "name": f"tool_{n}",
            "description": "Does a thing. " * 40,
            "input_schema": {"type": "object"},
        }
        for n in range(6)
    ]
    answer = httpx.post(
        run.url + "/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 32_000,
            "system": "Be brief.",
            "tools": tools,
            "messages": [{"role": "user", "content": "Hi"}],
        },
    )
    assert answer.status_code == 400
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    text = error["error"]["message"]
    assert text.startswith("the context window of 3,000 tokens cannot hold this request")
    assert "its 6 tool schemas" in text and "max_tokens 32,000 asked" in text
    assert run.upstream.requests == []


def test_a_refusal_as_too_long_is_fitted_again_and_sent_once_more(run_proxy):
    """veil's window (settings) is larger than the upstream's: the upstream's "prompt is too
    long" teaches the session its window, and the request is fitted again and resent."""
    count = 14
    steps = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"m{n}.py"}}]}
        for n in range(count)
    ]
    run = run_proxy(
        [*steps, "Read them all."],
        window=20_000,
        upstream_window=5_000,
        model=MODEL,
        provider="anthropic",
    )
    client = client_for(run)
    history: list[dict] = [{"role": "user", "content": "Read the files."}]
    for n in range(count + 1):
        answer = client.messages.create(model=MODEL, max_tokens=500, messages=history, tools=TOOLS)
        history.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in answer.content],
            }
        )
        uses = [b for b in answer.content if b.type == "tool_use"]
        if not uses:
            break
        result = {"type": "tool_result", "tool_use_id": uses[0].id, "content": file_text(n)}
        history.append({"role": "user", "content": [result]})
    assert [b.text for b in answer.content if b.type == "text"] == ["Read them all."]
    refused = [r for r in run.upstream.requests if r.refused]
    assert len(refused) == 1  # once: the session keeps the window it learned
    accepted = [r for r in run.upstream.requests if not r.refused]
    assert len(accepted) == count + 1
    assert all(r.prompt_tokens + r.body["max_tokens"] <= 5_000 for r in accepted)
