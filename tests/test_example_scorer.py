"""Swapping the scorer: the example distribution under examples/ installs with its own entry
point and answers ``score`` at once: pluggy asks the plugin registered last first, and veil
registers entry points in name order, so ``veil_shortest_scorer`` is asked before ``veil_fsrs``
(blocking FSRS only removes it from the order). ``veil plugins`` shows that order, the scores
come from the example, and the default eviction policy keeps working on them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "veil_shortest_scorer"

PROBE = textwrap.dedent(
    """
    import json, sys
    from veil.core.app import open_veil
    from veil.core.models.llm import LLM
    from veil.core.settings import load_config
    from veil.testing.scripted_model import ScriptedModel

    project = sys.argv[1]
    config = load_config(project)
    calls = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"seq 1 {400 + i}"}}]}
             for i in range(6)]
    # "done" also answers the compaction role (memory extraction, then the summary): results of
    # ~1,600 tokens in a 2,000-token window outgrow what eviction may move, so full compaction
    # runs once during the turn
    model = ScriptedModel(calls + ["done"] * 4, context_window=2000)
    veil = open_veil(project, config=config, llm=LLM(config, models={"main": model}))
    info = veil.describe()
    session = veil.new_session()
    veil.run_turn(session, "print some numbers")
    scores = veil.pm.hook.score(session=session, items=session.live_items,
                                task_tags=session.task_tags, now=session.clock())
    expected = [1 / (1 + i.tokens / 100) / (2 if session.step - i.step > 5 else 1)
                for i in session.live_items]
    print(json.dumps({
        "score_impl": info["hooks"]["score"],
        "pluggy_order": [veil.pm.get_name(i.plugin)
                         for i in reversed(veil.pm.hook.score.get_hookimpls())],
        "evict_impl": info["hooks"]["evict"],
        "blocked": info["blocked"],
        "context_layer": info["context_layer"],
        "scores": [round(float(s), 9) for s in scores],
        "expected": [round(e, 9) for e in expected],
        "evictions": veil.store.eviction_count(session.id),
    }))
    """
)


def test_example_scorer_answers_first_once_installed_and_eviction_keeps_working(tmp_path):
    pytest.importorskip("veil_fsrs", reason="the default plugins are not installed")
    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    # the installed example first, then this checkout's veil (the PYTHONPATH tests run with)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH")) if p)
    env["VEIL_HOME"] = str(tmp_path / "home")

    def probe(project: Path) -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, str(project)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            cwd=project,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # installed alone: the example is asked first (its name sorts after veil_fsrs)
    alone = tmp_path / "alone"
    alone.mkdir()
    out = probe(alone)
    assert out["score_impl"] == out["pluggy_order"] == ["veil_shortest_scorer", "veil_fsrs"]
    assert out["scores"] == out["expected"]  # the formula in the example's docstring
    assert out["blocked"] == [] and out["evictions"] > 0
    listed = subprocess.run(
        [sys.executable, "-m", "veil.cli", "plugins"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=alone,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "  score *: veil_shortest_scorer, veil_fsrs" in listed.stdout.splitlines()

    # FSRS blocked: the example is the only scorer; eviction still works on its scores
    project = tmp_path / "proj"
    (project / ".veil").mkdir(parents=True)
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"plugins": {"disable": ["veil_fsrs"]}})
    )
    out = probe(project)
    assert out["score_impl"] == out["pluggy_order"] == ["veil_shortest_scorer"]
    assert out["evict_impl"] == ["veil_fsrs_evict"]
    assert "veil_fsrs" in out["blocked"] and out["context_layer"] is True
    assert out["scores"] == out["expected"]
    assert out["evictions"] > 0  # a 2,000-token window forces the default policy to evict
