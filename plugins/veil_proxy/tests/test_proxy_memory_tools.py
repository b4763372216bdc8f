"""Memory tools offered beside the client's (off by default): veil runs the model's calls."""

from __future__ import annotations

import openai

from veil.core.prompt.assemble import NOTE_PREFIX

CLIENT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "ls", "description": "List.", "parameters": {"type": "object"}},
    }
]
REMEMBER = {"name": "veil_remember", "arguments": {"content": "the db is postgres", "kind": "fact"}}


def names(request):
    return [t["function"]["name"] for t in request.body.get("tools") or []]


def test_memory_tools_are_off_by_default(run_proxy):
    run = run_proxy([{"tool_calls": [REMEMBER]}])
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=CLIENT_TOOLS
    )
    assert names(run.upstream.requests[0]) == ["ls"]
    # a call of a tool the proxy did not offer is the client's business: passed on as is
    assert reply.choices[0].message.tool_calls[0].function.name == "veil_remember"


def test_memory_calls_run_in_the_proxy_and_the_model_is_asked_again(run_proxy):
    run = run_proxy([{"tool_calls": [REMEMBER]}, "Noted.", "Postgres."], memory_tools=True)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    history = [{"role": "user", "content": "Remember: the db is postgres."}]
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=history, tools=CLIENT_TOOLS
    )
    reply = raw.parse()
    assert reply.choices[0].message.content == "Noted."
    assert reply.choices[0].message.tool_calls is None
    first, second = run.upstream.requests
    assert "ls" in names(first) and "veil_remember" in names(first)
    own = [m for m in second.body["messages"] if not str(m.get("content")).startswith(NOTE_PREFIX)]
    assert [m["role"] for m in own] == ["system", "user", "assistant", "tool"]
    assert own[2]["tool_calls"][0]["function"]["name"] == "veil_remember"
    assert own[3]["content"].startswith("remembered as item_")
    # the client goes on with its own history (which never held the memory call)
    history += [
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Which db?"},
    ]
    again = client.chat.completions.create(model="m", messages=history, tools=CLIENT_TOOLS)
    assert again.choices[0].message.content == "Postgres."
    session = run.veil.live_session(raw.headers["x-veil-session-id"])
    assert [m["role"] for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    third = run.upstream.requests[2].body["messages"]
    contents = [m.get("content") for m in third]
    assert "Noted." in contents and "Which db?" in contents


def test_memory_tools_with_streaming_send_the_final_answer(run_proxy):
    run = run_proxy([{"tool_calls": [REMEMBER]}, "Noted it."], memory_tools=True)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    chunks = list(
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "remember"}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Noted it."
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert len(run.upstream.requests) == 2
