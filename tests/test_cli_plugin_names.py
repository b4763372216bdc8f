"""Plugin names in the ``veil`` command line, run as a real subprocess: a name no plugin has
draws one warning on stderr, with the closest installed name, whichever command runs and
wherever the name was given; ``veil plugins`` says what a blocked ``veil.capture`` leaves of the
context layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

UNKNOWN = "no installed plugin has that name"


def veil(project: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    clean.update(VEIL_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1")
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=clean,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def home(tmp_path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("command", [["plugins"], ["plugins", "--json"], ["sessions"]])
def test_a_misspelled_disabled_plugin_warns_once_with_the_real_name(project, home, command):
    proc = veil(project, home, "--disable-plugin", "veil.fsrs", *command)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if UNKNOWN in line]
    assert warnings == [f"veil: --disable-plugin veil.fsrs: {UNKNOWN}; did you mean veil_fsrs?"], (
        proc.stderr
    )


def test_the_plugins_listing_marks_the_name_that_blocks_nothing(project, home):
    proc = veil(project, home, "--disable-plugin", "veil.fsrs", "plugins")
    assert proc.returncode == 0, proc.stderr
    assert f"blocked: veil.fsrs ({UNKNOWN}; did you mean veil_fsrs?)" in proc.stdout.splitlines()
    assert "veil_fsrs 0.1.0" in proc.stdout.splitlines()  # the real one still loads


def test_names_from_settings_and_variables_warn_once_each_naming_their_source(project, home):
    (project / ".veil").mkdir()
    settings = {"plugins": {"disable": ["veil_compactoin", "veil.recall"]}}
    (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    proc = veil(
        project,
        home,
        "--disable-plugin",
        "zzz_not_a_plugin",
        "sessions",
        VEIL_DISABLE_PLUGINS="zzz_not_a_plugin,veil_repll",
    )
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if UNKNOWN in line]
    assert warnings == [
        f"veil: --disable-plugin zzz_not_a_plugin: {UNKNOWN} (see veil plugins)",
        f"veil: VEIL_DISABLE_PLUGINS: veil_repll: {UNKNOWN}; did you mean veil_repl?",
        f"veil: plugins.disable: veil_compactoin: {UNKNOWN}; did you mean veil_compaction?",
    ], proc.stderr


def test_a_blocked_capture_plugin_is_said_beside_the_context_layer(project, home):
    on = veil(project, home, "plugins")
    assert on.stdout.splitlines()[-1] == "context layer: on"
    proc = veil(project, home, "--disable-plugin", "veil.capture", "plugins")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        "context layer: on (nothing captured: veil.capture is blocked, so nothing is evicted)"
    )
    assert UNKNOWN not in proc.stderr
