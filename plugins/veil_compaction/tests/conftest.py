"""Fixtures for the compaction plugin's tests: an isolated project opened with this plugin and
scripted models, and builders of synthetic histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import veil_compaction

from veil.hookspecs import hookimpl
from veil.testing.scripted_model import ScriptedModel


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def open_project(project: Path, make_veil):
    """Factory: ``open_project(main=None, compact=None, settings=None, agent=None, plugins=(),
    llm=None)`` opens an isolated Veil (no entry points, veil's ``make_veil``) with this plugin
    and scripted models (``main`` a ScriptedModel by default; ``compact`` unset = main answers the
    compact role, unless settings name a compact model)."""

    def factory(
        main: Any = None,
        compact: Any = None,
        settings: dict | None = None,
        agent: dict | None = None,
        plugins: tuple = (),
        llm: Any = None,
        with_plugin: bool = True,
    ):
        if agent is not None:
            write_json(project / ".veil" / "agents" / "default" / "agent.json", agent)
        models = None
        if llm is None:
            models = {"main": main if main is not None else ScriptedModel([])}
            if compact is not None:
                models["compact"] = compact
        extra = (("veil_compaction", veil_compaction),) if with_plugin else ()
        return make_veil(settings=settings, models=models, llm=llm, plugins=(*extra, *plugins))

    return factory


class Events:
    """A plugin recording render events (and before_compaction calls)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.extracted: list[list[dict]] = []

    @hookimpl
    def render(self, event: Any) -> None:
        if event.kind != "token":
            self.events.append(event)

    @hookimpl
    def before_compaction(self, session: Any, messages: list[dict]) -> None:
        self.extracted.append([dict(m) for m in messages])

    def of_kind(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.kind == kind]


@pytest.fixture
def events() -> Events:
    return Events()
