"""Fixtures shared by every test suite in the repository (core and plugins): each test runs in
veil's isolated environment (its own user config folder, no inherited ``VEIL_*`` variables, every
tool call allowed, offline libraries: ``veil_isolated_env`` of veil's pytest plugin) and gets an
empty project folder."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

# veil's pytest plugin (veil.testing.pytest_plugin) is registered by the entry point group
# pytest11 once veil is installed; a checkout used before (re)installing loads it here instead
# (loading it both ways would register it twice, which pytest refuses)
if not any(ep.value == "veil.testing.pytest_plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["veil.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _isolated_env(veil_isolated_env: Path) -> None:
    """No test reads the user's ~/.veil or inherits VEIL_* variables. Turn embeddings for the
    rescue of old turns are off (no test waits for the embedding model by accident); the tests
    of that path turn them on. Tests of the loop, the tools, compaction and replay run bash /
    write / edit through the loop with nobody to ask: they run with every call allowed, as
    `veil --yes` would. The default (asking) is what tests/test_permissions*.py check, after
    `default_permissions`."""


@pytest.fixture
def default_permissions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the test-wide ``VEIL_PERMISSIONS__MODE=allow``: veil's real default (ask)."""
    monkeypatch.delenv("VEIL_PERMISSIONS__MODE", raising=False)


@pytest.fixture
def project(veil_project: Path) -> Path:
    """An empty project folder (the one ``make_veil`` opens)."""
    return veil_project
