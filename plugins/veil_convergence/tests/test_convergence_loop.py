"""End to end through veil's own loop and ``bash`` tool with a scripted model: repeated failures
reach the user (render) and the model (system prompt); a halt stops the turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import veil_convergence

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.core.types import RenderEvent
from veil.hookspecs import hookimpl
from veil.testing.scripted_model import ScriptedModel

FAILING = f"{sys.executable} -c 'import no_such_module_for_veil_tests'"


class Screen:
    """A front end that keeps the warnings and halts it is shown."""

    def __init__(self) -> None:
        self.events: list[RenderEvent] = []

    @hookimpl
    def render(self, event: RenderEvent) -> None:
        if event.kind in ("warning", "halt", "info"):
            self.events.append(event)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))


def open_with(project: Path, replies: list[Any], settings: dict | None = None):
    project.mkdir(exist_ok=True)
    if settings:
        (project / ".veil").mkdir(exist_ok=True)
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    config = load_config(project)
    model = ScriptedModel(replies)
    screen = Screen()
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model, "compact": model}),
        use_entry_points=False,
        extra_plugins=(("veil_convergence", veil_convergence), ("screen", screen)),
    )
    return veil, model, screen


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_repeated_failure_warns_the_user_and_the_model(tmp_path: Path) -> None:
    veil, model, screen = open_with(
        tmp_path / "project", [bash(FAILING), bash(FAILING), bash(FAILING), "I give up."]
    )
    try:
        session = veil.new_session()
        result = veil.run_turn(session, "make it import")
        assert result.status == "done"
        assert [(e.kind, e.data["level"]) for e in screen.events] == [("warning", 1)]
        assert (
            screen.events[0].data["label"] == "ModuleNotFoundError: no_such_module_for_veil_tests"
        )
        # the warning is volatile: it is sent in the context note after the conversation,
        # and the system message stays byte-identical (issue 18: the prefix stays put)
        last_note = model.calls[-1][-1]
        assert last_note["role"] == "user"
        assert last_note["content"].startswith("[veil context note")
        assert "Convergence warning, level 1 of 3" in last_note["content"]
        assert "no_such_module_for_veil_tests" in last_note["content"]
        assert model.calls[-1][0] == model.calls[0][0]
        assert all("Convergence warning" not in (m.get("content") or "") for m in model.calls[0])
    finally:
        veil.close()


def test_halt_stops_the_turn_with_the_reason(tmp_path: Path) -> None:
    settings = {"convergence": {"haltWithoutProgress": 2, "softRepeats": 9}}
    veil, _model, screen = open_with(
        tmp_path / "project",
        [bash("ls"), bash("ls"), bash("ls"), "never reached"],
        settings,
    )
    try:
        session = veil.new_session()
        result = veil.run_turn(session, "look around")
        assert result.status == "halted"
        assert result.reason.startswith("convergence: ")
        assert [e.kind for e in screen.events] == ["halt"]
    finally:
        veil.close()
