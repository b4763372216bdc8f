"""The real mini-swe-agent (``mini -y``, pinned) in front of ``veil proxy``: its litellm model
pointed at the proxy (``model.model_kwargs.api_base``), an upstream that speaks OpenAI chat
completions. The agent reads six files with its bash tool, writes a seventh and submits; its
history outgrows the 8,000-token window, and every request the upstream received pairs its tool
calls and fits the window."""

from __future__ import annotations

import json
from pathlib import Path

from veil.testing.agents import (
    ProxyProcess,
    by_step,
    install_agent,
    proxy_requests,
    write_settings,
)
from veil.testing.scripted_server import ScriptedOpenAIServer

WINDOW = 8_000
MODEL = "gpt-4o-mini"
FILES = 6


def module_text(n: int) -> str:
    """A source file of about 1,550 cl100k_base tokens, distinct per ``n``."""
    return "\n".join(
        f"def parse_section_{n}_{k}(stream, limit={k}):\n"
        f"    return [line.strip() for line in stream.readlines()[:limit] if 'key_{n}_{k}' in line]\n"
        for k in range(40)
    )


def mini_args(proxy_url: str, task: str, output: Path) -> list[str]:
    """``mini``'s command line for the proxy: README's "mini-swe-agent" lines."""
    return [
        "-y",
        "--exit-immediately",
        "--model",
        f"openai/{MODEL}",
        "-c",
        "mini.yaml",
        "-c",
        f"model.model_kwargs.api_base={proxy_url}/v1",
        "-c",
        "model.model_kwargs.api_key=unused",
        "--cost-limit",
        "0",
        "--task",
        task,
        "--output",
        str(output),
    ]


def test_mini_swe_agent_through_veil_proxy(tmp_path: Path) -> None:
    mini = install_agent("mini-swe-agent")
    project = tmp_path / "project"
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
    notes = "printf 'six modules of parsers\\n' > NOTES.md"
    steps.append(
        {
            "content": "Writing the notes.",
            "tool_calls": [{"name": "bash", "arguments": {"command": notes}}],
        }
    )
    steps.append(
        {
            "content": "Done.",
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
                }
            ],
        }
    )
    trajectory = tmp_path / "run.traj.json"
    with ScriptedOpenAIServer(by_step(steps), context_window=WINDOW) as up:
        write_settings(project, up, MODEL, WINDOW, "openai")
        with ProxyProcess(project, tmp_path / "veil-home", MODEL) as proxy:
            done = mini.run(
                mini_args(proxy.url, "Read every file under src/ and write NOTES.md.", trajectory),
                cwd=project,
                env={
                    "HOME": str(tmp_path / "home"),
                    "MSWEA_CONFIGURED": "true",
                    "MSWEA_COST_TRACKING": "ignore_errors",
                },
            )
        log = proxy.output()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    assert (project / "NOTES.md").read_text() == "six modules of parsers\n"
    recorded = json.loads(trajectory.read_text())
    assert recorded["info"]["exit_status"] == "Submitted"
    sent = [r for r in up.requests if r.api == "chat"]
    assert len(sent) == len(steps)
    assert up.problems() == []
    assert all(r.prompt_tokens <= WINDOW for r in sent)
    (figures,) = proxy_requests(project).values()
    assert figures[-1]["client_tokens"] > WINDOW
    assert max(f["sent_tokens"] for f in figures) <= WINDOW
