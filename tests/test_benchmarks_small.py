"""Every benchmark under bench/ runs once at its small size (so CI keeps them runnable), and the
replay benchmarks' figures are checked against a count made here from the recording itself.

A benchmark whose data or optional dependency is missing says ``skipped:`` in its table: the test
is then skipped with that line, and fails under ``CI=true``, where ../shared and every
dependency are present (a benchmark that measured nothing must not pass there).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))
MEASURED = ("bench_replay.py", "bench_frontier.py")  # their own tests below check figures
TRAJ = BENCH.parent.parent / "shared" / "data" / "trajectories"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=900, cwd=BENCH.parent
    )
    skipped = [line for line in proc.stdout.splitlines() if "skipped:" in line]
    if skipped:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{args[0]} measured nothing under CI: {skipped[0]}")
        pytest.skip(skipped[0])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "|" in proc.stdout, "a benchmark prints a table"
    return proc


@pytest.mark.parametrize(
    "script",
    [s for s in SCRIPTS if s.name not in MEASURED],
    ids=[s.name for s in SCRIPTS if s.name not in MEASURED],
)
def test_benchmark_runs_small(script: Path) -> None:
    _run([str(script), "--small"])


# --- the replay benchmarks, checked against a count made here ----------------------------------
#
# The oracle below is DESIGN.md "Measures" written the plain way, apart from the replay's code:
# references by regex, prompts built from the recording, tokens by tiktoken directly, misses by
# substring, line misses by comparing sets of lines.

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}")
MASK = "[observation masked]"


def _recording(folder: str, name: str) -> Path:
    path = TRAJ / folder / name
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing in CI")
        pytest.skip(f"reference data not present at {path}")
    return path


def _oracle_references(traj, t: int) -> set[str]:
    tokens = {
        w
        for w in _TOKEN.findall(traj.steps[t].assistant)
        if w.isdigit()
        or any(c in "_./" or c.isdigit() for c in w)
        or any(c.isupper() for c in w[1:])
    }
    earlier = [s.observation for s in traj.steps[:t] if s.observation is not None]
    return {
        w
        for w in tokens
        if w not in traj.system and w not in traj.task and any(w in o for o in earlier)
    }


def _history(traj, t: int) -> list[str]:
    out = []
    for s in traj.steps[:t]:
        out.append(s.assistant)
        if s.observation is not None:
            out.append(s.observation)
    return out


def _head(traj) -> list[str]:
    return [text for text in (traj.system, traj.task) if text]


def _full_prompt(traj, t: int) -> list[str]:
    return _head(traj) + _history(traj, t)


def _masking_prompt(traj, t: int, keep: int) -> list[str]:
    observed = [i for i, s in enumerate(traj.steps[:t]) if s.observation is not None]
    masked = set(observed[: max(0, len(observed) - keep)])
    out = _head(traj)
    for i, s in enumerate(traj.steps[:t]):
        out.append(s.assistant)
        if s.observation is not None:
            out.append(MASK if i in masked else s.observation)
    return out


def _oracle(traj, prompt, steps: int | None = None) -> dict[str, int]:
    """``{"prompt_tokens", "references", "misses", "line_misses"}`` of a prompt rule
    (``prompt(traj, t) -> contents``) over the first ``steps`` steps."""
    import tiktoken

    from veil.core.models.offline import prepare_offline_env

    prepare_offline_env()
    enc = tiktoken.get_encoding("cl100k_base")
    out = {"prompt_tokens": 0, "references": 0, "misses": 0, "line_misses": 0}
    for t in range(min(steps or len(traj.steps), len(traj.steps))):
        contents = prompt(traj, t)
        out["prompt_tokens"] += sum(len(enc.encode(c, disallowed_special=())) for c in contents)
        refs = _oracle_references(traj, t)
        out["references"] += len(refs)
        text = "\x00".join(contents)
        prompt_lines = {line for c in contents for line in c.split("\n")}
        sources = _history(traj, t)
        for ref in refs:
            out["misses"] += ref not in text
            source = next(s for s in reversed(sources) if ref in s)
            lines = [line for line in source.split("\n") if ref in line]
            out["line_misses"] += not any(line in prompt_lines for line in lines)
    return out


def _figures(obj: dict) -> dict[str, int]:
    return {k: obj[k] for k in ("prompt_tokens", "references", "misses", "line_misses")}


def test_bench_replay_small_figures(tmp_path: Path) -> None:
    """bench_replay.py --small replays the first mini-swe-agent recording: its full-history and
    masking figures are the oracle's; veil's references are too, and its prompt stays within
    the budget at every step."""
    from veil.default_plugins.replay.formats import load_trajectory

    traj = load_trajectory(
        _recording("mini-swe-agent", "marshmallow-code__marshmallow-1343.traj.json")
    )
    out = tmp_path / "replay.json"
    proc = _run([str(BENCH / "bench_replay.py"), "--small", "--json", str(out)])
    raw = json.loads(out.read_text())
    (baselines,) = [r["result"] for r in raw["runs"] if r["mode"] is None]
    (with_veil,) = [r["result"] for r in raw["runs"] if r["mode"] is not None]
    assert [Path(f["file"]).name for f in baselines["files"]] == [Path(traj.path).name]
    full, masking = baselines["files"][0]["full"], baselines["files"][0]["masking"]
    expected_full = _oracle(traj, _full_prompt)
    assert expected_full["misses"] == expected_full["line_misses"] == 0
    assert expected_full["references"] > 0
    assert _figures(full) == expected_full
    assert _figures(masking) == _oracle(traj, lambda tr, t: _masking_prompt(tr, t, 10))
    veil = with_veil["files"][0]["veil"]
    assert veil["references"] == expected_full["references"]
    assert veil["over_budget_steps"] == 0 and veil["peak_prompt_tokens"] <= 8000
    assert veil["misses"] <= veil["line_misses"] <= veil["references"]
    # the printed table shows the same totals
    assert f"| full | {full['prompt_tokens']:,} | 1.000 |" in proc.stdout


def test_bench_frontier_small_figures(tmp_path: Path) -> None:
    """bench_frontier.py --small: the first 30 steps of one recording, veil at 4,000 and 8,000
    and the baselines over their knobs. Full history's and masking's points (N = 5 and 10) are
    the oracle's; every veil point is within its budget; the targets it prints follow from the
    figures."""
    from veil.default_plugins.replay.formats import load_trajectory

    sys.path.insert(0, str(BENCH))
    try:
        import bench_frontier
    finally:
        sys.path.remove(str(BENCH))
    traj = load_trajectory(_recording(*bench_frontier.SMALL_FILE))
    steps = bench_frontier.SMALL_STEPS
    out = tmp_path / "frontier.json"
    proc = _run([str(BENCH / "bench_frontier.py"), "--small", "--json", str(out)])
    result = json.loads(out.read_text())
    points = {p["label"]: p for p in result["points"]}
    assert set(points) == {
        "veil budget=4000",
        "veil budget=8000",
        "full",
        "masking N=5",
        "masking N=10",
        "masking-blocks G=10",
        *(
            f"{name} budget={b}"
            for name in ("recency", "recency-hysteresis", "masking-budget")
            for b in (4000, 8000)
        ),
    }
    assert result["meta"]["steps"] == {traj.path: steps}
    assert _figures(points["full"]["total"]) == _oracle(traj, _full_prompt, steps)
    for keep in (5, 10):
        expected = _oracle(traj, lambda tr, t, k=keep: _masking_prompt(tr, t, k), steps)
        assert _figures(points[f"masking N={keep}"]["total"]) == expected
    full = points["full"]["total"]
    for budget in (4000, 8000):
        veil = points[f"veil budget={budget}"]["total"]
        assert veil["over_budget_steps"] == 0 and veil["peak_prompt_tokens"] <= budget
        assert veil["references"] == full["references"]
        assert veil["misses"] <= veil["line_misses"]
        # never dearer than full: the verdict printed is the figures' (cache price 0.1 and 0.5)
        ratios = [_effective(veil, p) / _effective(full, p) for p in (0.1, 0.5)]
        verdict = "ok" if max(ratios) <= 1 else "DEARER than full history"
        line = f"veil budget={budget}: {ratios[0]:.3f} at 0.1, {ratios[1]:.3f} at 0.5: {verdict}"
        assert line in proc.stdout


def _effective(total: dict, price: float) -> float:
    """Uncached tokens + price x cached tokens (DESIGN.md "Cache")."""
    return total["prompt_tokens"] - total["cached_tokens"] + price * total["cached_tokens"]


def test_speed_halves_split_calls_by_their_blocks_check(monkeypatch) -> None:
    """bench_hooks.speed_halves: blocks of SPEED_BLOCK calls, ranked by their speed check."""
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_hooks

    monkeypatch.setattr(bench_hooks, "SPEED_BLOCK", 2)
    speed = [0.5, 0.2, 0.9, 0.3]  # faster half: blocks 1 and 3; slower: blocks 0 and 2
    totals = [1.0, 1.2, 0.4, 0.6, 2.0, 3.0, 0.5, 0.7]
    halves = bench_hooks.speed_halves(speed, totals)
    assert halves["faster"] == pytest.approx((0.25, 0.55))  # median of 0.4, 0.6, 0.5, 0.7
    assert halves["slower"] == pytest.approx((0.7, 1.6))  # median of 1.0, 1.2, 2.0, 3.0
