"""``veil replay`` is the default plugin ``veil.replay`` (issue 20): there by default, listed by
``veil plugins`` as a default plugin, and gone with a message naming the plugin when blocked in
any of the three ways (``--disable-plugin``, ``VEIL_DISABLE_PLUGINS``, ``plugins.disable``).

Every check runs the real command line in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import two_step_recording

BLOCKED_MESSAGE = "veil replay is provided by the veil.replay plugin, which is blocked here"


def _veil(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    clean.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True", **env)
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=clean,
        cwd=project,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def test_veil_replay_is_there_by_default_as_a_default_plugin(project):
    recording = two_step_recording(project)
    proc = _veil(project, "replay", str(recording), "--policies", "full", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    entry = json.loads(proc.stdout)["files"][0]
    assert (entry["file"], entry["steps"], list(entry)[3:]) == (
        str(recording),
        2,
        ["full", "records"],  # only the policy asked for, then what the reader skipped
    )

    listed = json.loads(_veil(project, "plugins", "--json").stdout)
    (replay,) = [p for p in listed["plugins"] if p["name"] == "veil.replay"]
    assert replay["default"] is True
    assert replay["hooks"] == ["register_commands", "register_hookspecs"]  # replay_report
    assert "veil.replay" not in listed["blocked"]
    assert "  replay " in _veil(project, "--help").stdout


@pytest.mark.parametrize("how", ["flag", "environment", "settings"])
def test_blocked_veil_replay_is_gone_with_a_message_naming_the_plugin(project, how):
    recording = two_step_recording(project)
    flags: list[str] = []
    env: dict[str, str] = {}
    if how == "flag":
        flags = ["--disable-plugin", "veil.replay"]
    elif how == "environment":
        env = {"VEIL_DISABLE_PLUGINS": "veil.replay"}
    else:
        (project / ".veil").mkdir()
        settings = {"plugins": {"disable": ["veil.replay"]}}
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))

    proc = _veil(project, *flags, "replay", str(recording), "--json", **env)
    assert proc.returncode == 2 and proc.stdout == ""  # a usage error, nothing replayed
    assert BLOCKED_MESSAGE in proc.stderr and "Traceback" not in proc.stderr
    assert "  replay " not in _veil(project, *flags, "--help", **env).stdout

    listed = json.loads(_veil(project, *flags, "plugins", "--json", **env).stdout)
    assert "veil.replay" in listed["blocked"]
    assert "veil.replay" not in {p["name"] for p in listed["plugins"]}
    # the other default plugins stay
    assert {"veil.coding_tools", "veil.capture"} <= {p["name"] for p in listed["plugins"]}


def test_an_unknown_command_is_still_reported_as_unknown(project):
    proc = _veil(project, "--disable-plugin", "veil.replay", "replai")
    assert proc.returncode == 2 and "No such command 'replai'" in proc.stderr
    assert "blocked" not in proc.stderr


def test_a_budget_the_protected_context_exceeds_reports_steps_over_budget(project):
    """Found by a tester (session 13): budgets of about 100-300 tokens ended ``veil replay``
    with exit 1 and the CLI's advice about ``models.main.contextWindow`` (the prompt builder's
    PromptTooLarge), and one such file stopped every file of the run. A replay sends nothing:
    the step is measured and reported over budget, as smaller budgets already were."""
    task = "Fix the bug in calc/ops.py. " + " ".join(f"detail{k}" for k in range(150))
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},  # ~200 tokens: more than the budget alone
    ]
    for i in range(3):
        messages.append({"role": "assistant", "content": f"look\n\n```bash\ncat f_{i}.py\n```"})
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\nx = {i}"})
    long_task = project / "long_task.traj.json"
    long_task.write_text(json.dumps({"messages": messages}))
    short = two_step_recording(project)
    budget = 150
    proc = _veil(project, "replay", str(long_task), str(short), f"--budget={budget}", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "contextWindow" not in proc.stderr
    files = {Path(f["file"]).name: f for f in json.loads(proc.stdout)["files"]}
    assert set(files) == {"long_task.traj.json", "two.traj.json"}
    over = files["long_task.traj.json"]["veil"]["over_budget"]
    assert [o["step"] for o in over] == [0, 1, 2]  # every step: the task alone is over
    assert all(o["tokens"] > budget for o in over)
    assert {o["reason"] for o in over} == {"protected context alone exceeds the budget"}
    assert files["long_task.traj.json"]["veil"]["over_budget_steps"] == 3
