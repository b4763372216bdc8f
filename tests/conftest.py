"""Helpers of veil's own tests; the fixtures (``make_veil``, ``scripted_server``, the isolated
environment) come from veil's pytest plugin, :mod:`veil.testing.pytest_plugin`."""

from __future__ import annotations

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
