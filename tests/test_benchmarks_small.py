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
