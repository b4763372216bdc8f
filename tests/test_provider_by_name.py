"""Picking a provider by its auth.json name: ``--model NAME/MODEL`` and ``veil models`` (issue
30), through real servers on 127.0.0.1 and the ``veil`` command in a subprocess."""

from __future__ import annotations

import json

import pytest

from veil.core.errors import ConfigError
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.cli import run_veil
from veil.testing.scripted_server import ScriptedOpenAIServer

MAIN_KEY = "sk-main-provider-0123456789abcdef"
OTHER_KEY = "sk-other-provider-0123456789abcdef"


def _auth(home, main, other, **extra):
    auth = {
        "providers": {
            "main": {"type": "openai", "base_url": main.url, "api_key": MAIN_KEY},
            "other": {"type": "openai", "base_url": other.url, "api_key": OTHER_KEY},
        },
        "routing": {"default": "main"},
        "models": {"main": {"model": "gpt-4o-mini", "contextWindow": 64000}},
        **extra,
    }
    home.mkdir(exist_ok=True)
    (home / "auth.json").write_text(json.dumps(auth))


@pytest.fixture
def dirs(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    return tmp_path / "home", project


def test_model_named_after_a_provider_goes_to_that_provider_alone(dirs):
    home, project = dirs
    with (
        ScriptedOpenAIServer(["from main"]) as main,
        ScriptedOpenAIServer(["from other"], model="qwen3-coder") as other,
    ):
        _auth(home, main, other)
        named = run_veil(project, "--model", "other/qwen3-coder", "-p", "hi", home=home)
        default = run_veil(project, "-p", "hi", home=home)
    assert named.returncode == 0, named.stderr
    assert named.stdout.strip() == "from other"
    [request] = other.requests
    assert request.body["model"] == "qwen3-coder"  # the provider's name is not sent
    assert request.api_key == OTHER_KEY
    # the same command without --model goes to routing.default, as before
    assert default.stdout.strip() == "from main"
    assert [r.body["model"] for r in main.requests] == ["gpt-4o-mini"]


def test_a_prefix_that_names_no_provider_stays_a_litellm_prefix(dirs, monkeypatch):
    home, project = dirs
    with ScriptedOpenAIServer([]) as main, ScriptedOpenAIServer([]) as other:
        _auth(home, main, other)
        monkeypatch.setenv("VEIL_HOME", str(home))
        llm = LLM(load_config(project))
        assert llm.named_provider("other/qwen3") == ("other", "qwen3")
        assert llm.named_provider("anthropic/claude-sonnet-4") is None
        assert llm.named_provider("other/") is None and llm.named_provider("other") is None
        model = llm.model_for("main", "anthropic/claude-sonnet-4")
        assert [r.name for r in model.routes] == ["main"]  # the routing, as before
        chosen = llm.model_for("main", "other/qwen3")
        assert (chosen.name, chosen.provider) == ("qwen3", "other")
        assert llm.unservable_reason("other/qwen3") is None


def test_a_project_provider_is_not_reached_by_name_without_the_users_consent(dirs, monkeypatch):
    """A cloned repository's .veil/auth.json may define a provider; naming it in a model (its
    own settings.json could) must not send the conversation there unasked (issue 17)."""
    home, project = dirs
    with ScriptedOpenAIServer(["from main"]) as main, ScriptedOpenAIServer(["x"]) as theirs:
        _auth(home, main, main)
        (project / ".veil").mkdir()
        (project / ".veil" / "auth.json").write_text(
            json.dumps({"providers": {"theirs": {"type": "openai", "base_url": theirs.url}}})
        )
        monkeypatch.setenv("VEIL_HOME", str(home))
        monkeypatch.delenv("VEIL_ALLOW_PROJECT_PROVIDERS", raising=False)
        llm = LLM(load_config(project))
        with pytest.raises(ConfigError, match="'theirs' is a provider defined by this project"):
            llm.model_for("main", "theirs/x")
        result = run_veil(project, "--model", "theirs/x", "-p", "hi", home=home)
        assert result.returncode == 1 and "VEIL_ALLOW_PROJECT_PROVIDERS" in result.stderr
        assert theirs.requests == []
        monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")
        assert LLM(load_config(project)).model_for("main", "theirs/x").provider == "theirs"


def test_veil_models_lists_what_each_provider_serves_and_which_role_uses_it(dirs):
    home, project = dirs
    with (
        ScriptedOpenAIServer([], model="gpt-4o-mini") as main,
        ScriptedOpenAIServer([], model="qwen3-coder") as other,
    ):
        _auth(home, main, other, routing={"default": "main", "fallback": ["other"]})
        text = run_veil(project, "models", home=home)
        listed = run_veil(project, "models", "--json", home=home)
        offline = run_veil(project, "models", "--no-fetch", home=home)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"main (openai, {main.url}, key set, user's auth.json) · routing default",
        "  roles: main gpt-4o-mini, compact gpt-4o-mini",
        "  models (its /models): gpt-4o-mini",
        f"other (openai, {other.url}, key set, user's auth.json) · routing fallback 1",
        "  roles: main gpt-4o-mini (fallback), compact gpt-4o-mini (fallback)",
        "  models (its /models): qwen3-coder",
    ]
    # each provider was asked with its own key
    assert [r.api_key for r in main.requests] == [MAIN_KEY, MAIN_KEY]
    assert [r.api_key for r in other.requests] == [OTHER_KEY, OTHER_KEY]
    data = json.loads(listed.stdout)["providers"]
    assert [(p["name"], p["models"], p["keySet"]) for p in data] == [
        ("main", ["gpt-4o-mini"], True),
        ("other", ["qwen3-coder"], True),
    ]
    assert MAIN_KEY not in listed.stdout and OTHER_KEY not in listed.stdout
    assert "models: not asked (--no-fetch)" in offline.stdout


def test_veil_models_says_when_a_provider_cannot_list(dirs):
    home, project = dirs
    with ScriptedOpenAIServer([]) as main:
        auth = {
            "providers": {
                "main": {"type": "openai", "base_url": main.url, "api_key": MAIN_KEY},
                "gone": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
            },
            "routing": {"default": "main"},
            "models": {"main": {"model": "gone/x"}},
        }
        home.mkdir()
        (home / "auth.json").write_text(json.dumps(auth))
        result = run_veil(project, "models", home=home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("gone (openai, http://127.0.0.1:9/v1, key set")
    assert lines[1] == "  roles: main x, compact x"
    assert lines[2].startswith("  models: could not list them: APIConnectionError")
    assert lines[4] == "  roles: none; use it with --model main/MODEL"
