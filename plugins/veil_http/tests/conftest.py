"""Fixtures for the HTTP plugin's tests: an isolated project, a Veil driven by a scripted model
that always answers, and a Starlette TestClient over the app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from veil_http.testing import AlwaysAnswers


def write_settings(project: Path, data: dict[str, Any]) -> None:
    """Write ``.veil/settings.json``."""
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text(json.dumps(data), encoding="utf-8")


def write_agent(project: Path, name: str, data: dict[str, Any]) -> None:
    """Write ``.veil/agents/<name>/agent.json``."""
    folder = project / ".veil" / "agents" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def make_veil(make_veil):
    """``make_veil(replies=(), plugins=(), settings=None, delay=0.0, **kwargs)``: veil's
    ``make_veil`` whose main model is an :class:`AlwaysAnswers` (it answers every turn once the
    replies run out), available as ``veil.model``."""

    def factory(replies=(), plugins=(), settings=None, delay=0.0, **kwargs):
        model = AlwaysAnswers(list(replies), delay=delay)
        return make_veil(plugins=plugins, settings=settings, models={"main": model}, **kwargs)

    return factory


@pytest.fixture
def settings_writer(project: Path):
    """``settings_writer(data)`` writes the project's ``.veil/settings.json``."""
    return lambda data: write_settings(project, data)


@pytest.fixture
def agent_writer(project: Path):
    """``agent_writer(name, data)`` writes ``.veil/agents/<name>/agent.json``."""
    return lambda name, data: write_agent(project, name, data)


@pytest.fixture
def make_client(make_veil):
    """``make_client(veil=None, **create_app_kwargs)`` -> ``(client, veil)``; the client raises
    no server exceptions, so a 500 is seen as the caller sees it. Requests go to
    ``http://127.0.0.1:5051`` (a loopback server answers only loopback ``Host`` names)."""
    from starlette.testclient import TestClient
    from veil_http import create_app

    clients = []

    def factory(veil=None, **kwargs):
        veil = veil or make_veil()
        client = TestClient(
            create_app(veil, **kwargs),
            base_url="http://127.0.0.1:5051",
            raise_server_exceptions=False,
        )
        clients.append(client)
        return client, veil

    yield factory
    for client in clients:
        client.close()
