"""Settings mistakes through the real command line, one line each, with advice that works:
a plugin's settings registration refused (blocking it does not help: a blocked plugin's
sections are still registered, so the advice is to fix or uninstall it), the section of a
plugin that is gone, a typo in a field, and ``VEIL_<SECTION>__...`` variables naming a section
nobody registers (ignored without a word before, while the same typo in the file was refused).

A fake distribution ``veil_nu12`` (a ``.dist-info`` with a ``veil`` entry point) is put on
``PYTHONPATH`` where a check needs an installed plugin."""

from __future__ import annotations

import json
import subprocess

import pytest

from veil.testing.cli import install_fake_plugin, run_veil

NOT_SKIPPED = "blocking a plugin does not skip its settings: they are checked while it is off"
KNOWN = (
    "compaction, context, convergence, embeddings, http, loop, memory, models, permissions, "
    "plugins, security, store"
)

CLAIMS_CONVERGENCE = """
from veil.core.settings import SettingsSection
from veil.hookspecs import hookimpl


class Mine(SettingsSection):
    window: int = 3


@hookimpl
def register_settings():
    return {"convergence": Mine}
"""

NO_DEFAULT = """
from veil.core.settings import SettingsSection
from veil.hookspecs import hookimpl


class Remote(SettingsSection):
    endpoint: str


@hookimpl
def register_settings():
    return {"remote": Remote}
"""


@pytest.fixture
def veil_cli(tmp_path, project):
    """``veil_cli(*args, plugin=SOURCE, settings=DICT, **env)`` runs ``veil --project PROJECT
    ARGS``, with ``veil_nu12`` installed from SOURCE when given and ``settings`` written to the
    project's ``.veil/settings.json``."""

    def run(
        *args: str, plugin: str | None = None, settings: dict | None = None, **env: str
    ) -> subprocess.CompletedProcess:
        site = tmp_path / "site"
        if plugin is not None and not site.exists():
            install_fake_plugin(site, "veil_nu12", plugin)
        if settings is not None:
            (project / ".veil").mkdir(exist_ok=True)
            (project / ".veil" / "settings.json").write_text(json.dumps(settings))
        # a variable veil reads that is not a setting: left alone
        env = {"VEIL_DEBUG": "0", **env}
        return run_veil(project, *args, home=tmp_path / "home", site=site, cwd=tmp_path, env=env)

    return run


def _one_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_two_plugins_on_one_section_advise_uninstalling_not_blocking(veil_cli):
    expected = (
        "Error: settings section 'convergence' is registered by two plugins, veil_convergence "
        "and veil_nu12; uninstall one of them (pip uninstall veil-convergence or pip uninstall "
        f"veil_nu12), or fix one to use another section name ({NOT_SKIPPED})"
    )
    assert _one_error(veil_cli("sessions", plugin=CLAIMS_CONVERGENCE)) == expected
    # what the old advice said to do does not help, and the message says so
    blocked = veil_cli("--disable-plugin", "veil_nu12", "sessions", plugin=CLAIMS_CONVERGENCE)
    assert _one_error(blocked) == expected


def test_a_field_without_a_default_names_the_plugin_and_what_to_do(veil_cli):
    assert _one_error(veil_cli("sessions", plugin=NO_DEFAULT)) == (
        "Error: plugin veil_nu12: settings section 'remote' needs a default for every field; "
        f"endpoint has none. Fix the plugin veil_nu12, or pip uninstall veil_nu12 ({NOT_SKIPPED})"
    )


def test_the_section_of_an_uninstalled_plugin_says_so(veil_cli, project):
    line = _one_error(veil_cli("sessions", settings={"greeter": {"repeat": 2}}))
    assert line == (
        f"Error: {project / '.veil' / 'settings.json'}: greeter: no installed plugin registers "
        f"this section (known sections: {KNOWN})"
    )


def test_a_typo_in_a_field_gets_a_did_you_mean(veil_cli, project):
    line = _one_error(veil_cli("sessions", settings={"compaction": {"treshold": 0.5}}))
    assert line == (
        f"Error: {project / '.veil' / 'settings.json'}: compaction.treshold: no such field in "
        "compaction (did you mean 'threshold'? fields: observationMaskingTurns, "
        "observationMaskingBlock, threshold, keepRecentTurns, maxConsecutiveFailures)"
    )


@pytest.mark.parametrize(
    ("variable", "hint"),
    [
        ("VEIL_GREETER__REPEAT", ""),
        ("VEIL_COMPACTOIN__THRESHOLD", "did you mean 'VEIL_COMPACTION__'? "),
    ],
)
def test_a_variable_for_a_section_nobody_registers_is_refused(veil_cli, variable, hint):
    section = variable.removeprefix("VEIL_").split("__")[0].lower()
    assert _one_error(veil_cli("sessions", **{variable: "2"})) == (
        f"Error: environment: {variable}: no installed plugin registers the settings section "
        f"{section!r} ({hint}known sections: {KNOWN})"
    )


def test_settings_variables_of_known_sections_still_work(veil_cli):
    proc = veil_cli("sessions", VEIL_COMPACTION__THRESHOLD="0.5", VEIL_DISABLE_PLUGINS="")
    assert proc.returncode == 0, proc.stderr


def test_a_variable_with_a_typo_in_the_field_suggests_the_variable(veil_cli):
    assert _one_error(veil_cli("sessions", VEIL_COMPACTION__TRESHOLD="0.5")) == (
        "Error: environment: VEIL_COMPACTION__TRESHOLD (compaction.treshold): no such field in "
        "compaction (did you mean 'VEIL_COMPACTION__THRESHOLD'? fields: "
        "observation_masking_turns, observation_masking_block, threshold, keep_recent_turns, "
        "max_consecutive_failures)"
    )


def _settings(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["settings"]


@pytest.mark.parametrize(
    ("variable", "value", "section", "field", "expected"),
    [
        ("VEIL_PERMISSIONS__ALLOW", "bash(make*)", "permissions", "allow", ["bash(make*)"]),
        # a comma inside a rule's parentheses stays in the rule
        (
            "VEIL_PERMISSIONS__ALLOW",
            " bash(make a,b) ,read,",
            "permissions",
            "allow",
            ["bash(make a,b)", "read"],
        ),
        ("VEIL_PLUGINS__DISABLE", "veil_fsrs", "plugins", "disable", ["veil_fsrs"]),
        (
            "VEIL_PLUGINS__LOAD",
            "veil_fsrs,veil_http",
            "plugins",
            "load",
            ["veil_fsrs", "veil_http"],
        ),
        (
            "VEIL_MEMORY__INSTRUCTION_FILES",
            "AGENTS.md",
            "memory",
            "instructionFiles",
            ["AGENTS.md"],
        ),
        # JSON still reads as JSON
        ("VEIL_PERMISSIONS__DENY", '["bash(rm*)", "read(.env)"]', "permissions", "deny", None),
    ],
)
def test_a_list_variable_takes_items_separated_by_commas(
    veil_cli, variable, value, section, field, expected
):
    """Before: ``SettingsError ... from source "_EnvByAlias"`` traceback on every command."""
    settings = _settings(veil_cli("settings", **{variable: value}))
    assert settings[section][field] == (expected or json.loads(value))


def test_help_runs_whatever_a_list_variable_holds(veil_cli):
    proc = veil_cli("--help", VEIL_PERMISSIONS__ALLOW="[bash(make*)]")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("variable", "value", "shape", "reason"),
    [
        (
            "VEIL_PERMISSIONS__ALLOW",
            "[bash(make*)]",
            """a JSON list such as '["a", "b"]' or items separated by commas (a,b)""",
            "Expecting value: line 1 column 2 (char 1)",
        ),
        (
            "VEIL_PERMISSIONS",
            "mode=allow",
            """a JSON object such as '{"name": "value"}'""",
            "Expecting value: line 1 column 1 (char 0)",
        ),
        (
            "VEIL_PLUGINS__DISABLE",
            "[" * 50_000 + "]" * 50_000,
            """a JSON list such as '["a", "b"]' or items separated by commas (a,b)""",
            "nested too deeply (more levels of [ and { than the JSON parser allows)",
        ),
    ],
)
def test_a_variable_that_is_not_the_json_its_field_needs_is_one_line(
    veil_cli, variable, value, shape, reason
):
    assert _one_error(veil_cli("sessions", **{variable: value})) == (
        f"Error: environment: {variable}: must be {shape} (not JSON: {reason})"
    )


DEEP = "[" * 100_000 + "]" * 100_000
"""Nesting Python's JSON parser cannot take (``RecursionError`` before)."""
DEEPER_THAN_ALLOWED = '{"models": {"main": {"options": {"a": ' + "[" * 70 + "]" * 70 + "}}}}"
"""Nesting the parser takes but no settings file needs (it broke ``veil settings`` later)."""


@pytest.mark.parametrize(
    ("where", "text", "why"),
    [
        (
            "project/.veil/settings.json",
            DEEP,
            "nested too deeply (more levels of [ and { than the JSON parser allows)",
        ),
        (
            "project/.veil/auth.json",
            DEEP,
            "nested too deeply (more levels of [ and { than the JSON parser allows)",
        ),
        (
            "home/settings.json",
            DEEP,
            "nested too deeply (more levels of [ and { than the JSON parser allows)",
        ),
        ("home/settings.json", DEEPER_THAN_ALLOWED, "nested more than 64 levels deep"),
        (
            "project/.veil/agents/default/agent.json",
            DEEP,
            "nested too deeply (more levels of [ and { than the JSON parser allows)",
        ),
    ],
)
def test_a_deeply_nested_file_is_named_in_one_line(veil_cli, tmp_path, where, text, why):
    """A hostile repository can ship such a file: ``--help`` still runs, every other command
    stops with the file's name (before: ``RecursionError`` on every command)."""
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    help_run = veil_cli("--help")
    assert help_run.returncode == 0 and "Traceback" not in help_run.stderr, help_run.stderr
    command = ("-p", "hi") if where.endswith("agent.json") else ("settings",)
    assert _one_error(veil_cli(*command)) == f"Error: {path}: invalid JSON: {why}"
