"""Fixtures shared by every test suite in the repository (core and plugins): each test gets its
own user config folder and no inherited ``VEIL_*`` variables, and an empty project folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads the user's ~/.veil or inherits VEIL_* variables. Turn embeddings for the
    rescue of old turns are off (no test waits for the embedding model by accident); the tests
    of that path turn them on."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path_factory.mktemp("veil_home")))
    for name in list(os.environ):
        if name.startswith("VEIL_") and name != "VEIL_HOME":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "off")
    # Tests of the loop, the tools, compaction and replay run bash / write / edit through the
    # loop with nobody to ask: they run with every call allowed, as `veil --yes` would. The
    # default (asking) is what tests/test_permissions*.py check, after `default_permissions`.
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "allow")


@pytest.fixture
def default_permissions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the test-wide ``VEIL_PERMISSIONS__MODE=allow``: veil's real default (ask)."""
    monkeypatch.delenv("VEIL_PERMISSIONS__MODE", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder."""
    root = tmp_path / "project"
    root.mkdir()
    return root
