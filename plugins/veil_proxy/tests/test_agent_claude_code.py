"""The real Claude Code (``claude -p``, pinned) in front of ``veil proxy``, with an upstream that
speaks Anthropic's Messages API (the scripted server on 127.0.0.1, a provider of type
``anthropic``): Claude Code's requests reach it in their own form, thinking blocks and
``cache_control`` markers included, with only the conversation fitted by veil.

Claude Code asks ``max_tokens`` 128,000, and its first request takes about 10,000 tokens before
the task (its prompt, 11 tool schemas and the environment it sends as a system turn, as the
scripted server counts them): at a 40,000-token window the
proxy lowers ``max_tokens`` to what fits; at 8,000 nothing fits and Claude Code gets Anthropic's
error shape naming the window and what took it. ``veil replay`` reads the transcript Claude Code
wrote with the prompt tokens the proxy measured."""

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
from veil.testing.provider_checks import (
    ROOM_OVER_WINDOW,
    UNPAIRED_CALL,
    UNSIGNED_THINKING,
    cache_breakpoints,
)
from veil.testing.scripted_server import ScriptedOpenAIServer

MODEL = "claude-opus-5-5"
"""The model Claude Code 2.1.332 names by default; the proxy sends it on as it is."""

FILES = 8

README = Path(__file__).parents[1] / "README.md"
"""The proxy's README, whose set-up for this agent the test runs."""
PROXY_PORT_URL = "http://127.0.0.1:5052"
"""The proxy's default address, as the README writes it."""


pytestmark = pytest.mark.timeout(1200)
"""The first test of the module installs the agent (hundreds of MB from npm on a cold cache)
and runs its whole session in its setup."""


def module_text(n: int) -> str:
    """A source file of about 3,500 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(90)
    )


def claude_env(home: Path, proxy_url: str) -> dict[str, str]:
    """What puts Claude Code in front of the proxy (README's "Claude Code" lines), with a home
    of its own and no traffic but the model's."""
    return {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": proxy_url,
        "ANTHROPIC_AUTH_TOKEN": "unused",
        "ANTHROPIC_API_KEY": "",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


@dataclass
class Session:
    """What one Claude Code run left: its output, the project, its home, the upstream."""

    done: Any
    log: str
    project: Path
    home: Path
    upstream: ScriptedOpenAIServer
    steps: int


WINDOW = 40_000


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    claude = install_agent("claude-code")
    root = tmp_path_factory.mktemp("claude")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    for n in range(1, FILES + 1):
        (project / "src" / f"mod_{n}.py").write_text(module_text(n), encoding="utf-8")
    steps: list[dict | str] = [
        {
            "tool_calls": [
                {"name": "Read", "arguments": {"file_path": str(project / f"src/mod_{n}.py")}}
            ]
        }
        for n in range(1, FILES + 1)
    ]
    notes = {"file_path": str(project / "NOTES.md"), "content": "eight modules of parsers\n"}
    steps.append(
        {"content": "Writing the notes.", "tool_calls": [{"name": "Write", "arguments": notes}]}
    )
    steps.append("NOTES.md lists the eight modules.")
    script = by_step(steps, prefix="toolu_veil_")
    home = root / "home"
    with ScriptedOpenAIServer(script, context_window=WINDOW) as upstream:
        write_settings(project, upstream, MODEL, WINDOW, "anthropic")
        with ProxyProcess(project, root / "veil-home", MODEL) as proxy:
            done = claude.run(
                [
                    "-p",
                    "Read every file under src/ and write NOTES.md about them.",
                    "--allowedTools",
                    "Read,Write",
                ],
                cwd=project,
                env=claude_env(home, proxy.url),
            )
        log = proxy.output()
    return Session(done, log, project, home, upstream, len(steps))


def test_claude_code_through_veil_proxy(session: Session) -> None:
    done, log = session.done, session.log
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    assert (session.project / "NOTES.md").read_text() == "eight modules of parsers\n"
    assert "NOTES.md lists the eight modules." in done.stdout
    sent = [r for r in session.upstream.requests if r.api == "anthropic"]
    assert len(sent) == session.steps
    assert session.upstream.problems() == []
    # max_tokens lowered to what fits: prompt + max_tokens inside the window, said in the log
    assert all(r.prompt_tokens + r.body["max_tokens"] <= WINDOW for r in sent)
    assert all(r.body["max_tokens"] < 128_000 for r in sent)
    assert "max_tokens lowered from 128000 to" in log
    # thinking on (adaptive): every assistant turn went back with its signed thinking block
    last = sent[-1].body
    assert last["thinking"]["type"] == "adaptive"
    turns = [m for m in last["messages"] if m["role"] == "assistant"]
    assert len(turns) == session.steps - 1
    assert all(t["content"][0]["type"] == "thinking" for t in turns)
    # the client's cache breakpoints reached the upstream, and its betas
    assert all(cache_breakpoints(r.body) >= 2 for r in sent)
    assert all("per-turn-control" in r.headers.get("anthropic-beta", "") for r in sent)
    # the session outgrew what the window leaves the conversation; each prompt stayed inside
    (figures,) = proxy_requests(session.project).values()
    assert figures[-1]["client_tokens"] > WINDOW - max(f["max_tokens_sent"] for f in figures)
    assert max(f["sent_tokens"] for f in figures) <= WINDOW


def test_veil_replay_reads_the_claude_code_transcript(session: Session) -> None:
    assert session.done.returncode == 0
    (transcript,) = (session.home / ".claude" / "projects").glob("*/*.jsonl")
    replayed = replay_per_step(transcript, session.project.parent)
    (figures,) = proxy_requests(session.project).values()
    assert replay_disagreements(replayed, figures) == []


def test_claude_code_hears_when_the_window_cannot_hold_its_prompt(tmp_path: Path) -> None:
    claude = install_agent("claude-code")
    window = 8_000
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedOpenAIServer(["never sent"], context_window=window) as upstream:
        write_settings(project, upstream, MODEL, window, "anthropic")
        with ProxyProcess(project, tmp_path / "veil-home", MODEL) as proxy:
            done = claude.run(
                ["-p", "Say hello.", "--allowedTools", "Read"],
                cwd=project,
                env=claude_env(tmp_path / "home", proxy.url),
                timeout=120,
            )
    assert upstream.requests == []  # nothing forwarded to be refused
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert "the context window of 8,000 tokens cannot hold this request" in text
    assert "tool schemas" in text and "before any message" in text


def test_the_checks_refuse_a_broken_claude_code_request(session: Session) -> None:
    # the validator that passed every request above fails on the last one broken each way
    # a provider refuses: it reads Claude Code's own request shape
    assert session.done.returncode == 0
    last = [r for r in session.upstream.requests if r.api == "anthropic"][-1]
    assert (
        uncaught_breakages(
            session.upstream, last, WINDOW, [UNPAIRED_CALL, UNSIGNED_THINKING, ROOM_OVER_WINDOW]
        )
        == []
    )


def test_the_readme_shows_the_claude_code_lines_this_test_runs() -> None:
    env = claude_env(Path("home"), PROXY_PORT_URL)
    shown = fenced_block(README, "**Claude Code**", "sh").split()
    variables = [f"{k}={env[k]}" for k in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")]
    assert shown == [*variables, "claude"]
