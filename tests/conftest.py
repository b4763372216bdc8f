"""Helpers of veil's own tests; the fixtures (``make_veil``, ``scripted_server``, the isolated
environment) come from veil's pytest plugin, :mod:`veil.testing.pytest_plugin`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data; skips the test when absent, fails under CI=true."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing under CI: the shared data must be present")
        pytest.skip(f"{path} not present (the shared data ships beside the repo, not in it)")
    return path


def two_step_recording(folder: Path) -> Path:
    """Write ``folder/two.traj.json``: a mini-swe-agent recording of two steps (an assistant
    message with a bash command, then its observation, twice) for ``veil replay`` tests."""
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in calc/ops.py"},
    ]
    for i in range(2):
        messages.append({"role": "assistant", "content": f"look\n\n```bash\ncat f_{i}.py\n```"})
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\nx = {i}"})
    path = folder / "two.traj.json"
    path.write_text(json.dumps({"messages": messages}))
    return path


@pytest.fixture(params=["rg", "python"])
def engine(request, monkeypatch) -> str:
    """The grep engine a coding-tools test runs on: ripgrep when installed (else skipped), then
    the Python fallback (``rg`` hidden from the tools)."""
    import shutil

    from veil.default_plugins.coding_tools import tools

    if request.param == "rg":
        if shutil.which("rg") is None:
            pytest.skip("ripgrep (rg) is not installed; the Python fallback is tested instead")
    else:
        monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    return request.param
