"""A plugin whose hook raises during a turn: the REPL prints one line naming the plugin and the
hook and stays up for the next message (issue 20)."""

from __future__ import annotations

import io

import veil_repl
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from veil_repl.repl import Repl

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel


class _FailsOnce:
    """``capture`` raises on the first user message only."""

    def __init__(self) -> None:
        self.failed = False

    @veil_repl.hookimpl
    def capture(self, session, event):
        if event.phase == "user" and not self.failed:
            self.failed = True
            raise ValueError("bad event")
        return None


def test_the_repl_shows_the_failure_in_one_line_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    project.mkdir()
    config = load_config(project)
    model = ScriptedModel(["second answer"])
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_repl", veil_repl), ("fails_once", _FailsOnce())),
    )
    try:
        session = veil.new_session()
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=False, width=200, highlight=False)
        with create_pipe_input() as pipe:
            pipe.send_text("first\rsecond\r/exit\r")
            Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
        out = buf.getvalue()
        line = "error: plugin fails_once failed in hook capture: ValueError: bad event"
        assert [x.strip() for x in out.splitlines() if "error" in x] == [line]
        assert "Traceback" not in out
        assert "second answer" in out  # the REPL stayed up and ran the next turn
        assert [m["content"] for m in session.messages if m["role"] == "user"] == [
            "first",
            "second",
        ]
    finally:
        veil.close()


class _StrSectionsOnce:
    """``system_prompt_sections`` answers a ``str`` (not a PromptSection) for the first turn."""

    def __init__(self) -> None:
        self.calls = 0

    @veil_repl.hookimpl
    def system_prompt_sections(self, session):
        self.calls += 1
        return "Answer in French." if self.calls == 1 else None


def test_the_repl_shows_a_result_of_the_wrong_type_in_one_line_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    project.mkdir()
    config = load_config(project)
    model = ScriptedModel(["second answer"])
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_repl", veil_repl), ("str_sections", _StrSectionsOnce())),
    )
    try:
        session = veil.new_session()
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=False, width=300, highlight=False)
        with create_pipe_input() as pipe:
            pipe.send_text("first\rsecond\r/exit\r")
            Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
        out = buf.getvalue()
        line = (
            "error: plugin str_sections: hook system_prompt_sections returned str, expected a "
            "veil.core.types.PromptSection or a list of them"
        )
        assert [x.strip() for x in out.splitlines() if "error" in x] == [line]
        assert "Traceback" not in out
        assert "second answer" in out  # the REPL stayed up and ran the next turn
    finally:
        veil.close()
