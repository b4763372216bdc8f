"""``veil doctor`` is the default plugin ``veil.doctor`` (issue 20): there by default, listed by
``veil plugins`` as a default plugin that adds a command, and gone with a message naming the
plugin when blocked (its checks and repairs: tests/test_damaged_rows.py).

Every check runs the real command line in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BLOCKED_MESSAGE = "veil doctor is provided by the veil.doctor plugin, which is blocked here"


def _veil(tmp_path: Path, project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    clean.update(
        VEIL_HOME=str(tmp_path / "home"),
        HF_HUB_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=clean,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def test_veil_doctor_is_there_by_default_as_a_default_plugin(tmp_path, project, make_veil):
    veil = make_veil(["hello"])
    veil.run_turn(veil.new_session(), "hi")
    veil.close()
    proc = _veil(tmp_path, project, "doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["problemsLeft"] == 0 and report["findings"] == []
    assert report["path"] == str(project / ".veil" / "context.db")

    listed = json.loads(_veil(tmp_path, project, "plugins", "--json").stdout)
    (doctor,) = [p for p in listed["plugins"] if p["name"] == "veil.doctor"]
    assert doctor["default"] is True
    assert doctor["hooks"] == [
        "register_commands",
        "register_hookspecs",
        "register_migrations",
    ]  # rebuild_derived
    assert "  doctor " in _veil(tmp_path, project, "--help").stdout


def test_blocked_doctor_says_which_plugin_provides_it(tmp_path, project, make_veil):
    make_veil([]).close()
    for how in (
        {"args": ("--disable-plugin", "veil.doctor"), "env": {}},
        {"args": (), "env": {"VEIL_DISABLE_PLUGINS": "veil.doctor"}},
    ):
        proc = _veil(tmp_path, project, *how["args"], "doctor", **how["env"])
        assert proc.returncode == 2 and proc.stdout == ""  # a usage error, nothing checked
        assert BLOCKED_MESSAGE in proc.stderr and "Traceback" not in proc.stderr
        listed = _veil(tmp_path, project, *how["args"], "plugins", "--json", **how["env"])
        listed = json.loads(listed.stdout)
        assert "veil.doctor" not in {p["name"] for p in listed["plugins"]}
