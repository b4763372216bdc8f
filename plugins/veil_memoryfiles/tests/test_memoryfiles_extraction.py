"""The pre-compaction extractor: facts from the compact model into MEMORY.md and beliefs."""

from __future__ import annotations

import json

import veil_memoryfiles
from veil_memoryfiles.extraction import parse_facts

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.default_plugins.beliefs import belief_store
from veil.testing.scripted_model import ScriptedModel

HISTORY = [
    {"role": "user", "content": "start the server"},
    {"role": "assistant", "content": "It listens on port 5051; tests run with `make check`."},
]


def open_project(tmp_path, reply, settings=None):
    project = tmp_path / "p"
    (project / ".veil").mkdir(parents=True)
    if settings:
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    config = load_config(project)
    model = ScriptedModel([reply])
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_memoryfiles", veil_memoryfiles),),
    )
    return veil, model, project


def test_parse_facts_keeps_bullets_and_drops_none():
    answer = "Facts:\n- The server listens on port 5051.\n* Tests run with make check\n- none\n1. x"
    assert parse_facts(answer) == ["The server listens on port 5051.", "Tests run with make check"]


def test_extraction_writes_memory_and_beliefs(tmp_path, monkeypatch, stored_memory):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    veil, model, project = open_project(
        tmp_path, "- The server listens on port 5051.\n- Tests run with make check."
    )
    session = veil.new_session()
    veil.pm.hook.before_compaction(session=session, messages=HISTORY)
    text = stored_memory(project, "agents/default/MEMORY.md")
    assert "The server listens on port 5051." in text and "Tests run with make check." in text
    assert text.count("<!-- ") == 2
    assert "port 5051" in model.calls[0][1]["content"]  # the transcript was sent
    statements = [b["statement"] for b in belief_store(veil).beliefs()]
    assert "The server listens on port 5051." in statements


def test_extraction_is_off_when_memory_is_disabled(tmp_path, monkeypatch, stored_memory):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    veil, model, project = open_project(
        tmp_path, "- anything at all here", settings={"memory": {"enabled": False}}
    )
    veil.pm.hook.before_compaction(session=veil.new_session(), messages=HISTORY)
    assert model.calls == []
    assert stored_memory(project, "agents/default/MEMORY.md") is None


def test_a_model_error_writes_nothing_and_warns(tmp_path, monkeypatch, stored_memory):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))

    def boom(messages, tools):
        raise RuntimeError("provider down")

    veil, model, project = open_project(tmp_path, boom)
    events = []

    class Catch:
        @veil_memoryfiles.hookimpl
        def render(self, event):
            events.append(event)

    veil.pm.register(Catch())
    veil.pm.hook.before_compaction(session=veil.new_session(), messages=HISTORY)
    assert stored_memory(project, "agents/default/MEMORY.md") is None
    assert any("provider down" in e.data.get("message", "") for e in events)
