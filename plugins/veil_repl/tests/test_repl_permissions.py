"""The REPL's permission prompt, driven through prompt-toolkit's pipe input (issue 21)."""

from __future__ import annotations

import io

import pytest
import veil_repl
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from veil_repl import permission
from veil_repl.repl import Repl

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel


@pytest.fixture
def repl_env(tmp_path, monkeypatch, default_permissions):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    project.mkdir()
    config = load_config(project)
    model = ScriptedModel([])
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_repl", veil_repl),),
    )
    yield veil, model, project
    veil.close()


def run_repl(veil, session, keys: str) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200, highlight=False)
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
    return buf.getvalue()


def bash(command: str, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": "bash", "arguments": {"command": command}}]}


def test_allow_once_runs_the_call_and_asks_again_next_time(repl_env):
    veil, model, project = repl_env
    model.add(bash("touch a.txt", "c1"), bash("touch b.txt", "c2"), "made both")
    session = veil.new_session()
    out = run_repl(veil, session, "make files\ry\ry\r/exit\r")
    assert out.count("? allow bash(touch ") == 2
    assert "[y] yes, once   [a] yes, for this session: bash(touch:*)   [n] no" in out
    assert out.count("allowed once") == 2
    assert (project / "a.txt").exists() and (project / "b.txt").exists()
    assert session.permission_grants == []
    assert permission.active is None  # cleared when the REPL leaves


def test_allow_for_the_session_remembers_the_rule(repl_env):
    veil, model, project = repl_env
    model.add(bash("touch a.txt", "c1"), bash("touch b.txt", "c2"), "made both")
    session = veil.new_session()
    out = run_repl(veil, session, "make files\ra\r/exit\r")
    assert out.count("? allow bash(touch ") == 1  # the second call is covered
    assert "allowed for this session: bash(touch:*)" in out
    assert session.permission_grants == ["bash(touch:*)"]
    assert (project / "b.txt").exists()


def test_deny_tells_the_model_and_shows_the_refusal(repl_env):
    veil, model, project = repl_env
    model.add(bash("touch a.txt", "c1"), "ok, I will not")
    session = veil.new_session()
    out = run_repl(veil, session, "make a file\rperhaps\rn\r/exit\r")
    assert "type y (once), a (this session) or n (deny)" in out  # "perhaps" asked again
    assert "denied: the model is told" in out
    assert "⎿ Permission denied: this bash call was not run. The user refused it" in out
    assert not (project / "a.txt").exists()
    tool = session.messages[2]
    assert tool["tool_call_id"] == "c1" and tool["content"].startswith("Permission denied")
    assert "ok, I will not" in out


def test_reads_are_not_asked(repl_env):
    veil, model, project = repl_env
    (project / "a.py").write_text("x = 1\n")
    model.add({"tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}]}, "x is 1")
    out = run_repl(veil, veil.new_session(), "what is x?\r/exit\r")
    assert "? allow" not in out and "x is 1" in out
