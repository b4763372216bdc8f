"""The ``veil`` command line: print mode, plugins, sessions, blocking, lazy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from veil import cli as cli_mod
from veil.core import app as app_mod
from veil.core.models.llm import LLM
from veil.testing.scripted_model import ScriptedModel


@pytest.fixture
def scripted(monkeypatch):
    """Make every Veil the CLI opens use one ScriptedModel; return it."""
    model = ScriptedModel([])
    real_open = app_mod.open_veil

    def fake_open(project_dir=None, **kw):
        from veil.core.settings import load_config

        config = load_config(project_dir)
        kw.setdefault("llm", LLM(config, models={"main": model, "compact": model}))
        return real_open(project_dir, config=config, **kw)

    monkeypatch.setattr(app_mod, "open_veil", fake_open)
    return model


def invoke(project, *args):
    argv = ["--project", str(project), *args]
    group = cli_mod.build_cli(argv)
    return CliRunner().invoke(
        group, argv, obj=cli_mod.VeilContext(str(project), cli_mod._prescan_disabled(argv))
    )


def test_print_mode_runs_a_tool_and_prints_only_the_answer(project, scripted):
    (project / "x.py").write_text("")
    scripted.add({"tool_calls": [{"name": "ls", "arguments": {}}]}, "1 Python file.")
    result = invoke(project, "-p", "How many Python files?")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "1 Python file."


def test_print_mode_json_and_continue(project, scripted):
    scripted.add("first", "second")
    out = json.loads(invoke(project, "-p", "hi", "--json").stdout)
    assert (out["status"], out["final"]) == ("done", "first")
    again = json.loads(invoke(project, "-c", "-p", "more", "--json").stdout)
    assert again["sessionId"] == out["sessionId"]
    # the resumed session sent the earlier exchange to the model, starting with the whole
    # first request: its context note where it stood then (the provider's cached prefix)
    first_request = scripted.calls[0]
    assert first_request[-1]["content"].startswith("[veil context note")
    assert scripted.calls[1][: len(first_request)] == first_request
    assert [m["content"] for m in scripted.calls[1][len(first_request) :]] == ["first", "more"]


def test_resume_unknown_session_is_a_clean_error(project, scripted):
    result = invoke(project, "--resume", "sess_nope", "-p", "x")
    assert result.exit_code == 1 and "no session with id 'sess_nope'" in result.output
    assert "Traceback" not in result.output


def test_bad_settings_fail_at_start_naming_file_and_field(project, scripted):
    (project / ".veil").mkdir()
    (project / ".veil/settings.json").write_text('{"compaction": {"threshold": 1.5}}')
    result = invoke(project, "-p", "x")
    assert result.exit_code == 1
    assert "settings.json: compaction.threshold" in result.output


def test_sessions_and_plugins_listing(project, scripted):
    scripted.add("ok")
    invoke(project, "-p", "list me")
    listing = json.loads(invoke(project, "sessions", "--json").stdout)
    assert len(listing) == 1 and listing[0]["title"] == "list me"
    info = json.loads(invoke(project, "plugins", "--json").stdout)
    by_name = {p["name"]: p for p in info["plugins"]}
    beliefs = by_name["veil.beliefs"]
    assert beliefs["hooks"] == sorted(beliefs["hooks"])  # listed in a stable order
    assert {"capture", "register_routes", "system_prompt_sections"} <= set(beliefs["hooks"])
    assert by_name["veil.recall"]["hooks"] == ["recall"]
    assert by_name["veil.coding_tools"]["default"] and not by_name["veil_fsrs"]["default"]
    assert set(info["tools"]) >= {"read", "write", "edit", "bash", "grep", "ls"}


def test_disable_plugin_flag_blocks_it(project, scripted):
    info = json.loads(invoke(project, "--disable-plugin", "veil_repl", "plugins", "--json").stdout)
    assert "veil_repl" not in [p["name"] for p in info["plugins"]]
    assert "veil_repl" in info["blocked"]


def test_blocking_a_default_plugin_by_name_draws_no_unknown_name_warning(project, scripted):
    scripted.add("ok")
    result = invoke(
        project, "--disable-plugin", "veil.replay", "--disable-plugin", "veil_nope", "-p", "hi"
    )
    assert result.exit_code == 0, result.output
    unknown = "no installed plugin has that name"
    assert f"--disable-plugin veil_nope: {unknown}" in result.stderr
    assert f"--disable-plugin veil.replay: {unknown}" not in result.stderr


def test_blocking_the_retired_veil_core_name_says_what_replaced_it(project, scripted):
    scripted.add("ok")
    result = invoke(project, "--disable-plugin", "veil.core", "-p", "hi")
    assert result.exit_code == 0, result.output
    assert "--disable-plugin veil.core: that plugin no longer exists" in result.stderr
    for name in ("veil.coding_tools", "veil.memory_tools", "veil.recall", "veil.replay"):
        assert name in result.stderr
    assert "no installed plugin has that name" not in result.stderr


def test_plugins_warns_about_a_blocked_name_no_plugin_has(project):
    result = invoke(project, "--disable-plugin", "veil_coding_tools", "plugins")
    assert result.exit_code == 0, result.output
    assert "--disable-plugin veil_coding_tools: no installed plugin has that name" in result.stderr
    assert "veil.coding_tools" in result.stdout  # the real name is still loaded


def test_help_imports_no_heavy_module():
    """``veil --help`` loads every plugin to list their commands, and nothing they need only
    when they run: not the settings models (pydantic), numpy, rich, or a model library (issue
    30: its target is 0.3 s). main() ends with os._exit after the atexit handlers
    (veil.core.background.finish), so the check runs as one."""
    code = (
        "import atexit, sys\n"
        "from veil.cli import main\n"
        "atexit.register(lambda: print('HEAVY', [m for m in ('litellm', 'torch', 'llama_cpp',"
        " 'prompt_toolkit', 'sentence_transformers', 'starlette', 'pydantic', 'numpy', 'rich',"
        " 'httpx', 'tiktoken') if m in sys.modules], flush=True))\n"
        "main(['--help'])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "  "], "-p: the task is empty"),
        (["-c", "--resume", "sess_x", "-p", "hi"], "--continue and --resume exclude each other"),
        (["--json"], "--json goes with -p TASK"),
    ],
)
def test_contradictory_or_empty_options_are_usage_errors(project, scripted, args, message):
    result = invoke(project, *args)
    assert result.exit_code == 2 and message in result.output
    assert scripted.calls == []


def test_a_project_folder_that_does_not_exist_is_refused(tmp_path):
    missing = tmp_path / "nope"
    result = CliRunner().invoke(
        cli_mod.cli, ["--project", str(missing), "sessions"], obj=cli_mod.VeilContext(None, [])
    )
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not missing.exists()


def test_environment_errors_name_the_variable(project, scripted, monkeypatch):
    monkeypatch.setenv("VEIL_COMPACTION__THRESHOLD", "3")
    result = invoke(project, "-p", "x")
    assert result.exit_code == 1
    assert "VEIL_COMPACTION__THRESHOLD (compaction.threshold)" in result.output


def test_an_agent_the_project_does_not_have_is_refused(project, scripted):
    result = invoke(project, "--agent", "reveiwer", "-p", "hi")
    assert result.exit_code == 1
    assert "agent 'reveiwer' not found" in result.output and "agents here: default" in result.output
    assert scripted.calls == []  # no model call, and no session stored for it
    assert json.loads(invoke(project, "sessions", "--json").stdout) == []
    (project / ".veil" / "agents" / "reviewer").mkdir(parents=True)
    scripted.add("ok")
    assert invoke(project, "--agent", "reviewer", "-p", "hi").exit_code == 0


def test_listing_sessions_never_creates_a_project_store(tmp_path):
    folder = tmp_path / "not_a_project"
    folder.mkdir()
    result = CliRunner().invoke(
        cli_mod.cli,
        ["--project", str(folder), "sessions", "--json"],
        obj=cli_mod.VeilContext(None, []),
    )
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not (folder / ".veil").exists()


def test_listing_sessions_with_a_bad_settings_file_names_the_field(tmp_path):
    (tmp_path / ".veil").mkdir()
    (tmp_path / ".veil" / "settings.json").write_text('{"context": {"protectedResults": -1}}')
    result = CliRunner().invoke(
        cli_mod.cli, ["--project", str(tmp_path), "sessions"], obj=cli_mod.VeilContext(None, [])
    )
    assert result.exit_code == 1 and result.exception is not None
    assert isinstance(result.exception, SystemExit)  # a clean CLI error, not a traceback
    assert "settings.json" in result.output and "context.protectedResults" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "--limit", "0"],
        ["compact", "--project", "{missing}"],
        ["serve", "--project", "{missing}"],
        ["replay", "{missing}/x.traj.json"],
        ["replay", "{missing_parent}"],
    ],
)
def test_bad_arguments_of_subcommands_are_usage_errors(project, scripted, tmp_path, args):
    args = [
        a.format(missing=tmp_path / "nope", missing_parent=tmp_path) for a in args
    ]  # a missing folder, or a folder where a file is expected
    result = invoke(project, *args)
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "nope").exists()


def test_settings_prints_what_is_in_effect_without_secrets(tmp_path):
    """`veil settings`: the project's value, defaults filled in, the model role merged from a
    variable, which values the project's own file set, the owners of plugin sections; the
    HTTP token and an api_key option print as "[set]", never as themselves."""
    (tmp_path / ".veil").mkdir()
    (tmp_path / ".veil" / "settings.json").write_text('{"compaction": {"threshold": 0.5}}')
    token = "abcdefghijklmnopqrstuvwxyz123456"
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        VEIL_HOME=str(tmp_path / "home"),
        VEIL_HTTP__TOKEN=token,
        VEIL_MODELS__MAIN__MODEL="openai/gpt-4o-mini",
        VEIL_MODELS__MAIN__OPTIONS=json.dumps({"api_key": key}),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(tmp_path), "settings"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert token not in proc.stdout and key not in proc.stdout
    out = json.loads(proc.stdout)
    settings = out["settings"]
    assert settings["compaction"]["threshold"] == 0.5  # the project's file
    assert settings["compaction"]["keepRecentTurns"] == 4  # a default filled in
    assert settings["http"]["token"] == "[set]"
    assert settings["models"]["main"]["model"] == "openai/gpt-4o-mini"
    assert settings["models"]["main"]["options"] == {"api_key": "[set]"}
    assert settings["context"]["pointerTokens"] == 9  # a number named like a token is no secret
    assert "compaction.threshold" in out["setByProject"]
    assert out["settingsFile"] == str(tmp_path / ".veil" / "settings.json")
    assert out["sectionOwners"]["convergence"] == ["veil_convergence"]


@pytest.mark.parametrize("command", [("plugins",), ("plugins", "--json"), ("settings",)])
def test_commands_that_read_no_session_create_nothing_in_the_folder(tmp_path, command):
    """``veil plugins`` or ``veil settings`` run in any folder used to leave a ``.veil/`` with
    an empty ``context.db`` behind."""
    folder = tmp_path / "somewhere"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(VEIL_HOME=str(tmp_path / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(folder.iterdir()) == []


def test_no_plugin_module_is_named_after_one_of_its_hooks():
    """The plugins import their modules when a hook is called (issue 30). A module named after a
    hook of its package (veil_compaction's summarise.py beside the ``summarise`` hook) replaces
    the hook on the package once imported, and the next plugin manager finds no hook: /compact
    said "no loaded plugin implements compaction"."""
    import importlib
    import pkgutil
    from importlib.metadata import entry_points

    from veil import hookspecs
    from veil.default_plugins import DEFAULT_PLUGINS

    hooks = {name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "veil_spec")}
    assert {"summarise", "score", "recall", "capture"} <= hooks
    modules = [m for _, m in DEFAULT_PLUGINS] + [
        ep.value.split(":")[0] for ep in entry_points(group="veil")
    ]
    clashes = []
    for name in modules:
        module = importlib.import_module(name)
        for sub in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if sub.name in hooks:
                clashes.append(f"{name}.{sub.name}")
    assert clashes == []
