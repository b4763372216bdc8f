"""The real pi coding agent (``pi -p``, pinned) in front of ``veil proxy``: a provider in pi's
``models.json`` with ``"api": "openai-completions"`` and the proxy's base URL, an upstream that
speaks OpenAI chat completions (streamed, as pi asks). pi reads six files and writes a seventh;
its history outgrows the 8,000-token window, every request the upstream received pairs its tool
calls and fits the window, and ``veil replay`` reads the session file pi wrote with the prompt
tokens the proxy measured."""

from __future__ import annotations

import json
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
from veil.testing.provider_checks import ROOM_OVER_WINDOW, UNPAIRED_CALL
from veil.testing.scripted_server import ScriptedOpenAIServer

WINDOW = 8_000
MODEL = "gpt-4o-mini"
FILES = 6

README = Path(__file__).parents[1] / "README.md"
"""The proxy's README, whose set-up for this agent the test runs."""
PROXY_PORT_URL = "http://127.0.0.1:5052"
"""The proxy's default address, as the README writes it."""


pytestmark = pytest.mark.timeout(1200)
"""The first test of the module installs the agent (hundreds of MB from npm on a cold cache)
and runs its whole session in its setup."""


def models_json(proxy_url: str) -> dict:
    """pi's ``~/.pi/agent/models.json`` for the proxy: README's "pi" lines. The window pi is
    told is large: veil fits the prompt, and pi's own compaction stays out of the way."""
    return {
        "providers": {
            "veil": {
                "baseUrl": f"{proxy_url}/v1",
                "api": "openai-completions",
                "apiKey": "unused",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": MODEL, "contextWindow": 1_000_000, "maxTokens": 4_000}],
            }
        }
    }


def module_text(n: int) -> str:
    """A source file of about 1,550 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(40)
    )


@dataclass
class Session:
    """What one pi run left: its output, the project, its home, the upstream."""

    done: Any
    log: str
    project: Path
    home: Path
    upstream: ScriptedOpenAIServer
    steps: int


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    pi = install_agent("pi")
    root = tmp_path_factory.mktemp("pi")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    for n in range(1, FILES + 1):
        (project / "src" / f"mod_{n}.py").write_text(module_text(n), encoding="utf-8")
    steps: list[dict | str] = [
        {"tool_calls": [{"name": "read", "arguments": {"path": f"src/mod_{n}.py"}}]}
        for n in range(1, FILES + 1)
    ]
    notes = {"path": "NOTES.md", "content": "six modules of parsers\n"}
    steps.append(
        {"content": "Writing the notes.", "tool_calls": [{"name": "write", "arguments": notes}]}
    )
    steps.append("NOTES.md lists the six modules.")
    home = root / "home"
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    with ScriptedOpenAIServer(by_step(steps), context_window=WINDOW, count_completion=True) as up:
        write_settings(project, up, MODEL, WINDOW, "openai")
        with ProxyProcess(project, root / "veil-home", MODEL) as proxy:
            (agent_dir / "models.json").write_text(json.dumps(models_json(proxy.url)))
            done = pi.run(
                [
                    "--provider",
                    "veil",
                    "--model",
                    MODEL,
                    "-p",
                    "Read every file under src/ and write NOTES.md about them.",
                ],
                cwd=project,
                env={"HOME": str(home)},
            )
        log = proxy.output()
    return Session(done, log, project, home, up, len(steps))


def test_pi_through_veil_proxy(session: Session) -> None:
    done = session.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + session.log[-3000:]
    assert (session.project / "NOTES.md").read_text() == "six modules of parsers\n"
    assert "NOTES.md lists the six modules." in done.stdout
    sent = [r for r in session.upstream.requests if r.api == "chat"]
    assert len(sent) == session.steps
    # calls paired; prompt + max_completion_tokens inside the window
    assert session.upstream.problems() == []
    assert all(r.body["stream"] is True for r in sent)
    (figures,) = proxy_requests(session.project).values()
    assert figures[-1]["client_tokens"] > WINDOW
    assert max(f["sent_tokens"] for f in figures) <= WINDOW


def test_veil_replay_reads_the_pi_session(session: Session) -> None:
    assert session.done.returncode == 0
    (log,) = (session.home / ".pi" / "agent" / "sessions").glob("*/*.jsonl")
    replayed = replay_per_step(log, session.project.parent)
    (figures,) = proxy_requests(session.project).values()
    assert replay_disagreements(replayed, figures) == []


def test_the_checks_refuse_a_broken_pi_request(session: Session) -> None:
    # the validator that passed every request above fails on the last one broken each way
    # a provider refuses: it reads pi's own request shape
    assert session.done.returncode == 0
    last = [r for r in session.upstream.requests if r.api == "chat"][-1]
    assert (
        uncaught_breakages(session.upstream, last, WINDOW, [UNPAIRED_CALL, ROOM_OVER_WINDOW]) == []
    )


def test_the_readme_shows_the_pi_models_json_this_test_runs() -> None:
    shown = json.loads(fenced_block(README, "**pi**", "json"))
    assert shown == models_json(PROXY_PORT_URL)
    assert f"pi --provider veil --model {MODEL}" in README.read_text(encoding="utf-8")
