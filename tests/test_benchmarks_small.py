"""Every benchmark under bench/ runs once at its small size (so CI keeps them runnable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_benchmark_runs_small(script: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "--small"], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "|" in proc.stdout, "a benchmark prints a table"


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
