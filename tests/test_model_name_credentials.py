"""A credential where a model name goes in a file or a variable is refused when veil loads it
(``veil -p`` through a real subprocess): agent.json's ``model`` and ``defaultCompaction.model``,
``models.<role>.model`` of the user's and the project's settings.json and auth.json, and
``VEIL_MODELS__MAIN__MODEL``. The error names the file (or variable) and the field and quotes
no value; nothing under ``.veil/`` holds the key but the file the user wrote it into, and no
request reaches the model. Before, the key was sent as the model, stored in the session row and
printed in litellm's "no context window" warning and in the error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veil.testing.cli import run_veil

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
"""An OpenAI project key's shape (the ``openai_key`` format of veil's redactor)."""
REFUSAL = "this looks like an API key or token, not a model name"


@pytest.fixture
def home(tmp_path: Path, scripted_server) -> Path:
    """VEIL_HOME whose auth.json routes to the scripted server (the user's own provider: no
    consent needed), and whose settings.json names a real main model."""
    home = tmp_path / "home"
    home.mkdir()
    _write(home / "auth.json", {"providers": {"scripted": scripted_server.provider()}})
    _write(home / "settings.json", {"models": {"main": {"model": "gpt-4o-mini"}}})
    scripted_server.add("an answer")
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".veil").mkdir(parents=True)
    return root


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _files_holding(folder: Path, secret: str) -> list[Path]:
    """Every file under ``folder`` whose bytes hold ``secret`` (the SQLite store and its WAL
    included)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes())


def _refused(proc, where: str, field: str) -> None:
    """One error line naming ``where`` and ``field``, exit 1, the key nowhere in the output."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    assert f"{where}: {field}: {REFUSAL}" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("layer", "path", "field"),
    [
        ("agent", ".veil/agents/default/agent.json", "model"),
        ("agent-compaction", ".veil/agents/default/agent.json", "defaultCompaction.model"),
        ("project-settings", ".veil/settings.json", "models.main.model"),
        ("project-settings-compact", ".veil/settings.json", "models.compact.model"),
        ("user-settings", "home/settings.json", "models.main.model"),
        ("user-auth", "home/auth.json", "models.main.model"),
        ("project-auth", ".veil/auth.json", "models.main.model"),
    ],
)
def test_a_key_as_a_configured_model_is_refused_naming_file_and_field(
    home, project, scripted_server, layer, path, field
):
    target = home / path.removeprefix("home/") if path.startswith("home/") else project / path
    role = field.split(".")[1] if field.startswith("models.") else None
    if layer.startswith("agent"):
        data = (
            {"model": KEY}
            if field == "model"
            else {"defaultCompaction": {"model": KEY}, "model": "gpt-4o-mini"}
        )
    elif target.exists():  # the user's files: keep what the fixture wrote
        data = json.loads(target.read_text())
        data.setdefault("models", {})[role] = {"model": KEY}
    else:
        data = {"models": {role: {"model": KEY}}}
    _write(target, data)

    proc = run_veil(project, "-p", "hi", home=home, env={"VEIL_ALLOW_PROJECT_PROVIDERS": "1"})

    _refused(proc, str(target), field)
    assert scripted_server.requests == []  # nothing was sent, the key least of all
    assert _files_holding(project / ".veil", KEY) == ([target] if project in target.parents else [])
    assert _files_holding(home, KEY) == ([target] if home in target.parents else [])


def test_a_key_in_the_model_variable_is_refused_naming_the_variable(home, project, scripted_server):
    proc = run_veil(project, "-p", "hi", home=home, env={"VEIL_MODELS__MAIN__MODEL": KEY})

    _refused(proc, "environment", "VEIL_MODELS__MAIN__MODEL (models.main.model)")
    assert scripted_server.requests == []
    assert _files_holding(project / ".veil", KEY) == []


def test_a_secret_veil_knows_as_the_agents_model_is_refused(home, project, scripted_server):
    # a token in no known format: only the environment variable's name says it is a secret,
    # so the format check passes it and the known-secrets check of agent.json refuses it
    token = "Qm7vT2xK9pL4wR8z"
    agent = project / ".veil" / "agents" / "default" / "agent.json"
    _write(agent, {"model": f"openai/{token}"})

    proc = run_veil(project, "-p", "hi", home=home, env={"BUILD_SERVICE_TOKEN": token})

    _refused(proc, str(agent), "model")
    assert token not in proc.stdout + proc.stderr
    assert scripted_server.requests == []
    assert _files_holding(project / ".veil", token) == [agent]


def test_model_names_that_are_names_still_load(home, project, scripted_server):
    # the refusal is for credentials only: provider/model names, tags and versions pass
    agent = project / ".veil" / "agents" / "default" / "agent.json"
    _write(agent, {"model": "gpt-4o-mini", "defaultCompaction": {"model": "default"}})
    _write(
        project / ".veil" / "settings.json",
        {"models": {"compact": {"model": "ollama/llama3.1:8b-instruct-q4_K_M"}}},
    )

    proc = run_veil(project, "-p", "hi", home=home)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "an answer"
    assert scripted_server.requests[0].body["model"] == "gpt-4o-mini"
