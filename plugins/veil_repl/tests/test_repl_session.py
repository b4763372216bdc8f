"""The REPL driven through prompt-toolkit's pipe input: streaming, tool lines, slash commands."""

from __future__ import annotations

import io

import pytest
import veil_repl
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from veil_repl import display
from veil_repl.repl import Repl

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.core.types import RenderEvent
from veil.testing.scripted_model import ScriptedModel


@pytest.fixture
def repl_env(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.py").write_text("print('hi')\n")
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
    """The REPL's output for ``keys``; long lines are not wrapped (soft_wrap), so what a test
    reads does not depend on the width or on the temporary folder's path length."""
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200, highlight=False, soft_wrap=True)
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
    return buf.getvalue()


def test_turn_streams_answer_and_shows_tool_call_with_arguments(repl_env):
    veil, model, project = repl_env
    model.add(
        {"tool_calls": [{"name": "read", "arguments": {"path": "hello.py"}}]}, "It prints hi."
    )
    session = veil.new_session()
    out = run_repl(veil, session, "what does hello.py do?\r/exit\r")
    assert 'read(path="hello.py")' in out
    assert "print('hi')" in out  # the short result line
    assert "It prints hi." in out
    assert session.messages[-1]["content"] == "It prints hi."
    assert (project / ".veil" / "history").exists()


def test_multiline_input_with_escape_enter(repl_env):
    veil, model, _ = repl_env
    model.add("ok")
    session = veil.new_session()
    run_repl(veil, session, "line one\x1b\rline two\r/exit\r")
    assert session.messages[0]["content"] == "line one\nline two"


def test_slash_commands_help_sessions_model_and_unknown(repl_env):
    veil, model, _ = repl_env
    session = veil.new_session()
    out = run_repl(veil, session, "/help\r/model\r/sessions\r/nosuch\r/exit\r")
    assert "/sessions" in out and "/context" in out
    assert "model: scripted (scripted), context window 8192 tokens" in out
    assert session.id in out
    assert "unknown command /nosuch" in out


def test_eviction_dims_the_tool_call_line():
    buf = io.StringIO()
    d = display.Display(Console(file=buf, force_terminal=False, width=200))
    d.show(
        RenderEvent(
            "tool_call", {"name": "read", "arguments": {"path": "a.py"}, "toolCallId": "c1"}
        )
    )
    d.show(
        RenderEvent(
            "eviction",
            {
                "items": [
                    {"id": "item_1", "toolCallId": "c1", "tier": "warm", "reason": "low score"}
                ],
                "report": [],
            },
        )
    )
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith('⏺ read(path="a.py")') and "→ warm (low score)" in lines[-1]
    assert "c1" in d.evicted
    # paged back in by a later pass: no longer dimmed
    d.show(
        RenderEvent(
            "eviction",
            {
                "items": [
                    {"id": "item_1", "toolCallId": "c1", "tier": "live", "reason": "paged in"}
                ],
                "report": [],
            },
        )
    )
    assert buf.getvalue().splitlines()[-1] == '⏺ read(path="a.py") ← paged in'
    assert "c1" not in d.evicted


def test_render_is_silent_when_no_repl_runs(capsys):
    display.active = None
    veil_repl.render(RenderEvent("token", {"text": "zzz"}))
    assert capsys.readouterr().out == ""


def test_a_halt_stops_the_run_and_asks_the_user(repl_env):
    veil, model, _ = repl_env

    class Halter:
        @veil_repl.hookimpl
        def capture(self, session, event):
            if event.phase == "tool_result":
                session.request_halt("the same failure 3 times")

    veil.pm.register(Halter())
    model.add({"tool_calls": [{"name": "ls", "arguments": {}}]})
    out = run_repl(veil, veil.new_session(), "fix it\r/exit\r")
    assert "halted: the same failure 3 times" in out and "How should I go on?" in out


def test_a_linked_history_file_is_refused_and_the_session_goes_on(repl_env, tmp_path):
    # A cloned repository's .veil/history -> ~/.bashrc would get every typed line appended.
    import os

    veil, model, project = repl_env
    victim = tmp_path / "bashrc"
    victim.write_bytes(b"precious\n")
    os.symlink(victim, project / ".veil" / "history")
    model.add("Fine.")
    session = veil.new_session()
    out = run_repl(veil, session, "rm -rf something\r/exit\r")
    # the warning names the temporary folder's path: the console does not wrap it (run_repl),
    # and line breaks are folded, so a long path cannot split the words (issue 30)
    flat = " ".join(out.split())
    assert "input history not saved" in flat and ".veil/history" in flat
    assert "symbolic link" in flat and "Fine." in flat
    assert victim.read_bytes() == b"precious\n"


def test_a_session_changed_by_another_opener_is_reloaded_not_overwritten(repl_env):
    veil, model, project = repl_env
    model.add("first answer", "third answer")
    session = veil.new_session()
    run_repl(veil, session, "first\r/exit\r")
    config = load_config(project)
    other_model = ScriptedModel(["second answer"])
    other = open_veil(  # another opener of the store, as another veil process would be
        project,
        config=config,
        llm=LLM(config, models={"main": other_model}),
        use_entry_points=False,
    )
    try:
        other.run_turn(other.load_session(session.id), "second", stream=False)
    finally:
        other.close()
    out = run_repl(veil, session, "third\r/exit\r")
    assert "changed by another veil process" in out and "third answer" in out
    stored = [m["content"] for _, m in veil.store.messages(session.id)]
    assert stored == ["first", "first answer", "second", "second answer", "third", "third answer"]
    sent = [m["content"] for m in model.calls[-1] if m["role"] == "user"]
    assert sent == ["first", "second", "third"]  # the reloaded history, not the stale copy


GITHUB_TOKEN = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"


def _files_holding(folder, secret: str) -> list:
    """Every file under ``folder`` whose bytes hold ``secret`` (the store and its WAL too)."""
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_credentials_typed_into_the_repl_are_kept_nowhere_and_echoed_nowhere(repl_env):
    # prompt-toolkit's history file kept every line as typed: the token of a message and the
    # key given to /model were in .veil/history in clear, and /model repeated the key
    veil, model, project = repl_env
    model.add("Pushed.")
    session = veil.new_session()
    keys = (
        f"please use my token {GITHUB_TOKEN} to push\r"
        f"/model {OPENAI_KEY}\r"
        f"/{GITHUB_TOKEN}\r"  # a token pasted after a slash is an unknown command, not echoed
        "/exit\r"
    )
    out = run_repl(veil, session, keys)

    history = (project / ".veil" / "history").read_text(encoding="utf-8")
    kept = [line[1:] for line in history.splitlines() if line.startswith("+")]
    assert kept == [
        "please use my token [redacted:github_token] to push",
        "/model [redacted:openai_key]",
        "/[redacted:github_token]",
        "/exit",
    ]
    assert "/model NAME: this looks like an API key or token, not a model name" in out
    assert "unknown command /[redacted:github_token]" in out
    assert session.model is None  # the key did not become the session's model
    for secret in (GITHUB_TOKEN, OPENAI_KEY):
        assert secret not in out
        assert _files_holding(project / ".veil", secret) == []
        assert all(secret not in str(m.get("content")) for m in model.calls[0])


def test_up_arrow_recalls_the_line_as_it_was_kept(repl_env):
    # this session's recall holds what the file holds (the redacted line), and the next REPL,
    # loading .veil/history, brings it back with Up and sends no credential
    veil, model, project = repl_env
    model.add("ok", "ok again")
    session = veil.new_session()
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    with create_pipe_input() as pipe:
        pipe.send_text(f"deploy with {GITHUB_TOKEN}\r/exit\r")
        repl = Repl(veil, session, input=pipe, output=DummyOutput(), console=console)
        repl.run()
    assert repl.prompt.history.get_strings() == [
        "deploy with [redacted:github_token]",
        "/exit",
    ]
    run_repl(veil, session, "\x1b[A\x1b[A\r/exit\r")  # Up twice: past "/exit"
    sent = [m["content"] for m in model.calls[-1] if m["role"] == "user"]
    assert sent == ["deploy with [redacted:github_token]"] * 2


def test_a_failing_commands_message_is_shown_without_the_credential_in_it(repl_env):
    veil, _, project = repl_env

    def fail(session, arg):
        raise ValueError(f"cannot parse {arg!r}")

    class Failing:
        @veil_repl.hookimpl
        def register_slash_commands(self, veil):
            from veil.core.types import SlashCommand

            return [SlashCommand("deploy", "deploy", fail)]

    veil.pm.register(Failing())
    out = run_repl(veil, veil.new_session(), f"/deploy {GITHUB_TOKEN}\r/exit\r")
    assert "/deploy failed: cannot parse '[redacted:github_token]'" in out
    assert GITHUB_TOKEN not in out
    assert _files_holding(project / ".veil", GITHUB_TOKEN) == []
