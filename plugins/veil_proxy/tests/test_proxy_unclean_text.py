"""A lone surrogate in what a client sends the proxy (issue 31 item 5): the JSON escape
``"\\ud800"`` decodes to text UTF-8 cannot hold. The proxy answers 200, the upstream receives
U+FFFD in its place (never a ``UnicodeEncodeError`` 500), and the session stores it so."""

from __future__ import annotations

import httpx

REPLACEMENT = "\ufffd"


def _body(system: str, result: str) -> str:
    # hand-written JSON: json.dumps never writes a lone surrogate escape from a Python str
    return (
        '{"model": "gpt-4o-mini", "messages": ['
        f'{{"role": "system", "content": "{system}"}},'
        '{"role": "user", "content": "List the reports"},'
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
        ' "function": {"name": "ls", "arguments": "{}"}}]},'
        f'{{"role": "tool", "tool_call_id": "c1", "content": "{result}"}}'
        '], "tools": [{"type": "function", "function": {"name": "ls", "parameters":'
        ' {"type": "object", "properties": {}}}}]}'
    )


def test_a_lone_surrogate_in_a_request_reaches_upstream_as_a_replacement(run_proxy):
    run = run_proxy(["Two reports."])
    body = _body("You list files \\udcff.", "report-\\udcff.txt\\nsummary.txt")
    response = httpx.post(
        f"{run.url}/v1/chat/completions",
        content=body.encode("ascii"),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Two reports."
    (sent,) = [r for r in run.upstream.requests if r.body and r.body.get("tools")]
    messages = sent.body["messages"]
    assert messages[0]["role"] == "system"
    assert f"You list files {REPLACEMENT}." in messages[0]["content"]
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool["content"] == f"report-{REPLACEMENT}.txt\nsummary.txt"
    (session,) = run.veil.list_sessions()
    stored = [m["content"] for _, m in run.veil.store.messages(session["id"])]
    assert f"report-{REPLACEMENT}.txt\nsummary.txt" in stored


def test_a_lone_surrogate_in_the_upstream_reply_reaches_the_client_as_a_replacement(run_proxy):
    from veil.testing.scripted_server import Reply

    run = run_proxy([Reply(content_json='"done \\udcff"')])
    response = httpx.post(
        f"{run.url}/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == f"done {REPLACEMENT}"
