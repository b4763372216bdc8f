"""Upstream errors reach the client with the upstream's status and a clear OpenAI-shaped body."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from veil.testing.scripted_server import SCRIPTED_API_KEY, ScriptedOpenAIServer


def test_upstream_refusal_keeps_its_status_and_code(run_proxy):
    # the upstream enforces a smaller window than veil was told (a provider that counts more,
    # or a wrong contextWindow): veil's prompt fits its own budget, the upstream refuses it
    run = run_proxy(default="never", window=4000, upstream_window=300)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    long = "word " * 600
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": long}]
        )
    assert caught.value.status_code == 400
    error = caught.value.body
    assert error["code"] == "context_length_exceeded"
    assert "maximum context length is 300 tokens" in error["message"]
    assert "gpt-4o-mini" in error["message"] and "scripted" in error["message"]
    assert run.upstream.requests[-1].refused


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_server_error_reaches_the_client_as_500(run_proxy, stream):
    run = run_proxy([])  # the script is empty: the upstream answers HTTP 500
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with httpx.Client(base_url=run.url, timeout=60) as http:
        r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 500, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert error["type"] == "api_error"
    assert "the script is used up" in error["message"]
    assert "Traceback" not in r.text and SCRIPTED_API_KEY not in r.text


def test_unreachable_upstream_is_a_502_without_the_key(run_proxy):
    run = run_proxy(default="ok")
    run.upstream.stop()  # connections are refused from now on
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    message = caught.value.body["message"]
    assert "could not answer" in message and "scripted" in message
    assert SCRIPTED_API_KEY not in str(caught.value.body)


def test_an_unreachable_provider_falls_back_to_the_next(run_proxy):
    dead = ScriptedOpenAIServer()  # bound, never started, then closed: connections refused
    dead.stop()
    live = ScriptedOpenAIServer(["from the fallback"]).start()
    try:
        auth = {
            "providers": {"dead": dead.provider(), "live": live.provider("sk-live-key-123456")},
            "routing": {"default": "dead", "fallback": ["live"]},
        }
        run = run_proxy(auth=auth)
        client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "from the fallback"
        assert live.api_keys() == ["sk-live-key-123456"]
        assert run.upstream.requests == []  # the project's own scripted server is not in auth
    finally:
        live.stop()


def test_deeply_nested_json_is_a_400_or_kept_as_text_never_a_500(run_proxy):
    """Before: a body nested past the parser's limit, and tool-call arguments nested a few
    hundred levels (redaction walks them recursively), were 500 ``RecursionError``."""
    run = run_proxy(default="ok")
    past_parser = "[" * 100_000 + "]" * 100_000
    arguments = json.dumps({"command": "ls", "a": json.loads("[" * 500 + "]" * 500)})
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    with httpx.Client(base_url=run.url, timeout=60) as http:
        refused = http.post(
            "/v1/chat/completions",
            content=b'{"model": "m", "messages": ' + past_parser.encode() + b"}",
            headers={"content-type": "application/json"},
        )
        too_deep = http.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "metadata": json.loads("[" * 70 + "]" * 70),
            },
        )
        answered = http.post("/v1/chat/completions", json={"model": "m", "messages": history})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"] == (
        "body: not valid JSON (nested too deeply (more levels of [ and { than the JSON parser "
        "allows))"
    )
    assert too_deep.status_code == 400, too_deep.text
    assert too_deep.json()["error"]["message"] == (
        "body: not valid JSON (nested more than 64 levels deep)"
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"] == "ok"
