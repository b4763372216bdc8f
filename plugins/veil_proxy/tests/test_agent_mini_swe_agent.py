"""The real mini-swe-agent (``mini -y``, pinned) in front of ``veil proxy``: its litellm model
pointed at the proxy (``model.model_kwargs.api_base``), an upstream that speaks OpenAI chat
completions. The agent reads six files with its bash tool, writes a seventh and submits; its
history outgrows the 8,000-token window, every request the upstream received pairs its tool calls
and fits the window, and ``veil replay`` reads the trajectory it wrote with the prompt tokens the
proxy measured."""

from __future__ import annotations

import json
import shlex
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


def module_text(n: int) -> str:
    """A source file of about 1,550 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(40)
    )


SETUP_ARGS = 8
"""How many of :func:`mini_args` put mini in front of the proxy (README's line); the rest run it
unattended on the test's task."""


def mini_args(proxy_url: str, task: str, output: Path) -> list[str]:
    """``mini``'s command line for the proxy: README's "mini-swe-agent" line (the first
    :data:`SETUP_ARGS`), then what runs it unattended."""
    return [
        "--model",
        f"openai/{MODEL}",
        "-c",
        "mini.yaml",
        "-c",
        f"model.model_kwargs.api_base={proxy_url}/v1",
        "-c",
        "model.model_kwargs.api_key=unused",
        "-y",
        "--exit-immediately",
        "--cost-limit",
        "0",
        "--task",
        task,
        "--output",
        str(output),
    ]


@dataclass
class Session:
    """What one mini-swe-agent run left: its output, the project, its trajectory, the upstream."""

    done: Any
    log: str
    project: Path
    trajectory: Path
    upstream: ScriptedOpenAIServer
    steps: int


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    mini = install_agent("mini-swe-agent")
    root = tmp_path_factory.mktemp("mini")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    for n in range(1, FILES + 1):
        (project / "src" / f"mod_{n}.py").write_text(module_text(n), encoding="utf-8")
    steps: list[dict | str] = [
        {
            "content": f"Reading module {n}.",
            "tool_calls": [{"name": "bash", "arguments": {"command": f"cat src/mod_{n}.py"}}],
        }
        for n in range(1, FILES + 1)
    ]
    notes = {"command": "printf 'six modules of parsers\\n' > NOTES.md"}
    steps.append(
        {"content": "Writing the notes.", "tool_calls": [{"name": "bash", "arguments": notes}]}
    )
    submit = {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
    steps.append({"content": "Done.", "tool_calls": [{"name": "bash", "arguments": submit}]})
    trajectory = root / "run.traj.json"
    with ScriptedOpenAIServer(by_step(steps), context_window=WINDOW, count_completion=True) as up:
        write_settings(project, up, MODEL, WINDOW, "openai")
        with ProxyProcess(project, root / "veil-home", MODEL) as proxy:
            done = mini.run(
                mini_args(proxy.url, "Read every file under src/ and write NOTES.md.", trajectory),
                cwd=project,
                env={
                    "HOME": str(root / "home"),
                    "MSWEA_CONFIGURED": "true",
                    "MSWEA_COST_TRACKING": "ignore_errors",
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                },
            )
        log = proxy.output()
    return Session(done, log, project, trajectory, up, len(steps))


def test_mini_swe_agent_through_veil_proxy(session: Session) -> None:
    done = session.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + session.log[-3000:]
    assert (session.project / "NOTES.md").read_text() == "six modules of parsers\n"
    recorded = json.loads(session.trajectory.read_text())
    assert recorded["info"]["exit_status"] == "Submitted"
    sent = [r for r in session.upstream.requests if r.api == "chat"]
    assert len(sent) == session.steps
    assert session.upstream.problems() == []
    assert all(r.prompt_tokens <= WINDOW for r in sent)
    (figures,) = proxy_requests(session.project).values()
    assert figures[-1]["client_tokens"] > WINDOW
    assert max(f["sent_tokens"] for f in figures) <= WINDOW


def test_veil_replay_reads_the_mini_swe_agent_trajectory(session: Session) -> None:
    assert session.done.returncode == 0
    replayed = replay_per_step(session.trajectory, session.project.parent)
    (figures,) = proxy_requests(session.project).values()
    assert replay_disagreements(replayed, figures) == []


def test_the_checks_refuse_a_broken_mini_swe_agent_request(session: Session) -> None:
    # the validator that passed every request above fails on the last one broken each way
    # a provider refuses: it reads mini-swe-agent's own request shape
    assert session.done.returncode == 0
    last = [r for r in session.upstream.requests if r.api == "chat"][-1]
    assert (
        uncaught_breakages(session.upstream, last, WINDOW, [UNPAIRED_CALL, ROOM_OVER_WINDOW]) == []
    )


def test_the_readme_shows_the_mini_line_this_test_runs() -> None:
    block = fenced_block(README, "**mini-swe-agent**", "sh")
    shown = shlex.split(block.replace("\\\n", " "))  # a shell's line continuation
    assert shown == ["mini", *mini_args(PROXY_PORT_URL, "task", Path("out"))[:SETUP_ARGS]]
