"""veil's pytest plugin (veil.testing.pytest_plugin), used as a plugin author uses it: a project
of its own, run by pytest in a subprocess (pytester), with no conftest of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from veil.hookspecs import hookimpl

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "veil.testing.pytest_plugin"

# Installed, veil registers the plugin through the entry point group pytest11; a checkout used
# before (re)installing names it with -p (both at once would register it twice).
REGISTERED = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
PLUGIN_ARGS = [] if REGISTERED else ["-p", PLUGIN]

AUTHOR_TESTS = '''
import json
import os
import urllib.request
from pathlib import Path

import pytest

from veil.core.types import PromptSection
from veil.hookspecs import hookimpl

OUT = Path(__file__).parent / "out"
SEEN = {}


class Motto:
    """The plugin under test: one system prompt section."""

    @hookimpl
    def system_prompt_sections(self, session):
        return PromptSection(name="motto", text="Measure twice, cut once.")


def test_a_turn_through_the_scripted_server(make_veil, scripted_server):
    veil = make_veil(["Hello there"], server=scripted_server, plugins=[Motto()])
    result = veil.run_turn(veil.new_session(), "hi")
    calls = []
    close = veil.close
    veil.close = lambda: (calls.append(1), close())  # make_veil's teardown closes it
    SEEN.update(close_calls=calls, url=scripted_server.url)
    OUT.write_text(json.dumps({
        "final": result.final,
        "requests": [
            {"path": r.path, "api_key": r.api_key, "body": r.body}
            for r in scripted_server.requests
        ],
    }))


def test_the_last_veil_was_closed_and_the_server_stopped():
    assert SEEN["close_calls"] == [1]
    with pytest.raises(OSError):
        urllib.request.urlopen(SEEN["url"] + "/models", timeout=5)


def test_a_tool_call_answered_by_a_scripted_model(make_veil, veil_project):
    (veil_project / "notes.txt").write_text("alpha")
    veil = make_veil([
        {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        "It says alpha.",
    ])
    result = veil.run_turn(veil.new_session(), "what do the notes say?")
    assert result.final == "It says alpha."
    assert len(veil.model.calls) == 2
    [tool_message] = [m for m in veil.model.calls[1] if m.get("role") == "tool"]
    assert "alpha" in tool_message["content"]


def test_isolated_env(veil_isolated_env):
    assert os.environ["VEIL_HOME"] == str(veil_isolated_env)
    assert "VEIL_OUTER_SETTING" not in os.environ
    assert os.environ["VEIL_PERMISSIONS__MODE"] == "allow"
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_a_test_without_the_fixtures_keeps_its_environment():
    assert os.environ["VEIL_OUTER_SETTING"] == "kept"
    assert os.environ["VEIL_HOME"] == os.environ["OUTER_VEIL_HOME"]
    assert "VEIL_PERMISSIONS__MODE" not in os.environ
'''


@pytest.fixture
def author_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run :data:`AUTHOR_TESTS` as a plugin author's project, in a subprocess; returns the result
    and what its first test wrote (the final answer and the requests the server recorded)."""
    monkeypatch.setenv("VEIL_OUTER_SETTING", "kept")
    monkeypatch.setenv("OUTER_VEIL_HOME", str(pytester.path / "outer_home"))
    monkeypatch.setenv("VEIL_HOME", str(pytester.path / "outer_home"))
    for name in ("VEIL_PERMISSIONS__MODE", "LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_author=AUTHOR_TESTS)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", timeout=300)
    out = pytester.path / "out"
    return result, json.loads(out.read_text()) if out.exists() else None


def test_a_plugin_authors_project_runs_turns_with_the_fixtures(author_run):
    result, out = author_run
    result.assert_outcomes(passed=5)
    assert out["final"] == "Hello there"
    [request] = out["requests"]  # one turn, one model call, nothing else sent
    assert request["path"] == "/v1/chat/completions"
    assert request["api_key"] == "sk-scripted-test-key"  # the isolated user's auth.json
    body = request["body"]
    assert body["model"] == "gpt-4o-mini"
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    assert users[0] == "hi"
    assert body["messages"][0]["role"] == "system"
    assert "Measure twice, cut once." in body["messages"][0]["content"]


def test_the_fixtures_are_documented_in_pytest_fixtures(pytester: pytest.Pytester):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--fixtures", timeout=120)
    text = result.stdout.str()
    section = text.split(f"fixtures defined from {PLUGIN}", 1)[1]
    for name in ("make_veil", "scripted_server", "veil_project", "veil_isolated_env"):
        assert f"\n{name} -- " in section, name
    assert "Factory of isolated Veils" in section


def test_importing_the_plugin_imports_no_veil_module_or_heavy_library():
    # loaded in every pytest run where veil is installed: beyond the package ``veil`` itself
    # (its hookspecs), it must add only itself and the package veil.testing
    code = (
        "import json, sys, veil\n"
        "before = set(sys.modules)\n"
        f"import {PLUGIN}\n"
        "heavy = ('litellm', 'torch', 'tiktoken', 'sentence_transformers', 'numpy')\n"
        "print(json.dumps({'added': sorted(m for m in set(sys.modules) - before "
        "if m.startswith('veil')), 'heavy': [m for m in heavy if m in sys.modules]}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert json.loads(out.stdout) == {
        "added": ["veil.testing", "veil.testing.pytest_plugin"],
        "heavy": [],
    }


def test_pyproject_registers_the_plugin_under_pytest11():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"veil": PLUGIN}


def test_veil_testing_exports_the_helpers_on_first_use():
    import veil.testing as testing
    from veil.testing.scripted_model import ScriptedModel
    from veil.testing.scripted_server import ScriptedOpenAIServer

    assert testing.ScriptedModel is ScriptedModel
    assert testing.ScriptedOpenAIServer is ScriptedOpenAIServer
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = testing.Nope


class _Recorder:
    @hookimpl
    def session_start(self, session):
        pass


def test_plugins_are_named_after_module_or_class_and_never_twice_the_same(make_veil):
    a_module = types.ModuleType("veil_example_plugin")
    a_module.session_start = hookimpl(lambda session: None)
    veil = make_veil(plugins=[_Recorder(), _Recorder(), ("mine", _Recorder()), a_module])
    names = {veil.pm.get_name(p) for p in veil.pm.get_plugins()}
    assert {"_Recorder", "_Recorder#2", "mine", "veil_example_plugin"} <= names


def test_make_veil_refuses_answers_it_could_not_send(make_veil, scripted_server):
    from veil.testing.scripted_model import ScriptedModel

    with pytest.raises(ValueError, match=r"not \['model', 'models'\]"):
        make_veil(model=ScriptedModel(), models={"main": ScriptedModel()})
    with pytest.raises(ValueError, match=r"not \['server', 'model'\]"):
        make_veil(server=scripted_server, model=ScriptedModel())
    with pytest.raises(ValueError, match="model answers here, so they would never be sent"):
        make_veil(["unsent"], model=ScriptedModel())


def test_make_veil_writes_settings_and_disables_plugins(make_veil, veil_project):
    veil = make_veil(settings={"loop": {"maxIterations": 7}}, disable=["veil.coding_tools"])
    written = json.loads((veil_project / ".veil" / "settings.json").read_text())
    assert written == {"loop": {"maxIterations": 7}}
    assert veil.config.settings.loop.max_iterations == 7  # the default is 25
    assert "veil.coding_tools" not in {veil.pm.get_name(p) for p in veil.pm.get_plugins()}
    assert veil.pm.get_plugin("veil.memory_tools") is not None


def test_scripted_server_add_queues_replies_after_the_existing_ones(scripted_server):
    import httpx

    scripted_server.add("one", "two")
    texts = []
    for _ in range(2):
        answer = httpx.post(
            scripted_server.url + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        ).json()
        texts.append(answer["choices"][0]["message"]["content"])
    assert texts == ["one", "two"]
