"""The prompt's prefix stays put (issue 18, DESIGN.md invariant): what the loop sends at each
step starts with everything it sent at the step before, the system message never changes
within a session, the context note is valid for every provider, and the request a provider
receives fits its window once the tool schemas and the completion are counted."""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from veil.core.prompt.assemble import NOTE_PREFIX, pairing_problems


def _layer_plugins() -> list[tuple[str, object]]:
    """The context layer and the plugins that add system sections, as installed."""
    import veil_compaction
    import veil_convergence
    import veil_fsrs
    import veil_memoryfiles
    from veil_fsrs import evict_plugin

    return [
        ("veil_fsrs", veil_fsrs),
        ("veil_fsrs_evict", evict_plugin),
        ("veil_compaction", veil_compaction),
        ("veil_convergence", veil_convergence),
        ("veil_memoryfiles", veil_memoryfiles),
    ]


FAILING = "python3 -c 'import no_such_module_for_veil_cache_tests'"


def _read(n: int) -> dict:
    return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{n}.txt"}}]}


def _bash(command: str) -> dict:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def _is_note(message: dict) -> bool:
    return message["role"] == "user" and (message.get("content") or "").startswith(NOTE_PREFIX)


def _body(prompt: list[dict]) -> list[dict]:
    """A prompt without its trailing note (the only part sent after the rest, when present)."""
    return prompt[:-1] if _is_note(prompt[-1]) else prompt


def test_fifty_tool_steps_each_start_with_the_whole_previous_prompt(make_veil, project):
    """50 tool steps under no pressure through the real loop, with the context layer, the
    convergence monitor (a warning comes and stays) and the memory files loaded: every
    prompt t starts with prompt t-1 less its trailing note, message for message. Before issue
    18 the manifest's counts in the system message changed at every step."""
    for n in range(50):
        (project / f"f{n}.txt").write_text(f"module_{n} = {n}\n" * (5 + n % 7))
    replies = [_read(n) for n in range(20)]
    replies += [_bash(FAILING)] * 3  # the convergence monitor warns after the third
    replies += [_read(n) for n in range(20, 47)]
    replies.append("done")
    assert len(replies) == 51
    veil = make_veil(
        replies,
        plugins=_layer_plugins(),
        settings={"compaction": {"observationMaskingTurns": 0}},
        context_window=200_000,
    )
    assert veil.context_layer_on
    session = veil.new_session()
    result = veil.run_turn(session, "read the files", max_iterations=60)
    assert result.status == "done"
    calls = veil.model.calls
    assert len(calls) == 51
    for t in range(1, len(calls)):
        before = _body(calls[t - 1])
        assert calls[t][: len(before)] == before, f"prompt {t} rewrote what prompt {t - 1} sent"
        assert pairing_problems([m for m in _body(calls[t])[1:] if not _is_note(m)]) == []
    system = calls[0][0]
    assert system["role"] == "system" and "Context manifest" in system["content"]
    assert all(c[0] == system for c in calls)
    assert all(tools == veil.model.tools_seen[0] for tools in veil.model.tools_seen)
    # the manifest's counts: placed after the task at the first call and, with no change
    # moment since, left there (cached) rather than rewritten at every step
    anchored = calls[0][2]
    assert _is_note(anchored) and "Loaded: 1 items" in anchored["content"]
    assert all(c[2] == anchored for c in calls)
    # the convergence warning is volatile: sent last while it holds, never in the system
    warned = [t for t, c in enumerate(calls) if "Convergence warning" in c[-1]["content"] or ""]
    assert warned and all(_is_note(calls[t][-1]) for t in warned)
    assert veil.store.eviction_count(session.id) == 0  # no pressure: no pass ran


def test_between_passes_prompts_only_append_and_a_pass_refreshes_the_note(make_veil, project):
    """Under pressure (a 7,000-token window, ~3,300 of it tool schemas) eviction runs in
    passes: every prompt either
    extends the previous one (no pass) or follows a pass, which freed room down to the
    low-water mark and put the refreshed manifest note last; there are several steps between
    passes."""
    for n in range(40):
        lines = [
            f"def handler_{n}_{k}(request): return render(request, 'p{k}.html')" for k in range(12)
        ]
        (project / f"v{n}.py").write_text("\n".join(lines) + "\n")
    replies = [
        {"tool_calls": [{"name": "read", "arguments": {"path": f"v{n}.py"}}]} for n in range(40)
    ]
    veil = make_veil(
        [*replies, "done"],
        plugins=_layer_plugins(),
        settings={
            "compaction": {"observationMaskingTurns": 0, "threshold": 1.0},
            "context": {"protectedTurns": 2},
            "loop": {"completionReserve": 0},
        },
        context_window=7000,
    )
    session = veil.new_session()

    result = veil.run_turn(session, "read the views", max_iterations=60)
    assert result.status == "done"
    calls = veil.model.calls
    events = veil.store.events(session.id, ("evict",))
    assert len(events) >= 3
    pass_steps = sorted({e["step"] for e in events})
    for t in range(1, len(calls)):
        step = t + 1  # the loop's step of call t (steps count from 1)
        extends = calls[t][: len(_body(calls[t - 1]))] == _body(calls[t - 1])
        if step in pass_steps:
            # the pass rewrote the prompt; the refreshed counts are the last message
            assert _is_note(calls[t][-1]) and "warm" in calls[t][-1]["content"]
        else:
            assert extends, f"call {t} (step {step}) rewrote its prefix without a pass"
    gaps = [b - a for a, b in zip(pass_steps, pass_steps[1:], strict=False)]
    assert min(gaps) >= 2  # the low-water mark leaves room for several steps between passes


def test_the_date_is_the_sessions_start_date_and_a_resumed_session_keeps_it(make_veil):
    veil = make_veil(["first", "second"])
    session = veil.new_session()
    started = dt.datetime(2024, 2, 29, 23, 59, tzinfo=dt.timezone.utc).timestamp()
    with veil.store.transaction() as conn:
        conn.execute("UPDATE sessions SET created_at = ? WHERE id = ?", (started, session.id))
    session = veil.load_session(session.id)
    veil.run_turn(session, "hello")
    system = veil.model.calls[0][0]["content"]
    assert "Today is 2024-02-29." in system
    resumed = veil.load_session(session.id)
    veil.run_turn(resumed, "again")
    assert veil.model.calls[1][0]["content"] == system


def test_the_context_notes_convert_for_anthropic(make_veil, project):
    """litellm's Anthropic conversion merges each note into the user turn it follows: the
    anchored manifest note into the task's turn, the trailing warning note into the turn that
    carries the tool results (tool_result blocks first, as Anthropic requires), so roles
    still alternate. Nothing of the notes reaches the stored history."""
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

    veil = make_veil([_bash(FAILING)] * 3 + ["done"], plugins=_layer_plugins())
    session = veil.new_session()
    veil.run_turn(session, "make it import")
    sent = veil.model.calls[-1]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "user", *["assistant", "tool"] * 3, "user"]
    assert _is_note(sent[2]) and _is_note(sent[-1])
    assert "Convergence warning" in sent[-1]["content"]
    converted = anthropic_messages_pt(sent[1:], model="claude-sonnet-4-5", llm_provider="anthropic")
    assert [m["role"] for m in converted] == ["user", *["assistant", "user"] * 3]
    first = converted[0]["content"]
    assert [b["type"] for b in first] == ["text", "text"]
    assert first[1]["text"].startswith(NOTE_PREFIX)
    blocks = converted[-1]["content"]
    assert blocks[0]["type"] == "tool_result"
    assert blocks[-1]["type"] == "text" and blocks[-1]["text"].startswith(NOTE_PREFIX)
    assert all(NOTE_PREFIX not in (m.get("content") or "") for m in session.messages)


# --- the provider's window: tool schemas and the completion count --------------------------


class _Recorder(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/chat/completions`` that records each request body and
    answers from the server's script (a tool call or a final answer)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        server.requests.append(body)  # type: ignore[attr-defined]
        reply = server.script.pop(0)  # type: ignore[attr-defined]
        message: dict = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
        finish = "stop"
        if isinstance(reply, dict):
            n = len(server.requests)  # type: ignore[attr-defined]
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": reply["name"], "arguments": json.dumps(reply["args"])},
                }
            ]
            finish = "tool_calls"
        answer = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def openai_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.requests = []  # type: ignore[attr-defined]
    server.script = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class _BigSchemas:
    """Registers tools whose schemas cost a few thousand tokens (a host with many tools)."""

    from veil.hookspecs import hookimpl

    @hookimpl
    def register_tools(self, veil):
        from veil.core.types import Tool

        params = {
            "type": "object",
            "properties": {
                f"option_{k}": {
                    "type": "string",
                    "description": f"Option {k} of the deployment: " + "the region name " * 12,
                }
                for k in range(12)
            },
        }
        return [
            Tool(f"deploy_{n}", "Deploy a service to a region. " * 10, params, lambda c, a: "ok")
            for n in range(4)
        ]


def test_the_request_fits_the_window_with_tool_schemas_and_max_tokens(
    project: Path, openai_server, monkeypatch
):
    """An 8,192-token window, ~4,000 tokens of tool schemas and max_tokens 1,024: every request
    the provider receives, counted with the model's own tokenizer (gpt-4o: exact, through
    litellm), fits the window. Before issue 18 the schemas were not counted and requests ran
    ~4,000 tokens over."""
    from veil.core.app import open_veil
    from veil.core.models.tokens import count_message_tokens
    from veil.core.settings import load_config

    port = openai_server.server_address[1]
    (project / ".veil").mkdir()
    auth = {"providers": {"local": {"type": "openai", "base_url": f"http://127.0.0.1:{port}/v1"}}}
    (project / ".veil" / "auth.json").write_text(json.dumps(auth))
    monkeypatch.setenv(
        "VEIL_ALLOW_PROJECT_PROVIDERS", "1"
    )  # a provider of the project file: the user allows it (issue 17)
    settings = {
        "models": {
            "main": {"model": "gpt-4o", "contextWindow": 8192, "options": {"max_tokens": 1024}}
        }
    }
    (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    for n in range(6):
        lines = [
            f"def handler_{n}_{k}(request): return render(request, 'p{k}.html')" for k in range(30)
        ]
        (project / f"views_{n}.py").write_text("\n".join(lines) + "\n")
    openai_server.script = [
        {"name": "read", "args": {"path": f"views_{n % 6}.py"}} for n in range(14)
    ]
    openai_server.script.append("done")
    plugins = [*_layer_plugins(), ("big_schemas", _BigSchemas())]
    veil = open_veil(
        project, config=load_config(project), use_entry_points=False, extra_plugins=tuple(plugins)
    )
    try:
        session = veil.new_session()
        result = veil.run_turn(session, "read the views", stream=False, max_iterations=20)
        assert result.status == "done"
    finally:
        veil.close()
    requests = openai_server.requests
    assert len(requests) == 15
    schemas = count_message_tokens([], "gpt-4o", tools=requests[0]["tools"]) - count_message_tokens(
        [], "gpt-4o"
    )
    assert 3000 < schemas < 6000
    # (a request without tools would be a compaction's summary call: none is expected here)
    sizes = [
        count_message_tokens(r["messages"], "gpt-4o", tools=r.get("tools")) + r["max_tokens"]
        for r in requests
    ]
    assert max(sizes) <= 8192, sizes
    assert veil.store.eviction_count(session.id) > 0  # the reads did fill the window
