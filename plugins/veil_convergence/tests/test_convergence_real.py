"""Fingerprints and the convergence report on the recorded sessions in ../shared/data.

The groups below were picked by reading the observations (see make_pairs.py ``show``): each
``SAME`` group is one failure repeated across steps of one session, each ``DISTINCT`` list holds
failures that differ. Run with ``-s`` to see the per-session table of distinct fingerprints.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest
from veil_convergence.fingerprint import fingerprint
from veil_convergence.replay import convergence_report

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
TRAJ = DATA / "trajectories"

if not TRAJ.is_dir():
    if os.environ.get("CI") == "true":
        pytest.fail(f"recorded sessions missing at {TRAJ}", pytrace=False)
    pytest.skip(f"recorded sessions not found at {TRAJ} (../shared/data)", allow_module_level=True)

_spec = importlib.util.spec_from_file_location(
    "_convergence_make_pairs", Path(__file__).with_name("make_pairs.py")
)
assert _spec and _spec.loader
make_pairs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_pairs)

M = "mini-swe-agent/"
SAME: dict[str, list[int]] = {
    # wrapt cannot import inspect.formatargspec, over and over
    M + "pylint-dev__astroid-1333.traj.json": [45, 107, 155, 231, 251, 255, 273],
    # sqlfluff drops the second semicolon: plain, grep-filtered and printed tracebacks
    M + "sqlfluff__sqlfluff-1517.traj.json": [13, 39, 109, 131, 143, 149, 185],
    # np.Inf in pvlib/pvsystem.py, before and after the agent edited the file
    M + "pvlib__pvlib-python-1854.traj.json": [39, 143],
    # the same malformed patch file, applied three times
    M + "sqlfluff__sqlfluff-1763.traj.json": [85, 121, 125],
    # the pyproject testpaths error stops pytest
    M + "pvlib__pvlib-python-1707.traj.json": [139],
}
SAME_ASTROID_BUILD = [167, 287, 291, 311, 339]  # astroid-1333, temporary directory differs
DISTINCT: dict[str, list[int]] = {
    # numpy, pytz, scipy missing; np.Inf in singlediode.py then in pvsystem.py
    M + "pvlib__pvlib-python-1072.traj.json": [19, 25, 29, 33, 41],
    M + "pvlib__pvlib-python-1154.traj.json": [21, 25, 29, 33, 41, 59, 79, 123, 135],
    M + "sqlfluff__sqlfluff-1517.traj.json": [9, 13, 65, 67, 81, 93, 145, 153, 157],
}
# hand count of distinct failures seen while reading a session: a lower bound for the report
AT_LEAST = {
    M + "pvlib__pvlib-python-1072.traj.json": 5,
    M + "pvlib__pvlib-python-1154.traj.json": 9,
    M + "sqlfluff__sqlfluff-1517.traj.json": 9,
    M + "pylint-dev__astroid-1333.traj.json": 6,
}
_ERRORISH = re.compile(r"Traceback|Error|FAILED|not found|error:|timed out|ERRORS:")


def _observations(name: str) -> dict[int, dict[str, Any]]:
    return {obs["index"]: obs for obs in make_pairs.iter_observations(TRAJ / name)}


def _fp(obs: dict[str, Any]) -> str | None:
    return fingerprint(obs["text"], command=obs["action"])


@pytest.mark.parametrize("name", sorted(SAME))
def test_same_failure_across_steps_has_one_fingerprint(name: str) -> None:
    obs = _observations(name)
    fps = {_fp(obs[i]) for i in SAME[name]}
    assert None not in fps and len(fps) == 1


def test_same_build_error_with_drifting_tmp_dirs() -> None:
    obs = _observations(M + "pylint-dev__astroid-1333.traj.json")
    texts = [obs[i]["text"] for i in SAME_ASTROID_BUILD]
    assert len({re.search(r"/tmp/tmp\w+", t).group(0) for t in texts}) == len(texts)
    assert len({fingerprint(t) for t in texts}) == 1


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_different_failures_have_different_fingerprints(name: str) -> None:
    obs = _observations(name)
    fps = [_fp(obs[i]) for i in DISTINCT[name]]
    assert None not in fps and len(set(fps)) == len(fps)


def _looks_like_an_error(text: str) -> bool:
    """A generous test, independent of the reader: error words or a non-zero return code."""
    code = re.search(r"<returncode>(-?\d+)</returncode>", text)
    return bool(_ERRORISH.search(text)) or (code is not None and code.group(1) != "0")


def _report_all() -> dict[str, dict[str, Any]]:
    reports = {}
    for path in make_pairs.trajectory_files():
        obs = make_pairs.iter_observations(path)
        triples = [(o["step"], o["action"], o["text"]) for o in obs]
        reports[f"{path.parent.name}/{path.name}"] = {
            "report": convergence_report(triples),
            "steps": len(obs),
            "errorish": sum(1 for o in obs if _looks_like_an_error(o["text"])),
        }
    return reports


def test_convergence_report_on_every_session(capsys: pytest.CaptureFixture[str]) -> None:
    reports = _report_all()
    # shared/data/README.md: mini-swe-agent 23 + rerun 23 + lite 23 + reasoner 15, SWE-agent 4,
    # OpenHands 2
    assert len(reports) == 23 + 23 + 23 + 15 + 4 + 2
    rows = []
    for name, entry in reports.items():
        report, steps = entry["report"], entry["steps"]
        assert set(report) == {"fingerprints", "levels"}
        # never more fingerprints than observations that look like errors at all
        assert 0 <= report["fingerprints"] <= entry["errorish"]
        assert report["fingerprints"] >= AT_LEAST.get(name, 0)
        for level in report["levels"]:
            assert set(level) == {"step", "level", "fingerprint"}
            assert 1 <= level["step"] <= steps and level["level"] in (1, 2, 3)
        fired = ",".join(f"{lv['step']}:L{lv['level']}" for lv in report["levels"]) or "-"
        rows.append(
            f"{name:<58} steps={steps:<4} fingerprints={report['fingerprints']:<3} levels={fired}"
        )
    with capsys.disabled():
        print("\nconvergence per recorded session\n" + "\n".join(rows))
    assert _report_all() == reports  # deterministic
    # sessions without any failing output produce no fingerprint
    assert reports["swe-agent/sweagent_gpt4_test-repo-i1.traj"]["report"] == {
        "fingerprints": 0,
        "levels": [],
    }


def test_report_rejects_malformed_observations() -> None:
    with pytest.raises(ValueError, match=r"observations\[1\]"):
        convergence_report([(1, "ls", "a"), ("2", "ls", "b")])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "name", ["swe-agent/sweagent_gpt4_pydicom-1458.traj", M + "pydicom__pydicom-1256.traj.json"]
)
def test_veil_replay_reports_the_same_convergence(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``veil replay`` (the core's runner, this plugin loaded from its entry point) adds a
    ``convergence`` object equal to :func:`convergence_report` over the same observations."""
    from veil.default_plugins.replay.report import run_replay

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    result = run_replay([str(TRAJ / name)], 20000, project_dir=tmp_path)
    obs = make_pairs.iter_observations(TRAJ / name)
    expected = convergence_report([(o["step"], o["action"], o["text"]) for o in obs])
    assert result["files"][0]["convergence"] == expected
    assert expected["fingerprints"] == 3  # pixel-data AttributeError; two rejected edits
