"""``veil -p`` in a real subprocess against a scripted OpenAI-compatible server on 127.0.0.1
whose model asks for ``bash``: refused by default without a terminal, run with ``--yes`` or a
rule in the user's settings, and a project's own allow rule refused (issue 21)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

TOUCH = {
    "tool_calls": [{"id": "call_touch", "name": "bash", "arguments": {"command": "touch made.txt"}}]
}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    return {
        **env,
        "VEIL_HOME": str(home),
        "VEIL_ALLOW_PROJECT_PROVIDERS": "1",  # configure_project's provider is the project's
        "VEIL_CONTEXT__RESCUE_EMBEDDINGS": "off",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }


def _veil(project: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=_env(home, **env),
        stdin=subprocess.DEVNULL,  # no terminal: nobody to ask
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def _tool_result(request) -> dict:
    """The tool message answering ``call_touch`` in a recorded request."""
    return next(m for m in request.body["messages"] if m.get("tool_call_id") == "call_touch")


def _settings(project: Path, extra: dict) -> None:
    path = project / ".veil" / "settings.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, **extra}))


def test_bash_is_refused_without_a_terminal_and_the_model_gets_the_denied_result(project, home):
    with ScriptedOpenAIServer([TOUCH, "I could not create it."]) as server:
        configure_project(project, server)
        proc = _veil(project, home, "-p", "create made.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "I could not create it."
    assert not (project / "made.txt").exists()
    assert "Permission denied: this bash call was not run." in proc.stderr
    assert "Traceback" not in proc.stderr
    messages = server.requests[1].body["messages"]
    call_at = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    assert messages[call_at]["tool_calls"][0]["id"] == "call_touch"
    result = messages[call_at + 1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_touch"
    assert result["content"].startswith("Permission denied: this bash call was not run.")
    assert f'"bash(touch:*)" to permissions.allow in {home}/settings.json' in result["content"]


def test_yes_flag_allows_the_call(project, home):
    with ScriptedOpenAIServer([TOUCH, "Created."]) as server:
        configure_project(project, server)
        proc = _veil(project, home, "--yes", "-p", "create made.txt", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["final"] == "Created."
    assert (project / "made.txt").exists()
    assert "[exit code: 0]" in _tool_result(server.requests[1])["content"]


def test_environment_variable_allows_the_call(project, home):
    with ScriptedOpenAIServer([TOUCH, "Created."]) as server:
        configure_project(project, server)
        proc = _veil(project, home, "-p", "create made.txt", VEIL_PERMISSIONS__MODE="allow")
    assert proc.returncode == 0, proc.stderr
    assert (project / "made.txt").exists()


def test_rule_in_the_users_settings_allows_the_call(project, home):
    (home / "settings.json").write_text(json.dumps({"permissions": {"allow": ["bash(touch*)"]}}))
    with ScriptedOpenAIServer([TOUCH, "Created."]) as server:
        configure_project(project, server)
        proc = _veil(project, home, "-p", "create made.txt")
    assert proc.returncode == 0, proc.stderr
    assert (project / "made.txt").exists()


def test_the_same_rule_in_the_projects_settings_is_refused(project, home):
    with ScriptedOpenAIServer([TOUCH, "Created."]) as server:
        configure_project(project, server)
        _settings(project, {"permissions": {"allow": ["bash(touch*)"]}})
        proc = _veil(project, home, "-p", "create made.txt")
    assert proc.returncode == 1
    assert not (project / "made.txt").exists()
    assert server.requests == []  # refused before any model call
    assert "settings.json: permissions.allow: a project file may not allow tool calls" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_a_project_deny_rule_holds_even_with_yes(project, home):
    with ScriptedOpenAIServer([TOUCH, "Refused."]) as server:
        configure_project(project, server)
        _settings(project, {"permissions": {"deny": ["bash(touch*)"]}})
        proc = _veil(project, home, "--yes", "-p", "create made.txt")
    assert proc.returncode == 0, proc.stderr
    assert not (project / "made.txt").exists()
    content = _tool_result(server.requests[1])["content"]
    assert "matches the deny rule 'bash(touch*)' (permissions.deny)" in content


def _run_on_a_terminal(project: Path, home: Path, answer: str) -> tuple[int, str, str]:
    """``veil -p`` with stdin and stderr on a pseudo-terminal; types ``answer`` at the
    permission prompt. Returns (exit code, stdout, what the terminal showed)."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "-p", "create made.txt"],
        env=_env(home),
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(slave)
    shown = b""
    try:
        while b"[n] no" not in shown:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"no permission prompt within 60 s: {shown!r}"
            shown += os.read(master, 4096)
        os.write(master, answer.encode() + b"\r")
        out, _ = proc.communicate(timeout=120)
        while select.select([master], [], [], 0.2)[0]:
            try:
                shown += os.read(master, 4096)
            except OSError:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, shown.decode("utf-8", "replace")


def test_on_a_terminal_veil_p_asks_and_runs_the_call_when_allowed(project, home):
    with ScriptedOpenAIServer([TOUCH, "Created."]) as server:
        configure_project(project, server)
        code, out, shown = _run_on_a_terminal(project, home, "y")
    assert code == 0, shown
    assert "veil: bash(touch made.txt) (bash asks before it runs (permissions.mode ask))" in shown
    assert "[a] yes, for this session: bash(touch:*)" in shown
    assert out.strip() == "Created."
    assert (project / "made.txt").exists()


def test_on_a_terminal_a_no_is_told_to_the_model(project, home):
    with ScriptedOpenAIServer([TOUCH, "Understood."]) as server:
        configure_project(project, server)
        code, out, shown = _run_on_a_terminal(project, home, "n")
    assert code == 0, shown
    assert not (project / "made.txt").exists()
    assert "The user refused it" in _tool_result(server.requests[1])["content"]
