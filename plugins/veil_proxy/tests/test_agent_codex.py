"""The real Codex CLI (``codex exec``, pinned) in front of ``veil proxy``: it speaks only OpenAI's
Responses API, streamed, so the proxy serves ``POST /v1/responses`` and forwards it to an
upstream that speaks Responses (the scripted server on 127.0.0.1). Codex reads eight files and
writes a ninth; its history outgrows the 16,000-token window, every request the upstream
received is one OpenAI would accept and fits the window, and ``veil replay`` reads the rollout
Codex wrote with the prompt tokens the proxy measured."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from veil.testing.agents import (
    ProxyProcess,
    by_step,
    fenced_block,
    install_agent,
    proxy_requests,
    replay_disagreements,
    replay_per_step,
    uncaught_breakages,
    write_settings,
)
from veil.testing.provider_checks import BARE_REASONING, ROOM_OVER_WINDOW, UNPAIRED_CALL
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
"""Codex's ``~/.codex/config.toml`` for the proxy: the lines the proxy's README shows."""

README = Path(__file__).parents[1] / "README.md"
"""The proxy's README, whose set-up for this agent the test runs."""
PROXY_PORT_URL = "http://127.0.0.1:5052"
"""The proxy's default address, as the README writes it."""


pytestmark = pytest.mark.timeout(1200)
"""The first test of the module installs the agent (hundreds of MB from npm on a cold cache)
and runs its whole session in its setup."""


def module_text(n: int) -> str:
    """A source file of about 2,300 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(60)
    )


@dataclass
class Session:
    """What one Codex run left: its output, the project, Codex's home, the upstream."""

    done: Any
    log: str
    project: Path
    home: Path
    upstream: ScriptedOpenAIServer
    steps: int


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    codex = install_agent("codex")
    root = tmp_path_factory.mktemp("codex")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    for n in range(1, FILES + 1):
        (project / "src" / f"mod_{n}.py").write_text(module_text(n), encoding="utf-8")
    steps: list[dict | str] = [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": f"cat src/mod_{n}.py"}}]}
        for n in range(1, FILES + 1)
    ]
    notes = "printf 'eight modules of parsers\\n' > NOTES.md"
    steps.append(
        {
            "content": "Writing the notes.",
            "tool_calls": [{"name": "exec_command", "arguments": {"cmd": notes}}],
        }
    )
    steps.append("NOTES.md lists the eight modules.")
    home = root / "home"
    (home / ".codex").mkdir(parents=True)
    # the completion room a request asks counts inside the window, as OpenAI counts it
    server = ScriptedOpenAIServer(by_step(steps), context_window=WINDOW, count_completion=True)
    with server as upstream:
        write_settings(project, upstream, MODEL, WINDOW, "openai")
        with ProxyProcess(project, root / "veil-home", MODEL) as proxy:
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
                env={
                    "HOME": str(home),
                    "CODEX_HOME": str(home / ".codex"),
                    "VEIL_PROXY_KEY": "unused",
                },
            )
        log = proxy.output()
    return Session(done, log, project, home, upstream, len(steps))


def test_codex_exec_through_veil_proxy(session: Session) -> None:
    done = session.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + session.log[-3000:]
    assert (session.project / "NOTES.md").read_text() == "eight modules of parsers\n"
    assert "NOTES.md lists the eight modules." in done.stdout
    sent = [r for r in session.upstream.requests if r.api == "responses"]
    assert len(sent) == session.steps  # one upstream request per model turn, none refused
    assert session.upstream.problems() == []
    assert all(r.prompt_tokens <= WINDOW for r in sent)
    assert all(r.body["stream"] is True for r in sent)
    # the reasoning items went back as issued (checked by problems()), and the call ids too
    last = sent[-1].body["input"]
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    assert calls == [f"call_veil_{n}" for n in range(session.steps - 1)]
    # the session outgrew the window: the client's history passed it while each prompt stayed in
    (figures,) = proxy_requests(session.project).values()
    assert figures[-1]["client_tokens"] > WINDOW
    assert max(f["sent_tokens"] for f in figures) <= WINDOW


def test_veil_replay_reads_the_codex_rollout(session: Session) -> None:
    assert session.done.returncode == 0
    (rollout,) = (session.home / ".codex" / "sessions").rglob("rollout-*.jsonl")
    replayed = replay_per_step(rollout, session.project.parent)
    (figures,) = proxy_requests(session.project).values()
    assert replay_disagreements(replayed, figures) == []


def test_the_checks_refuse_a_broken_codex_request(session: Session) -> None:
    # the validator that passed every request above fails on the last one broken each way
    # a provider refuses: it reads Codex's own request shape
    assert session.done.returncode == 0
    last = [r for r in session.upstream.requests if r.api == "responses"][-1]
    assert (
        uncaught_breakages(
            session.upstream, last, WINDOW, [UNPAIRED_CALL, BARE_REASONING, ROOM_OVER_WINDOW]
        )
        == []
    )


def test_the_readme_shows_the_codex_config_this_test_runs() -> None:
    shown = fenced_block(README, "**Codex**", "toml")
    assert shown == CONFIG.format(model=MODEL, url=PROXY_PORT_URL)
    assert "VEIL_PROXY_KEY=unused codex exec" in README.read_text(encoding="utf-8")
