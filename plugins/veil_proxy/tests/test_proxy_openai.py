"""The proxy through the openai SDK against a scripted upstream that records what it receives."""

from __future__ import annotations

import json

import httpx
import openai

from veil.core.prompt.assemble import NOTE_PREFIX
from veil.harness import VeilHarness
from veil.hookspecs import hookimpl
from veil.testing.scripted_server import openai_prompt_tokens

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]

SYSTEM = "You are a careful coding agent. Read files with read_file, then answer."


def file_text(n: int) -> str:
    """A distinct tool result of about 300 tokens."""
    return "\n".join(
        f"def handler_{n}_{k}(request): return render(request, 'page_{n}_{k}.html', ctx={k})"
        for k in range(14)
    )


def tool_script(steps: int):
    """Upstream answers: ``steps`` read_file calls, then a final text; a request without tools
    (a compaction summary veil asks for) gets a summary."""
    state = {"n": 0}

    def reply(body):
        if not body.get("tools"):
            return "Summary: the agent read handler files one by one."
        state["n"] += 1
        if state["n"] <= steps:
            return {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": f"views_{state['n']}.py"}}
                ]
            }
        return "All files read."

    return reply


def upstream_requests(run):
    return [r for r in run.upstream.requests if r.body and (r.body.get("tools"))]


def check_pairs(messages):
    """Every tool message answers a call of the assistant message before it, and every call
    of an assistant message is answered right after it."""
    open_ids: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, (m["tool_call_id"], open_ids)
            open_ids.remove(m["tool_call_id"])
            continue
        assert not open_ids, f"unanswered calls {open_ids} before a {m['role']} message"
        if m["role"] == "assistant":
            open_ids = [c["id"] for c in m.get("tool_calls") or []]
    assert not open_ids


def without_note(messages):
    if messages and str(messages[-1].get("content") or "").startswith(NOTE_PREFIX):
        return messages[:-1]
    return messages


def test_sixty_step_tool_session_arrives_within_the_window(run_proxy):
    steps, window = 60, 4000
    run = run_proxy(tool_script(steps), window=window)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="sk-client-not-forwarded")
    history = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Read views_1.py to views_60.py and tell me what they hold."},
    ]
    raw_sizes = []
    for step in range(steps + 1):
        completion = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=history, tools=TOOLS, max_tokens=256
        )
        session_id = completion.headers["x-veil-session-id"]
        reply = completion.parse()
        message = reply.choices[0].message
        raw_sizes.append(openai_prompt_tokens(history))
        if step == steps:
            assert message.content == "All files read."
            assert reply.choices[0].finish_reason == "stop"
            break
        (call,) = message.tool_calls
        assert json.loads(call.function.arguments) == {"path": f"views_{step + 1}.py"}
        history.append(message.model_dump(exclude_none=True))
        history.append({"role": "tool", "tool_call_id": call.id, "content": file_text(step + 1)})

    # the client's raw history outgrew the upstream's window four times over
    assert raw_sizes[-1] > 4 * window
    sent = upstream_requests(run)
    assert len(sent) == steps + 1
    assert not any(r.refused for r in run.upstream.requests)
    for r in sent:
        assert r.prompt_tokens <= window - 256, r.prompt_tokens
        assert r.body["tools"] == TOOLS  # the client's tools, unchanged
        assert r.body["max_tokens"] == 256
        assert r.api_key == "sk-scripted-test-key"  # auth.json's key, never the client's
        check_pairs(r.body["messages"])
        assert r.body["messages"][0]["role"] == "system"
        assert r.body["messages"][0]["content"].startswith(SYSTEM)
    # one conversation, one veil session, which holds all of it (nothing lost)
    session = run.veil.live_session(session_id)
    assert len(session.messages) == 1 + 2 * steps + 0
    assert len({r.headers.get("x-veil-session-id") for r in sent}) == 1
    assert run.veil.store.eviction_count(session.id) > 0
    # what left the prompt is stored: the last request names the first file's result by stub
    last = sent[-1].body["messages"]
    results = {m["tool_call_id"]: m["content"] for m in history if m["role"] == "tool"}
    shown = [m for m in last if m["role"] == "tool"]
    whole = [m for m in shown if m["content"] == results[m["tool_call_id"]]]
    # most results left the prompt: as a paired stub, an excerpt, or with their whole step
    # (a step whose turn and results are all stubs is left out)
    assert steps - len(whole) > steps // 2
    stubs = [m for m in shown if m["content"].startswith("[evicted ")]
    excerpts = [m for m in shown if m not in whole and m not in stubs]
    assert stubs  # ...paired stubs among them
    assert all(" lines elided: #" in m["content"] for m in excerpts)  # the rest excerpts
    assert [m.get("content") for m in last].count(file_text(steps)) == 1  # the newest stays
    for stub in stubs[:3]:  # ...and each stays retrievable, whole
        handle = stub["content"].rstrip("]").rsplit(" ", 1)[-1]
        hydrated = VeilHarness.attach(run.veil, session).call_tool(
            "veil_hydrate", {"pointer": handle}, "t1"
        )
        assert results[stub["tool_call_id"]] in hydrated
    # cache-stable prefix: between change moments each request starts with the previous one
    # (less its trailing note); the system message never changes
    grew = 0
    for before, after in zip(sent, sent[1:], strict=False):
        prev = without_note(before.body["messages"])
        assert after.body["messages"][0] == before.body["messages"][0]
        if after.body["messages"][: len(prev)] == prev:
            grew += 1
    assert grew >= steps // 2, grew
    # usage recorded per upstream call
    rows = run.veil.store.reader.execute(
        "SELECT role, prompt_tokens, completion_tokens FROM usage WHERE session_id = ?",
        (session.id,),
    ).fetchall()
    proxied = [r for r in rows if r[0] == "proxy"]
    assert [r[1] for r in proxied] == [r.prompt_tokens for r in sent]


def test_sessions_follow_the_header_else_the_first_messages(run_proxy):
    run = run_proxy(default="ok")
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")

    def ask(messages, **headers):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=messages, extra_headers=headers or None
        )
        assert raw.parse().choices[0].message.content == "ok"
        return raw.headers["x-veil-session-id"]

    a = [{"role": "system", "content": "S"}, {"role": "user", "content": "task A"}]
    b = [{"role": "system", "content": "S"}, {"role": "user", "content": "task B"}]
    first = ask(a)
    assert ask(b) != first  # another first user message: another conversation
    a_next = a + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    assert ask(a_next) == first  # the same conversation, one step on
    session = run.veil.live_session(first)
    assert [m["content"] for m in session.messages] == ["task A", "ok", "more"]
    # a retry of the same request captures nothing twice
    assert ask(a_next) == first
    assert len(run.veil.live_session(first).messages) == 3
    # the header names the conversation whatever the messages
    named = ask(a, **{"X-Veil-Session": "ticket-42"})
    assert named != first
    assert ask(b, **{"X-Veil-Session": "ticket-42"}) != named  # b does not extend a: a restart
    # the book survives: a new proxy on the same project maps the conversation to its session
    book = json.loads((run.veil.config.project_dir / ".veil/proxy/sessions.json").read_text())
    assert first in book.values()


def test_edited_history_starts_a_fresh_session(run_proxy):
    run = run_proxy(default="ok")
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    base = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "ok"}]
    h = {"X-Veil-Session": "c1"}
    one = client.chat.completions.with_raw_response.create(
        model="m", messages=base + [{"role": "user", "content": "one"}], extra_headers=h
    )
    two = client.chat.completions.with_raw_response.create(
        model="m", messages=base + [{"role": "user", "content": "two"}], extra_headers=h
    )
    old, new = one.headers["x-veil-session-id"], two.headers["x-veil-session-id"]
    assert old != new
    assert [m["content"] for m in run.veil.live_session(new).messages] == ["hello", "ok", "two"]
    # what the upstream received is the client's edited history, not the stored one
    assert run.upstream.requests[-1].user_texts() == ["hello", "two"]


def test_bad_requests_name_the_field(run_proxy):
    run = run_proxy(default="ok")
    with httpx.Client(base_url=run.url) as http:
        cases = [
            ({"model": "m", "messages": []}, "messages"),
            ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
            ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
            ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": {}}, "tools"),
            (
                {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "9"},
                "max_tokens",
            ),
        ]
        for body, field in cases:
            r = http.post("/v1/chat/completions", json=body)
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert field in error["message"] and error["type"] == "invalid_request_error"
        r = http.post("/v1/chat/completions", content=b"{not json")
        assert r.status_code == 400 and "body" in r.json()["error"]["message"]
        r = http.post("/v1/chat/completions", json=[1])
        assert r.status_code == 400
        assert http.get("/v1/models").json()["data"][0]["id"] == "gpt-4o-mini"
        # a foreign Host is refused (DNS rebinding), as veil serve does
        r = http.get("/v1/models", headers={"Host": "evil.example"})
        assert r.status_code == 421
        assert "not this server: veil proxy on a loopback" in r.text
    assert run.upstream.requests == []  # nothing bad reached the upstream


class TurnHooks:
    """Records the turn hooks the proxy's captures fire (``after_iteration``, ``turn_end``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    @hookimpl
    def after_iteration(self, session, iteration):
        self.calls.append(("after_iteration", len(session.messages)))

    @hookimpl
    def turn_end(self, session, final_message):
        self.calls.append(("turn_end", (final_message or {}).get("content")))


def test_captured_history_ends_iterations_per_tool_batch_and_turns_at_final_answers(run_proxy):
    run = run_proxy(default="ok")
    hooks = TurnHooks()
    run.veil.pm.register(hooks, name="turn-hooks")
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused")
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for n in (1, 2)
    ]
    history = [
        {"role": "user", "content": "Read both files"},  # message 0
        {"role": "assistant", "content": None, "tool_calls": calls},  # 1
        {"role": "tool", "tool_call_id": "c1", "content": "first"},  # 2
        {"role": "tool", "tool_call_id": "c2", "content": "second"},  # 3: the batch is over
        {"role": "assistant", "content": "Both read."},  # 4: the final answer
        {"role": "user", "content": "Thanks"},  # 5
    ]
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)
    assert reply.choices[0].message.content == "ok"
    # one batch of two results: after_iteration once, when the second is captured; the
    # final answer ends the turn
    assert hooks.calls == [("after_iteration", 4), ("turn_end", "Both read.")]
