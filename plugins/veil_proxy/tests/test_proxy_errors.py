"""Upstream errors reach the client with the upstream's status and a clear OpenAI-shaped body."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from veil.testing.scripted_server import SCRIPTED_API_KEY, ScriptedOpenAIServer


def test_upstream_refusal_keeps_its_status_and_code(run_proxy):
    # the upstream enforces a smaller window than veil was told (a provider that counts more,
    # or a wrong contextWindow): veil's prompt fits its own budget, the upstream refuses it;
    # veil fits it again to a smaller window (the request cut around a pointer) and asks once
    # more, and this upstream's 100 tokens cannot hold even that: its refusal reaches the client
    run = run_proxy(default="never", window=4000, upstream_window=100)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    long = "word " * 600
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": long}]
        )
    assert caught.value.status_code == 400
    error = caught.value.body
    assert error["code"] == "context_length_exceeded"
    assert "maximum context length is 100 tokens" in error["message"]
    assert "gpt-4o-mini" in error["message"] and "scripted" in error["message"]
    first, retry = run.upstream.requests
    assert first.refused and retry.refused
    assert retry.prompt_tokens < first.prompt_tokens


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


def _long_history(reads: int) -> list[dict]:
    """A client's conversation: a request, then ``reads`` read_file calls each with a result of
    about 300 tokens."""
    history = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Read every views file and say what they hold."},
    ]
    for n in range(reads):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"v{n}.py"})},
        }
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        body = "\n".join(
            f"def handler_{n}_{k}(request): return render(request, 'p_{n}_{k}.html', ctx={k})"
            for k in range(14)
        )
        history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": body})
    return history


READ_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_refusal_is_fitted_to_the_window_it_states_and_asked_again(run_proxy, stream):
    """Issue 29, the proxy's path: models.main.contextWindow says 50,000, the upstream takes
    3,000. Before, its refusal went to the client at every request. Now the conversation's
    session learns the window the refusal states, the prompt is fitted into it (eviction) and
    sent once more; the client gets the answer, and the next request fits at once."""
    run = run_proxy(["Answered.", "Again."], window=50_000, upstream_window=3000)
    history = _long_history(16)
    body = {"model": "gpt-4o-mini", "messages": history, "tools": READ_TOOL, "stream": stream}
    with httpx.Client(base_url=run.url, timeout=120) as http:
        r = http.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        assert "Answered." in r.text
        follow = {**body, "messages": [*history, {"role": "assistant", "content": "Answered."}]}
        follow["messages"].append({"role": "user", "content": "And the last one?"})
        r2 = http.post("/v1/chat/completions", json=follow)
        assert r2.status_code == 200, r2.text
    first, retry, second = run.upstream.requests
    assert first.refused and not retry.refused and not second.refused
    assert retry.prompt_tokens < first.prompt_tokens and retry.prompt_tokens <= 3000
    assert second.prompt_tokens <= 3000
    # every call keeps its result; the newest read is sent whole
    for request in (retry, second):
        messages = [m for m in request.body["messages"] if m["role"] != "system"]
        open_ids: list[str] = []
        for m in messages:
            if m["role"] == "tool":
                open_ids.remove(m["tool_call_id"])
            else:
                assert not open_ids
                open_ids = [c["id"] for c in m.get("tool_calls") or []]
        assert not open_ids
    assert history[-1]["content"] in [m.get("content") for m in retry.body["messages"]]
    sessions = {r.headers["x-veil-session-id"] for r in (r, r2)}
    assert len(sessions) == 1
    session = run.veil.load_session(sessions.pop())
    assert session.context_window < 50_000
