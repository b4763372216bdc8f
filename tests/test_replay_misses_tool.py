"""bench/replay_misses.py, the per-reference analysis of issue 18, agrees with `veil replay`:
its per-file veil and masking misses are those the replay runner counts on the same recording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import shared_data

ROOT = Path(__file__).resolve().parents[1]


def test_replay_misses_counts_what_the_replay_runner_counts(tmp_path):
    recording = shared_data("trajectories", "mini-swe-agent", "pydicom__pydicom-1256.traj.json")
    from veil.default_plugins.replay.formats import load_trajectory
    from veil.default_plugins.replay.runner import replay
    from veil.default_plugins.replay.veil_policy import veil_policy_factory

    project = tmp_path / "project"
    project.mkdir()
    expected = replay(
        [load_trajectory(recording)], [veil_policy_factory(project)], 8000, baselines=("masking",)
    )["files"][0]
    out = tmp_path / "misses.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "replay_misses.py"),
            str(recording),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(out.read_text())
    row = figures["files"][0]
    assert (row["veil"], row["masking"]) == (
        expected["veil"]["misses"],
        expected["masking"]["misses"],
    )
    classes = figures["classes"]
    # every reference only veil misses is counted once by age and once by where it stood
    veil_only_by_age = sum(n for k, n in classes.items() if k.startswith("veil only: last"))
    veil_only_by_place = classes.get("veil only: in an earlier turn", 0) + classes.get(
        "veil only: observations only", 0
    )
    assert veil_only_by_age == veil_only_by_place
    both = classes.get("both: missed", 0)
    masking_only = sum(n for k, n in classes.items() if k.startswith("masking only"))
    assert both + veil_only_by_age == row["veil"]
    assert both + masking_only == row["masking"]
    assert f"| {row['steps']} | {row['refs']} | {row['veil']} | {row['masking']} |" in proc.stdout
    # the what-if counts: a first line is part of its command, so it holds no more
    assert 0 <= row["held_by_first_lines"] <= row["held_by_commands"] <= row["veil"]


def test_evicted_commands_are_the_evicted_turns_commands_in_order():
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from replay_misses import evicted_commands
    finally:
        sys.path.remove(str(ROOT / "bench"))

    def turn(command: str) -> dict:
        arguments = json.dumps({"command": command})
        call = {"id": "c", "type": "function", "function": {"name": "bash", "arguments": arguments}}
        return {"role": "assistant", "content": "THOUGHT", "tool_calls": [call]}

    messages = [
        {"role": "user", "content": "task"},
        turn("cat src/a.py"),
        {"role": "tool", "content": "x = 1"},
        turn("sed -n 1,5p src/b.py"),
        {"role": "tool", "content": "y = 2"},
        turn("pytest -q"),
    ]
    messages[3]["tool_calls"][0]["function"]["arguments"] = "not json"
    # evicted: turn 1, the result 2, turn 3 (unreadable arguments), turn 5
    session = SimpleNamespace(messages=messages, stubs={5: "[s]", 1: "[s]", 2: "[s]", 3: "[s]"})
    assert evicted_commands(session) == ["cat src/a.py", "pytest -q"]
