"""A model role given partly in settings.json or ``VEIL_MODELS__*`` merges field by field over
the auth.json role: veil's own hint "set models.main.contextWindow" works as written. A role
naming another model replaces the role whole (options, keys among them, describe their model),
and a role with no model anywhere is an error that says where to name it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.errors import ConfigError
from veil.core.settings import ModelRole, load_config
from veil.testing.scripted_server import ScriptedOpenAIServer

HINT = "litellm knows no context window for 'scripted'"


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The user's folder ($VEIL_HOME), with no VEIL_* variable but it set."""
    for name in list(os.environ):
        if name.startswith("VEIL_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("VEIL_HOME", str(folder))
    return folder


def test_a_window_in_settings_json_adds_to_the_auth_json_role(project, home):
    write(home / "auth.json", {"models": {"main": {"model": "scripted"}}})
    write(project / ".veil/settings.json", {"models": {"main": {"contextWindow": 16000}}})
    assert load_config(project).models.main == ModelRole(model="scripted", context_window=16000)


def test_a_window_in_a_variable_adds_to_the_auth_json_role(project, home, monkeypatch):
    write(home / "auth.json", {"models": {"main": {"model": "scripted", "contextWindow": 8000}}})
    monkeypatch.setenv("VEIL_MODELS__MAIN__CONTEXT_WINDOW", "16000")
    assert load_config(project).models.main == ModelRole(model="scripted", context_window=16000)


def test_the_same_model_keeps_the_auth_window_and_merges_options_key_by_key(project, home):
    user = {
        "models": {
            "main": {
                "model": "m",
                "contextWindow": 32000,
                "options": {"api_base": "http://127.0.0.1:9", "temperature": 0.2},
            }
        }
    }
    write(home / "auth.json", user)
    write(
        project / ".veil/settings.json",
        {"models": {"main": {"model": "m", "options": {"temperature": 0.5, "seed": 7}}}},
    )
    main = load_config(project).models.main
    assert main == ModelRole(
        model="m",
        context_window=32000,
        options={"api_base": "http://127.0.0.1:9", "temperature": 0.5, "seed": 7},
    )


def test_a_project_naming_another_model_takes_none_of_the_users_role(project, home):
    """As before the merge: the user's options (a base URL, a key) and window stay with the
    user's model; the project's model gets only what the project's file gives it."""
    write(
        home / "auth.json",
        {
            "models": {
                "main": {"model": "mine", "contextWindow": 32000, "options": {"api_key": "sk-x"}},
                "compact": {"model": "cheap"},
            }
        },
    )
    write(project / ".veil/settings.json", {"models": {"main": {"model": "theirs"}}})
    models = load_config(project).models
    assert models.main == ModelRole(model="theirs")
    assert models.compact == ModelRole(model="cheap")


def test_a_variable_naming_another_model_takes_nothing_of_the_files_role(
    project, home, monkeypatch
):
    write(
        project / ".veil/settings.json",
        {"models": {"main": {"model": "a", "contextWindow": 8000, "options": {"seed": 1}}}},
    )
    monkeypatch.setenv("VEIL_MODELS__MAIN__MODEL", "b")
    assert load_config(project).models.main == ModelRole(model="b")
    monkeypatch.setenv("VEIL_MODELS__MAIN__MODEL", "a")  # the same model: field by field
    monkeypatch.setenv("VEIL_MODELS__MAIN__OPTIONS", '{"top_p": 0.5}')
    assert load_config(project).models.main == ModelRole(
        model="a", context_window=8000, options={"seed": 1, "top_p": 0.5}
    )


def test_a_project_auth_json_naming_another_model_takes_none_of_the_users_options(project, home):
    """The project's auth.json merged the user's role key by key: its model name got the user's
    options, a key among them, which litellm sends to whichever provider that name selects."""
    user = {"models": {"main": {"model": "mine", "options": {"api_key": "sk-user-secret-1"}}}}
    write(home / "auth.json", user)
    write(project / ".veil/auth.json", {"models": {"main": {"model": "openrouter/theirs"}}})
    assert load_config(project).models.main == ModelRole(model="openrouter/theirs")
    # the same model, or none named: field by field, the user's options kept
    write(project / ".veil/auth.json", {"models": {"main": {"contextWindow": 16000}}})
    assert load_config(project).models.main == ModelRole(
        model="mine", context_window=16000, options={"api_key": "sk-user-secret-1"}
    )


def test_the_users_settings_json_role_merges_with_the_projects(project, home):
    write(home / "settings.json", {"models": {"main": {"model": "m", "options": {"top_p": 0.9}}}})
    write(project / ".veil/settings.json", {"models": {"main": {"contextWindow": 16000}}})
    main = load_config(project).models.main
    assert main == ModelRole(model="m", context_window=16000, options={"top_p": 0.9})


def test_a_role_without_a_model_anywhere_says_where_to_name_it(project, home):
    write(project / ".veil/settings.json", {"models": {"main": {"contextWindow": 16000}}})
    with pytest.raises(ConfigError) as caught:
        load_config(project)
    message = caught.value.message
    assert message.startswith("models.main.model: not set: models.main gives contextWindow ")
    assert f"(in {project / '.veil' / 'settings.json'})" in message
    assert str(home / "auth.json") in message and "VEIL_MODELS__MAIN__MODEL" in message


def test_a_compact_role_without_a_model_names_its_variable(project, home, monkeypatch):
    write(home / "auth.json", {"models": {"main": {"model": "m"}}})
    monkeypatch.setenv("VEIL_MODELS__COMPACT__CONTEXT_WINDOW", "4000")
    with pytest.raises(ConfigError) as caught:
        load_config(project)
    message = caught.value.message
    assert message.startswith("models.compact.model: not set: ")
    assert "(in VEIL_MODELS__COMPACT__CONTEXT_WINDOW)" in message


def _veil_p(project: Path, home: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        VEIL_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", **extra_env
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "-p", "hi"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("where", ["none", "settings.json", "variable"])
def test_veil_p_follows_its_own_context_window_hint(project, home, where):
    """The user's auth.json names the model; the hint veil prints for it (no window known to
    litellm) goes away once the window is set where the hint says, in either place."""
    with ScriptedOpenAIServer(["hello"]) as server:
        write(
            home / "auth.json",
            {
                "providers": {"scripted": server.provider()},
                "models": {"main": {"model": "scripted"}},
            },
        )
        extra = {}
        if where == "settings.json":
            write(project / ".veil/settings.json", {"models": {"main": {"contextWindow": 16000}}})
        elif where == "variable":
            extra = {"VEIL_MODELS__MAIN__CONTEXT_WINDOW": "16000"}
        proc = _veil_p(project, home, extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "hello"
    assert (HINT in proc.stderr) == (where == "none"), proc.stderr[-2000:]
    assert "set models.main.contextWindow" in proc.stderr or where != "none"


def test_veil_p_without_a_model_anywhere_is_one_clean_line(project, home):
    write(project / ".veil/settings.json", {"models": {"main": {"contextWindow": 16000}}})
    proc = _veil_p(project, home, {})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "models.main.model: not set" in proc.stderr and "VEIL_MODELS__MAIN__MODEL" in proc.stderr
