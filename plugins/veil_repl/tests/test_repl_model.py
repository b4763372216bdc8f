"""``/model NAME/MODEL`` switches the session to the auth.json provider called NAME (issue 30),
through real servers on 127.0.0.1."""

from __future__ import annotations

import io
import json

import veil_repl
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from veil_repl.repl import Repl

from veil.core.app import open_veil
from veil.core.settings import load_config
from veil.testing.scripted_server import ScriptedOpenAIServer


def test_model_named_after_a_provider_sends_the_next_turns_there(tmp_path, monkeypatch):
    home, project = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("VEIL_HOME", str(home))
    with (
        ScriptedOpenAIServer(["from main"]) as main,
        ScriptedOpenAIServer(["from other"]) as other,
    ):
        auth = {
            "providers": {
                "main": {"type": "openai", "base_url": main.url, "api_key": "sk-main-0123456789"},
                "other": {"type": "openai", "base_url": other.url, "api_key": "sk-other-012345"},
            },
            "routing": {"default": "main"},
            "models": {"main": {"model": "gpt-4o-mini", "contextWindow": 32000}},
        }
        (home / "auth.json").write_text(json.dumps(auth))
        veil = open_veil(
            project,
            config=load_config(project),
            use_entry_points=False,
            extra_plugins=(("veil_repl", veil_repl),),
        )
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=False, width=100, highlight=False)
        try:
            session = veil.new_session()
            with create_pipe_input() as pipe:
                pipe.send_text("first\r/model other/qwen3\rsecond\r/exit\r")
                Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
        finally:
            veil.close()
    out = buf.getvalue()
    assert "model for this session: qwen3 (other)" in out, out
    assert [r.user_texts()[-1] for r in main.requests] == ["first"]
    assert [r.user_texts()[-1] for r in other.requests] == ["second"]
    assert other.requests[0].body["model"] == "qwen3"
    assert session.model == "other/qwen3"  # stored as typed: a resumed session keeps it
