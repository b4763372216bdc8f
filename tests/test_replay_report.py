"""``veil replay --report DIR`` (issue 31 item 4): the HTML page and the PNG, the dollars at
``--price-per-mtok``, the terminal's totals and path, the progress bar on a terminal and its
silence under ``--json``; and that ``veil replay`` gives the same figures on every run of the
agent-log fixtures.

Expected values are recomputed here from the JSON result (``effective_tokens`` x price /
1,000,000), not read back from the page's own code."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veil.default_plugins.replay.html_report import (
    format_dollars,
    render_page,
    step_costs,
    write_report,
)
from veil.default_plugins.replay.report import run_replay
from veil.default_plugins.replay.sessions import pi_project_folder

LOGS = Path(__file__).parent / "data" / "agent_logs"
FIXTURES = [
    *sorted((LOGS / "claude-code").glob("*.jsonl")),
    *sorted((LOGS / "codex").glob("**/*.jsonl")),
    *sorted((LOGS / "pi").glob("*.jsonl")),
    LOGS / "openhands-v1" / "events",
]
BASELINES = "full,masking,recency"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        HOME=str(tmp_path / "home"),
        VEIL_HOME=str(tmp_path / "veil-home"),
        HF_HUB_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        **extra,
    )
    return env


def _veil(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    project = tmp_path / "proj"
    project.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "replay", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, **env),
        cwd=project,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


@pytest.fixture(scope="module")
def baseline_result() -> dict:
    return run_replay(
        [str(p) for p in FIXTURES],
        400,
        policies=tuple(BASELINES.split(",")),
        per_step=True,
        price_per_mtok=3.0,
    )


def test_report_page_holds_the_totals_dollars_sessions_and_charts(tmp_path, baseline_result):
    written = write_report(baseline_result, tmp_path / "report", price_per_mtok=3.0)
    assert written.page == tmp_path / "report" / "index.html"
    assert written.chart == tmp_path / "report" / "replay.png"
    assert written.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = written.page.read_text()
    total = baseline_result["total"]
    for name in BASELINES.split(","):
        eff = total[name]["effective_tokens"]
        money = eff * 3.0 / 1_000_000
        row = page.split(f'<tr data-policy="{name}">', 1)[1].split("</tr>", 1)[0]
        assert f'data-key="effective_tokens">{eff:,.0f}<' in row
        assert f'data-key="dollars">{format_dollars(money)}<' in row
        assert f'data-key="misses">{total[name]["misses"]:,}<' in row
        assert f'data-key="prompt_tokens">{total[name]["prompt_tokens"]:,}<' in row
    # a section and a chart per session, one line per policy
    files = baseline_result["files"]
    assert page.count('<section class="session"') == len(files) == len(FIXTURES)
    assert page.count("<svg") == len(files)
    assert page.count("<polyline") == len(files) * 3
    assert '<img id="chart-png" src="replay.png"' in page
    # what the readers skipped is said per session
    assert "unknown record types: future-thing, line not JSON" in page
    assert "tool calls without a result: t5" in page


def test_without_matplotlib_the_page_is_written_without_the_png(
    tmp_path, baseline_result, monkeypatch
):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    written = write_report(baseline_result, tmp_path / "r", price_per_mtok=None)
    assert written.chart is None and not (tmp_path / "r" / "replay.png").exists()
    page = written.page.read_text()
    assert "No PNG: it needs matplotlib" in page and "<img" not in page
    assert page.count("<svg") == len(baseline_result["files"])  # the page's own charts stay


def test_step_costs_are_uncached_plus_cache_price_times_cached():
    policy = {
        "per_step": [
            {"prompt_tokens": 100, "cached_tokens": 0, "misses": 0},
            {"prompt_tokens": 150, "cached_tokens": 100, "misses": 1},
        ]
    }
    assert step_costs(policy, 0.1) == [100.0, 50 + 10.0]


def test_values_from_recordings_are_escaped(tmp_path, baseline_result):
    hostile = tmp_path / '<img src=x onerror="alert(1)">.jsonl'
    shutil.copy(FIXTURES[0], hostile)
    result = run_replay([str(hostile)], 400, policies=("full",), per_step=True)
    page = render_page(result, None, None)
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;.jsonl" in page
    assert "No PNG" in page and "no dollars" in page


def test_cli_report_prints_totals_and_the_path_and_dollars(tmp_path):
    out = tmp_path / "out"
    proc = _veil(
        tmp_path,
        *map(str, FIXTURES[:3]),
        "--policies",
        BASELINES,
        "--budget",
        "400",
        "--report",
        str(out),
        "--price-per-mtok",
        "3",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"report written to {out / 'index.html'}" in proc.stdout
    assert (out / "index.html").is_file() and (out / "replay.png").is_file()
    assert "dollars" in proc.stdout.splitlines()[0]
    assert "unknown record types: future-thing, line not JSON" in proc.stdout
    # the same figures as --json gives
    data = json.loads(
        _veil(
            tmp_path, *map(str, FIXTURES[:3]), "--policies", BASELINES, "--budget", "400", "--json"
        ).stdout
    )
    full = data["total"]["full"]["effective_tokens"]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("full "))
    assert f"{full:,.0f}" in row and format_dollars(full * 3 / 1_000_000) in row
    assert data["price_per_mtok"] is None
    assert data["files"][0]["records"]["skipped"]["other branch"] == 2
    assert "recorded_prompt_tokens" not in data["files"][0]["records"]  # --per-step only


def test_progress_bar_on_a_terminal_and_silence_under_json(tmp_path):
    args = [str(FIXTURES[0]), "--policies", "full", "--budget", "400"]
    project = tmp_path / "proj"
    project.mkdir()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "replay", *args],
        stdout=subprocess.PIPE,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=_env(tmp_path, COLUMNS="100"),
        cwd=project,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    stdout = proc.communicate(timeout=60)[0]
    os.close(leader)
    assert proc.returncode == 0
    text = seen.decode("utf-8", "replace")
    assert "reading sessions" in text or "replaying steps" in text
    assert b"policy" in stdout  # the table still goes to stdout
    quiet = _veil(tmp_path, *args, "--json")
    assert quiet.returncode == 0 and quiet.stderr == ""
    json.loads(quiet.stdout)


def test_from_finds_the_project_sessions_and_needs_files_or_an_agent(tmp_path):
    project = (tmp_path / "proj").resolve()
    project.mkdir()
    sessions = tmp_path / "home" / ".pi" / "agent" / "sessions" / pi_project_folder(str(project))
    shutil.copytree(LOGS / "pi", sessions)
    proc = _veil(
        tmp_path, "--from", "pi", "--project", str(project), "--policies", "full", "--json"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = json.loads(proc.stdout)["files"]
    assert [Path(f["file"]).name for f in files] == sorted(p.name for p in sessions.iterdir())
    assert {f["format"] for f in files} == {"pi"}
    missing = _veil(tmp_path, "--from", "codex", "--policies", "full")
    assert missing.returncode == 1 and "--from codex: no session of" in missing.stderr
    assert "Traceback" not in missing.stderr
    nothing = _veil(tmp_path, "--policies", "full")
    assert nothing.returncode == 2
    assert "give recordings to replay (FILES) or --from AGENT" in nothing.stderr


def test_every_fixture_gives_the_same_figures_on_every_run(tmp_path):
    """All policies, veil included, twice, each in its own process."""
    runs = []
    for k in range(2):
        proc = _veil(tmp_path / f"run{k}", *map(str, FIXTURES), "--budget", "400", "--per-step")
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout))
    assert runs[0] == runs[1]
    assert {f["format"] for f in runs[0]["files"]} == {"claude-code", "codex", "pi", "openhands-v1"}
    assert all("veil" in f for f in runs[0]["files"])
