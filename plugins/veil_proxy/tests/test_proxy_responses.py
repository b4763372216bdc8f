"""OpenAI's Responses API (``POST /v1/responses``) through the proxy, with the openai SDK (as
Codex speaks it): to an upstream that speaks Responses, the client's items go back as they were
(reasoning items with their encrypted content, call ids) with only the conversation fitted; to
any other upstream, litellm's Responses bridge carries it."""

from __future__ import annotations

import httpx
import openai

MODEL = "gpt-4-turbo"
"""The model the client names and veil is configured with (its window is settings'); counted with
cl100k_base, as the scripted upstream counts."""

TOOLS = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def client_for(run):
    return openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)


def file_text(n: int) -> str:
    """A distinct tool output of about 300 tokens."""
    return "\n".join(
        f"def handler_{n}_{k}(request): return render(request, {k})" for k in range(22)
    )


def converse(client, steps: int, stream: bool = True):
    """Run a Codex-like loop: ``steps`` read_file calls answered with :func:`file_text`, then
    the final answer; returns the client's input items and the last response."""
    items = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Be brief."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Read the files."}],
        },
    ]
    for n in range(steps + 1):
        kwargs = dict(
            model=MODEL,
            input=items,
            tools=TOOLS,
            reasoning={"summary": "auto"},
            include=["reasoning.encrypted_content"],
            store=False,
        )
        if stream:
            with client.responses.stream(**kwargs) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(**kwargs)
        items += [item.model_dump(exclude_none=True) for item in response.output]
        calls = [i for i in response.output if i.type == "function_call"]
        for call in calls:
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": file_text(n)}
            )
        if not calls:
            break
    return items, response


def test_responses_round_trip_keeps_the_clients_items(run_proxy):
    steps = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}, "It is short."]
    run = run_proxy(steps, window=8000, model=MODEL)
    items, last = converse(client_for(run), 1)
    assert last.output_text == "It is short."
    sent = run.upstream.requests
    assert [r.path for r in sent] == ["/v1/responses", "/v1/responses"]
    assert run.upstream.problems() == []
    second = sent[1].body["input"]
    # the client's reasoning item (with the encrypted content issued for it), its call and
    # the call's output went upstream exactly as the client sent them back
    reasoning, call, output = items[2], items[3], items[4]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"]
    assert reasoning in second and call in second and output in second
    assert second.index(reasoning) + 1 == second.index(call)
    # the client's developer message first, unchanged; veil's sections after it
    assert second[0] == items[0]
    assert second[1]["role"] == "developer"
    assert "Context manifest" in second[1]["content"][0]["text"]
    assert sent[1].body["include"] == ["reasoning.encrypted_content"]
    assert sent[1].body["store"] is False


def test_responses_unstreamed(run_proxy):
    run = run_proxy(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]}, "Done."], model=MODEL
    )
    items, last = converse(client_for(run), 1, stream=False)
    assert last.output_text == "Done."
    assert [r.body["stream"] for r in run.upstream.requests] == [False, False]
    assert run.upstream.problems() == []


def test_responses_fitted_to_the_window(run_proxy):
    steps = 8
    replies = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"m{n}.py"}}]}
        for n in range(steps)
    ]
    run = run_proxy([*replies, "Read them all."], window=2500, model=MODEL)
    items, last = converse(client_for(run), steps)
    assert last.output_text == "Read them all."
    sent = run.upstream.requests
    assert len(sent) == steps + 1 and run.upstream.problems() == []
    assert all(r.prompt_tokens <= 2500 for r in sent)
    final = sent[-1].body["input"]
    outputs = [i for i in final if i.get("type") == "function_call_output"]
    assert len(outputs) == steps  # every call kept its output
    assert any(o["output"].startswith("[evicted") for o in outputs)
    assert outputs[-1]["output"] == file_text(steps - 1)  # the newest whole
    # an evicted turn's items keep their form: reasoning, then its call
    kinds = [i["type"] for i in final if i.get("type") in ("reasoning", "function_call")]
    assert kinds == ["reasoning", "function_call"] * steps


def test_responses_to_an_upstream_of_another_api(run_proxy):
    """An Anthropic upstream: litellm's Responses bridge speaks Messages to it."""
    steps = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}, "Done."]
    run = run_proxy(
        steps,
        window=8000,
        model="claude-sonnet-4-5",
        provider="anthropic",
        upstream_model="claude-sonnet-4-5",
    )
    items, last = converse(client_for(run), 1)
    assert last.output_text == "Done."
    sent = run.upstream.requests
    assert [r.api for r in sent] == ["anthropic", "anthropic"]
    assert run.upstream.problems() == []
    (output,) = [i for i in items if i.get("type") == "function_call_output"]
    blocks = sent[1].body["messages"][-1]["content"]
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": output["call_id"],
        "content": file_text(0),
    }
    # the client named no limit: the upstream was asked what the window holds
    assert sent[1].prompt_tokens + sent[1].body["max_tokens"] <= 8000


def test_responses_refuses_a_conversation_the_provider_keeps(run_proxy):
    run = run_proxy(["never"])
    answer = httpx.post(
        run.url + "/v1/responses",
        json={"model": "gpt-5", "input": "go on", "previous_response_id": "resp_1"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("previous_response_id: ")
    assert run.upstream.requests == []


def test_responses_max_output_tokens_lowered(run_proxy):
    run = run_proxy(["Short."], window=6000, model=MODEL)
    answer = httpx.post(
        run.url + "/v1/responses",
        json={"model": MODEL, "input": "Say something.", "max_output_tokens": 50_000},
    )
    assert answer.status_code == 200, answer.text
    sent = run.upstream.requests[0].body
    assert sent["max_output_tokens"] < 6000 - run.upstream.requests[0].prompt_tokens
    header = answer.headers["x-veil-max-tokens"]
    assert (
        header == f"{sent['max_output_tokens']} (lowered from 50000 to fit the 6000-token window)"
    )
