"""Calls to ``openai`` providers through the official ``openai`` SDK without litellm
(veil.core.models.openai_chat), against a real server on 127.0.0.1 (veil.testing.scripted_server):
what it receives, and what veil makes of each answer, compared with what the same answer gives
through litellm."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from veil.core import background
from veil.core.errors import ProviderError
from veil.core.models import openai_chat
from veil.core.models.llm import ContextWindowExceededError, LiteLLMModel, Route
from veil.core.models.tokens import count_message_tokens, count_text_tokens
from veil.testing.scripted_server import Reply, ScriptedOpenAIServer

KEY_A = "sk-test-AAAAaaaa0123456789abcdefXYZ"
KEY_B = "sk-test-BBBBbbbb9876543210zyxwvuXYZ"
HI = [{"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List a folder",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


@pytest.fixture(autouse=True)
def _direct(monkeypatch):
    monkeypatch.delenv("VEIL_DIRECT_OPENAI", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _model(*servers, name="gpt-4o-mini", options=None, keys=(KEY_A, KEY_B)):
    routes = [
        Route(name=f"p{i}", type="openai", base_url=s.url, api_key=k)
        for i, (s, k) in enumerate(zip(servers, keys, strict=False))
    ]
    return LiteLLMModel(name, routes, options=options, context_window=128_000)


def test_a_plain_answer_and_what_the_server_received():
    with ScriptedOpenAIServer(["Hello there"]) as server:
        model = _model(server, options={"temperature": 0.2, "max_tokens": 64})
        result = model.complete(HI, tools=TOOLS)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.api_key == KEY_A
    assert request.headers["user-agent"].startswith("OpenAI/Python")  # the SDK sent it
    assert request.body == {
        "model": "gpt-4o-mini",  # the openai/ prefix is litellm's, not the wire's
        "messages": HI,
        "tools": TOOLS,
        "temperature": 0.2,
        "max_tokens": 64,
    }
    assert result.message == {"role": "assistant", "content": "Hello there"}
    assert (result.model, result.provider, result.finish_reason) == (
        "openai/gpt-4o-mini",
        "p0",
        "stop",
    )
    # the server's own usage (its prompt count and cl100k of the answer), not veil's
    assert result.usage == {"prompt_tokens": request.prompt_tokens, "completion_tokens": 2}
    assert result.usage_estimated is False


def test_a_streamed_answer_with_tool_calls_is_assembled_and_streamed_piece_by_piece():
    reply = {
        "content": "Let me look at it",
        "tool_calls": [
            {"name": "ls", "arguments": {"path": "src"}, "id": "call_a"},
            {"name": "read", "arguments": {"path": "README.md"}, "id": "call_b"},
        ],
    }
    pieces: list[str] = []
    with ScriptedOpenAIServer([reply], cached=5) as server:
        result = _model(server).complete(HI, tools=TOOLS, on_token=pieces.append)
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "".join(pieces) == "Let me look at it" and len(pieces) == 5  # one chunk per word
    assert result.message == {
        "role": "assistant",
        "content": "Let me look at it",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"path": "src"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "README.md"}'},
            },
        ],
    }
    assert result.finish_reason == "tool_calls"
    prompt = server.requests[0].prompt_tokens
    assert result.usage["prompt_tokens"] == prompt and result.usage["cached_tokens"] == 5


def test_a_server_that_repeats_a_tool_calls_id_and_name_in_every_chunk_gives_them_once():
    # vLLM-style streams repeat ``id``, ``type`` and the function name in each chunk of a call;
    # the SDK's accumulator joins repeated strings, which gave id "call_acall_acall_a" and name
    # "lslsls" (a tool that does not exist, an id the tool result no longer matches)
    reply = Reply(
        None,
        [
            {"name": "ls", "arguments": {"path": "src/deep/folder"}, "id": "call_a"},
            {"name": "read", "arguments": {"path": "README.md"}, "id": "call_b"},
        ],
        repeat_call_fields=True,
    )
    with ScriptedOpenAIServer([reply]) as server:
        result = _model(server).complete(HI, tools=TOOLS, on_token=lambda _piece: None)
    calls = result.message["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_a", "ls"),
        ("call_b", "read"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "src/deep/folder"},
        {"path": "README.md"},
    ]


def test_an_answer_without_usage_is_counted_by_veil_and_marked_estimated():
    with ScriptedOpenAIServer(["one two three"], omit_usage=True) as server:
        result = _model(server).complete(HI, on_token=lambda _: None)
    assert result.usage == {
        "prompt_tokens": count_message_tokens(HI, "openai/gpt-4o-mini"),
        "completion_tokens": count_text_tokens("one two three", "openai/gpt-4o-mini"),
    }
    assert result.usage_estimated is True


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (Reply("slow down", status=429, error_code="rate_limit_exceeded"), "RateLimitError"),
        (Reply("overloaded", status=503), "ServiceUnavailableError"),
        (Reply("boom", status=500), "InternalServerError"),
    ],
    ids=["429", "503", "500"],
)
def test_a_transient_failure_moves_on_to_the_next_provider(failure, kind):
    with (
        ScriptedOpenAIServer([failure]) as first,
        ScriptedOpenAIServer(["from the backup"]) as second,
    ):
        model = _model(first, second, options={"max_retries": 0})
        result = model.complete(HI)
        with pytest.raises(ProviderError) as info:  # both fail: each failure is named
            first.add(failure)
            second.add(failure)
            model.complete(HI)
    assert f"p0 (openai/gpt-4o-mini): {kind}" in str(info.value)
    assert f"p1 (openai/gpt-4o-mini): {kind}" in str(info.value)
    assert [r.api_key for r in first.requests] == [KEY_A, KEY_A]
    assert [r.api_key for r in second.requests] == [KEY_B, KEY_B]
    assert (result.provider, result.content) == ("p1", "from the backup")


def test_the_sdk_retries_a_transient_failure_on_the_same_provider_first():
    """Without ``max_retries`` in the role's options the SDK's default applies (2 retries, as
    litellm passes it): a 503 then an answer from the same server is one answer, and the
    backup is never asked."""
    with (
        ScriptedOpenAIServer([Reply("overloaded", status=503), "second try"]) as first,
        ScriptedOpenAIServer(["never"]) as second,
    ):
        result = _model(first, second).complete(HI)
    assert (result.provider, result.content) == ("p0", "second try")
    assert len(first.requests) == 2 and second.requests == []
    assert first.requests[1].headers["x-stainless-retry-count"] == "1"


def test_an_unreachable_provider_moves_on():
    with ScriptedOpenAIServer(["ok"]) as alive:
        dead = Route(name="dead", type="openai", base_url="http://127.0.0.1:9/v1", api_key=KEY_A)
        backup = Route(name="backup", type="openai", base_url=alive.url, api_key=KEY_B)
        model = LiteLLMModel("gpt-4o-mini", [dead, backup], {"max_retries": 0}, 8192)
        result = model.complete(HI)
    assert (result.provider, result.content) == ("backup", "ok")


def test_an_auth_error_stops_at_once_and_the_key_is_never_repeated():
    echo = f"Incorrect API key provided: {KEY_A}"
    with (
        ScriptedOpenAIServer([Reply(echo, status=401, error_code="invalid_api_key")]) as first,
        ScriptedOpenAIServer(["never"]) as second,
        pytest.raises(ProviderError) as info,
    ):
        _model(first, second).complete(HI)
    assert second.requests == []  # another provider would refuse the same request
    text = str(info.value)
    assert "p0 (openai/gpt-4o-mini): AuthenticationError" in text
    assert not any(KEY_A[i : i + 8] in text for i in range(len(KEY_A) - 7))


def test_a_prompt_over_the_window_is_a_context_window_error_without_fallback():
    with (
        ScriptedOpenAIServer(["never"], context_window=5) as first,
        ScriptedOpenAIServer(["never"]) as second,
        pytest.raises(ContextWindowExceededError) as info,
    ):
        _model(first, second).complete([{"role": "user", "content": "word " * 50}])
    assert first.requests[0].refused and second.requests == []
    assert "maximum context length is 5 tokens" in str(info.value)


def test_no_key_anywhere_is_an_authentication_error_and_sends_nothing():
    with ScriptedOpenAIServer(["never"]) as server:
        route = Route(name="p0", type="openai", base_url=server.url, api_key=None)
        with pytest.raises(ProviderError, match="AuthenticationError: .*OPENAI_API_KEY"):
            LiteLLMModel("gpt-4o-mini", [route], context_window=8192).complete(HI)
    assert server.requests == []


def test_a_callback_error_is_the_callers_not_a_provider_failure():
    class Stop(Exception):
        pass

    def stop(_: str) -> None:
        raise Stop("enough")

    with (
        ScriptedOpenAIServer(["a b c"]) as first,
        ScriptedOpenAIServer(["x"]) as second,
        pytest.raises(Stop),
    ):
        _model(first, second).complete(HI, on_token=stop)
    assert second.requests == []


def test_which_calls_go_through_the_sdk_and_which_through_litellm(monkeypatch):
    assert openai_chat.can_send("openai", {"temperature": 0, "timeout": 30, "max_retries": 1})
    assert not openai_chat.can_send("openai", {"mock_response": "hi"})  # litellm's own option
    assert not openai_chat.can_send("anthropic", {})
    monkeypatch.setenv("VEIL_DIRECT_OPENAI", "0")
    assert not openai_chat.can_send("openai", {})


def test_the_sdk_clients_are_closed_when_veil_ends_and_made_again_after():
    with ScriptedOpenAIServer(["one", "two"]) as server:
        model = _model(server)
        assert model.complete(HI).content == "one"
        made = openai_chat.client(server.url, KEY_A)
        assert not made.is_closed()
        background.close_openai_clients()  # what background.finish() runs before it exits
        assert made.is_closed()
        assert model.complete(HI).content == "two"  # a later call makes a new client
        assert openai_chat.client(server.url, KEY_A) is not made


def test_the_same_answers_give_the_same_completions_through_litellm(monkeypatch):
    """Parity: each reply once through the SDK and once through litellm (VEIL_DIRECT_OPENAI=0)
    gives equal messages, finish reasons and usage."""
    replies = [
        "plain text",
        {"content": None, "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
    ]
    out = {}
    for direct in ("1", "0"):
        monkeypatch.setenv("VEIL_DIRECT_OPENAI", direct)
        with ScriptedOpenAIServer(replies * 2, cached=3) as server:
            model = _model(server)
            results = [model.complete(HI, tools=TOOLS) for _ in replies]
            results += [model.complete(HI, tools=TOOLS, on_token=lambda _: None) for _ in replies]
        for result in results:  # the ids the server made up differ by request number only
            for call in result.message.get("tool_calls") or []:
                call["id"] = call["id"].rsplit("_", 1)[-1]
        out[direct] = [(r.message, r.finish_reason, r.usage, r.usage_estimated) for r in results]
        bodies = [{k: v for k, v in r.body.items() if k != "model"} for r in server.requests]
        out[direct + "bodies"] = bodies
    assert out["1"] == out["0"]
    assert out["1bodies"] == out["0bodies"]


def test_veil_print_against_an_openai_provider_never_imports_litellm(tmp_path):
    """``veil -p`` with a provider of type openai and a contextWindow: the answer comes through
    the openai SDK without litellm in the process (issue 30: importing it was most of 8-12 s)."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    with ScriptedOpenAIServer(["Hello from the server"]) as server:
        auth = {
            "providers": {"local": server.provider()},
            "models": {"main": {"model": "gpt-4o-mini", "contextWindow": 128000}},
        }
        (home / "auth.json").write_text(json.dumps(auth))
        code = (
            "import atexit, sys\n"
            "from veil.cli import main\n"
            "atexit.register(lambda: print('LOADED', [m for m in ('litellm', 'torch',"
            " 'sentence_transformers', 'openai') if m in sys.modules], flush=True))\n"
            "main(['-p', 'hi'])\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
        env["VEIL_HOME"] = str(home)
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["Hello from the server", "LOADED ['openai']"]
    assert server.requests[0].api_key == server.provider()["api_key"]
