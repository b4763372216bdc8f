"""The real Codex CLI (``codex exec``, pinned) in front of ``veil proxy``: it speaks only OpenAI's
Responses API, streamed, so the proxy serves ``POST /v1/responses`` and forwards it to an
upstream that speaks Responses (the scripted server on 127.0.0.1). Codex reads five files and
writes a sixth; its history outgrows the 16,000-token window, and every request the upstream
received is one OpenAI would accept and fits the window."""

from __future__ import annotations

from pathlib import Path

from veil.testing.agents import (
    ProxyProcess,
    by_step,
    install_agent,
    proxy_requests,
    write_settings,
)
from veil.testing.scripted_server import ScriptedOpenAIServer

WINDOW = 16_000
MODEL = "gpt-5-codex"
FILES = 8

CONFIG = """model = "{model}"
model_provider = "veil"

[model_providers.veil]
name = "veil proxy"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "VEIL_PROXY_KEY"
"""
"""Codex's ``~/.codex/config.toml`` for the proxy: the lines README's "Codex" section shows."""


def module_text(n: int) -> str:
    """A source file of about 1,900 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(60)
    )


def test_codex_exec_through_veil_proxy(tmp_path: Path) -> None:
    codex = install_agent("codex")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    for n in range(1, FILES + 1):
        (project / "src" / f"mod_{n}.py").write_text(module_text(n), encoding="utf-8")
    steps: list[dict | str] = [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": f"cat src/mod_{n}.py"}}]}
        for n in range(1, FILES + 1)
    ]
    steps.append(
        {
            "content": "Writing the notes.",
            "tool_calls": [
                {
                    "name": "exec_command",
                    "arguments": {"cmd": "printf 'eight modules of parsers\\n' > NOTES.md"},
                }
            ],
        }
    )
    steps.append("NOTES.md lists the eight modules.")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    with ScriptedOpenAIServer(by_step(steps), context_window=WINDOW) as upstream:
        write_settings(project, upstream, MODEL, WINDOW, "openai")
        with ProxyProcess(project, tmp_path / "veil-home", MODEL) as proxy:
            (home / ".codex" / "config.toml").write_text(
                CONFIG.format(model=MODEL, url=proxy.url), encoding="utf-8"
            )
            done = codex.run(
                [
                    "exec",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "Read every file under src/ and write NOTES.md about them.",
                ],
                cwd=project,
                env={"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "VEIL_PROXY_KEY": "x"},
            )
        log = proxy.output()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    assert (project / "NOTES.md").read_text() == "eight modules of parsers\n"
    assert "NOTES.md lists the eight modules." in done.stdout
    sent = [r for r in upstream.requests if r.api == "responses"]
    assert len(sent) == len(steps)  # one upstream request per model turn, none refused
    assert upstream.problems() == []
    assert all(r.prompt_tokens <= WINDOW for r in sent)
    assert all(r.body["stream"] is True for r in sent)
    # the reasoning items went back as issued (checked by problems()), and the call ids too
    last = sent[-1].body["input"]
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    assert calls == [f"call_veil_{n}" for n in range(len(steps) - 1)]
    # the session outgrew the window: the client's history passed it while each prompt stayed in
    (figures,) = proxy_requests(project).values()
    assert figures[-1]["client_tokens"] > WINDOW, [
        (f["client_tokens"], f["sent_tokens"]) for f in figures
    ]
    assert max(f["sent_tokens"] for f in figures) <= WINDOW
