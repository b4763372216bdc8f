"""The frontier sweep (veil/default_plugins/replay/frontier.py, bench/bench_frontier.py): its
points, its figures against the runner's, the baseline cache, the targets it checks and the
plots it draws."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.errors import BadRequest
from veil.default_plugins.replay import frontier
from veil.default_plugins.replay.formats import load_trajectory
from veil.default_plugins.replay.runner import (
    ObservationMasking,
    RecencyHysteresis,
    RecencyTruncation,
    replay,
    run_policies,
)

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _write(path: Path, steps: int) -> Path:
    """A mini-swe-agent recording: each step names what the output of five steps before
    showed (masking that keeps fewer than 5 outputs misses it)."""
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i in range(steps):
        messages.append(
            {"role": "assistant", "content": f"open mod_{i - 5}.py at helper_{i - 5}_7"}
        )
        body = "\n".join(f"line {k} of mod_{i}.py calls helper_{i}_{k}" for k in range(30))
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\n{body}"})
    messages.append({"role": "assistant", "content": f"done with helper_{steps - 1}_3"})
    path.write_text(json.dumps({"messages": messages, "info": {}}), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    return [str(_write(tmp_path / f"rec_{n}.traj.json", n)) for n in (14, 22)]


def test_points_cover_each_baseline_over_its_knob():
    points = frontier.baseline_points([4000, 8000], [3, 10], [5])
    assert [p.label for p in points] == [
        "full",
        "masking N=3",
        "masking N=10",
        "masking-blocks G=5",
        "recency budget=4000",
        "recency budget=8000",
        "recency-hysteresis budget=4000",
        "recency-hysteresis budget=8000",
        "masking-budget budget=4000",
        "masking-budget budget=8000",
    ]
    for bad in ([], [0], [-5], [2.5]):
        with pytest.raises(BadRequest, match="budgets"):
            frontier.baseline_points(bad)


def test_sweep_figures_are_the_runners(files):
    result = frontier.sweep(files, budgets=[600, 1200], keeps=[3, 10], blocks=[5], with_veil=False)
    points = {p["label"]: p for p in result["points"]}
    assert result["meta"]["steps"] == {files[0]: 15, files[1]: 23}
    for path in files:
        traj = load_trajectory(path)
        for label, policy, budget in (
            ("masking N=3", ObservationMasking(keep=3), 8000),
            ("recency budget=600", RecencyTruncation(600, _count()), 600),
            ("recency-hysteresis budget=1200", RecencyHysteresis(1200, _count()), 1200),
        ):
            expected = run_policies(traj, [policy], budget)[policy.name].to_json()
            assert points[label]["files"][path] == expected, label
    # a default point is the plain replay's baseline (keep 10; the unbudgeted ones' steps over
    # the budget are counted over the reference budget, 8,000)
    trajs = [load_trajectory(p) for p in files]
    plain = replay(trajs, budget=8000)
    assert points["masking N=10"]["total"] == {"steps": 38, **plain["total"]["masking"]}
    plain = replay(trajs, budget=600)
    assert points["recency budget=600"]["total"] == {"steps": 38, **plain["total"]["recency"]}
    # the masking point misses fewer the more it keeps, and recency the larger its budget
    assert points["masking N=10"]["total"]["misses"] < points["masking N=3"]["total"]["misses"]
    assert points["full"]["total"]["misses"] == points["full"]["total"]["line_misses"] == 0


def _count():
    from veil.default_plugins.replay.counting import TokenCounter

    return TokenCounter()


def test_baselines_are_cached_by_file_and_code(files, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                           cache_folder=cache)  # fmt: skip
    assert len(list(cache.glob("*.json"))) == 2  # one entry per recording

    def replayed(*args, **kwargs):
        raise AssertionError("a cached point was replayed")

    with monkeypatch.context() as patched:
        patched.setattr("veil.default_plugins.replay.runner.run_policies", replayed)
        again = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                               cache_folder=cache)  # fmt: skip
    assert again["points"] == first["points"]
    # a damaged entry is replayed again; a changed recording is another entry
    entry = sorted(cache.glob("*.json"))[0]
    entry.write_text("{not json", encoding="utf-8")
    assert frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                          cache_folder=cache)["points"] == first["points"]  # fmt: skip
    _write(Path(files[0]), 15)
    frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                   cache_folder=cache)  # fmt: skip
    assert len(list(cache.glob("*.json"))) == 3
    # another version of the measure's code is another entry too
    monkeypatch.setattr(frontier, "code_version", lambda: "0" * 16)
    frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                   cache_folder=cache)  # fmt: skip
    assert len(list(cache.glob("*.json"))) == 5


def test_jobs_in_processes_give_the_same_figures(files):
    one = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False)
    two = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False, jobs=2)
    assert two["points"] == one["points"]
    with pytest.raises(BadRequest, match="jobs"):
        frontier.sweep(files, jobs=0, with_veil=False)


def _point(policy, knob, value, prompt, cached, misses, line_misses):
    label = policy if value is None else f"{policy} {knob}={value}"
    total = {
        "steps": 10,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "misses": misses,
        "line_misses": line_misses,
        "over_budget_steps": 0,
    }
    return {"policy": policy, "knob": knob, "value": value, "label": label, "total": total}


def _synthetic():
    # effective at 0.1 / 0.5 (uncached + price x cached), by hand:
    # full 1000 (900 cached): 190 / 550. veil 4k: 300 (0 cached): 300 / 300.
    # veil 8k: 500 (400 cached): 140 / 300. masking N=3: 400 (200 cached): 220 / 300.
    # recency 4k: 200 (100 cached): 110 / 150.
    return {
        "meta": {"files": ["a"], "steps": {"a": 10}, "reference_budget": 8000},
        "points": [
            _point("veil", "budget", 4000, 300, 0, 10, 20),
            _point("veil", "budget", 8000, 500, 400, 4, 9),
            _point("full", "", None, 1000, 900, 0, 0),
            _point("masking", "N", 3, 400, 200, 5, 12),
            _point("recency", "budget", 4000, 200, 100, 20, 20),
        ],
    }


def test_dominance_and_never_dearer_by_hand():
    result = _synthetic()
    rows = {r["label"]: r for r in frontier.ratios(result)}
    assert rows["veil budget=4000"]["ratio"] == pytest.approx({0.1: 300 / 190, 0.5: 300 / 550})
    assert rows["masking N=3"]["ratio"] == pytest.approx({0.1: 220 / 190, 0.5: 300 / 550})
    left = frontier.dominance(result)
    # masking N=3: veil 8k costs 140 <= 220 at 0.1 and 300 <= 300 at 0.5 with 4 < 5 and 9 < 12
    # misses: dominated at both prices. recency 4k: the cheapest at both prices (110, 150):
    # nothing dominates it.
    assert [r["label"] for r in left[0.1]] == ["recency budget=4000"]
    assert [r["label"] for r in left[0.5]] == ["recency budget=4000"]
    # fewer on one measure only is not enough: recency with 3 misses but 21 line misses
    result["points"][4]["total"].update(prompt_tokens=900, misses=3, line_misses=21)
    assert [r["label"] for r in frontier.dominance(result)[0.1]] == ["recency budget=4000"]
    dearer = {r["label"]: r["ok"] for r in frontier.never_dearer(result)}
    assert dearer == {"veil budget=4000": False, "veil budget=8000": True}  # 300 > 190 at 0.1
    text = frontier.render_targets(result)
    assert "never dearer than full: veil budget=4000: 1.579 at 0.1, 0.545 at 0.5: DEARER" in text
    assert "veil budget=8000: 0.737 at 0.1, 0.545 at 0.5: ok" in text
    table = frontier.render_table(result)
    assert "| masking | N=3 | 1.158 | 0.545 | 5 | 12 | 0* | 40 | 50.0% |" in table
    assert table.index("| veil |") < table.index("| full |") < table.index("| masking |")


def test_a_sweep_without_full_history_cannot_be_priced():
    result = _synthetic()
    result["points"] = [p for p in result["points"] if p["policy"] != "full"]
    with pytest.raises(BadRequest, match="full-history"):
        frontier.ratios(result)


def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    paths = frontier.plot_frontier(_synthetic(), tmp_path / "f")
    assert [p.name for p in paths] == ["f-misses.png", "f-line-misses.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_script_sweeps_plots_and_redraws(files, tmp_path):
    data = tmp_path / "data"
    (data / "one").mkdir(parents=True)
    for f in files:
        Path(f).rename(data / "one" / Path(f).name)
    out, prefix = tmp_path / "f.json", tmp_path / "plot"
    args = [sys.executable, str(BENCH / "bench_frontier.py"), "--data", str(data)]
    args += ["--folders", "one", "--no-veil", "--budgets", "600,1200", "--keeps", "3"]
    args += ["--blocks", "5", "--no-cache", "--json", str(out), "--plot", str(prefix)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| masking | N=3 |" in proc.stdout
    assert "| recency-hysteresis | budget=1,200 |" in proc.stdout
    result = json.loads(out.read_text())
    assert len(result["meta"]["files"]) == 2
    assert Path(f"{prefix}-misses.png").is_file() and Path(f"{prefix}-line-misses.png").is_file()
    redraw = subprocess.run(
        [sys.executable, str(BENCH / "bench_frontier.py"), "--plot-only", str(out),
         "--plot", str(tmp_path / "again")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert redraw.returncode == 0, redraw.stderr
    assert frontier.render_table(result) in redraw.stdout
    assert Path(f"{tmp_path / 'again'}-line-misses.png").is_file()
    # bad input: one line naming the option or the file, no traceback
    for bad, says in (
        (["--budgets", "4000,x"], "--budgets"),
        (["--plot-only", str(tmp_path / "missing.json")], "missing.json"),
    ):
        proc = subprocess.run(
            [sys.executable, str(BENCH / "bench_frontier.py"), *bad],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode != 0 and says in proc.stderr and "Traceback" not in proc.stderr


def test_veil_replay_sweep_from_the_command_line(tmp_path):
    """``veil replay --sweep`` replays veil too (a real session per file and budget)."""
    recording = _write(tmp_path / "rec.traj.json", 8)
    project = tmp_path / "project"
    project.mkdir()
    prefix = tmp_path / "sweep.png"
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "replay", str(recording),
         "--sweep", "--budgets", "1500", "--plot", str(prefix)],
        capture_output=True, text=True, timeout=600, cwd=project, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| veil | budget=1,500 |" in proc.stdout
    assert "| masking-budget | budget=1,500 |" in proc.stdout
    assert "never dearer than full: veil budget=1500:" in proc.stdout
    assert (tmp_path / "sweep-misses.png").is_file()
    assert (tmp_path / "sweep-line-misses.png").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "veil.cli", "replay", str(recording), "--sweep", "--budgets", "0"],
        capture_output=True, text=True, timeout=600, cwd=project, env=_env(),
    )  # fmt: skip

    assert bad.returncode != 0 and "budgets" in bad.stderr and "Traceback" not in bad.stderr


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return env


def test_an_earlier_sweep_of_veil_is_drawn_beside(tmp_path):
    pytest.importorskip("matplotlib")
    before = _synthetic()
    paths = frontier.plot_frontier(_synthetic(), tmp_path / "f", compare=[("veil before", before)])
    assert all(p.is_file() for p in paths)
    before["meta"]["steps"] = {"b": 10}
    with pytest.raises(BadRequest, match="other files"):
        frontier.plot_frontier(_synthetic(), tmp_path / "g", compare=[("veil before", before)])


def test_a_stopped_sweep_resumes_from_its_checkpoint(files, tmp_path, monkeypatch):
    kept = tmp_path / "kept"
    first = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                           checkpoint=kept)  # fmt: skip
    assert len(list(kept.glob("baselines-*.json"))) == 2  # one job per recording

    def replayed(*args, **kwargs):
        raise AssertionError("a finished job was replayed")

    with monkeypatch.context() as patched:
        patched.setattr("veil.default_plugins.replay.runner.run_policies", replayed)
        again = frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                               checkpoint=kept)  # fmt: skip
    assert again["points"] == first["points"]
    # a job that did not finish (its file is missing) is replayed, the other is not
    sorted(kept.glob("baselines-*.json"))[0].unlink()
    calls = []
    real = frontier.measure_baselines
    monkeypatch.setattr(
        frontier, "measure_baselines", lambda p, *a, **k: calls.append(p) or real(p, *a, **k)
    )
    assert frontier.sweep(files, budgets=[600], keeps=[3], blocks=[5], with_veil=False,
                          checkpoint=kept)["points"] == first["points"]  # fmt: skip
    assert len(calls) == 1, calls
    # other options are other jobs
    frontier.sweep(files, budgets=[600], keeps=[4], blocks=[5], with_veil=False, checkpoint=kept)
    assert len(list(kept.glob("baselines-*.json"))) == 4


def test_files_of_the_subsets_come_first(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_frontier

    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        for i in range(10):  # f00 ... f09, f0i of i + 1 bytes
            (tmp_path / folder / f"f{i:02}.traj.json").write_text("." * (i + 1))
    names = [f"{p.parent.name}/{p.name[:3]}" for p in
             bench_frontier.pick_files(tmp_path, ["x", "y"], None, 8)]  # fmt: skip
    # subset B (from the 5th, every 8th: f04) then A (f00, f08), each longest first, then the rest
    assert names[:6] == ["x/f04", "y/f04", "x/f08", "y/f08", "x/f00", "y/f00"]
    assert sorted(names) == sorted(f"{d}/f{i:02}" for d in "xy" for i in range(10))
    assert len(set(names)) == 20
    subset = bench_frontier.pick_files(tmp_path, ["x", "y"], 0, 8)
    assert [f"{p.parent.name}/{p.name[:3]}" for p in subset] == ["x/f00", "x/f08", "y/f00", "y/f08"]
