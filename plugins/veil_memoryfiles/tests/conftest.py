"""Fixtures for the memory-files plugin's tests: real memory files and a fake session (the
isolated project and environment come from veil's pytest plugin, through the root conftest)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from veil.core.settings import Config, load_config

SHARED_DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


@pytest.fixture
def memfiles_dir() -> Path:
    """``../shared/data/memfiles`` (real memory files); skipped when absent, failed on CI."""
    folder = SHARED_DATA / "memfiles"
    if not folder.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{folder} is missing on CI")
        pytest.skip(f"{folder} is absent (shared reference data not checked out)")
    return folder


def write_settings(root: Path, data: dict[str, Any]) -> None:
    """Write ``.veil/settings.json``."""
    (root / ".veil").mkdir(exist_ok=True)
    (root / ".veil" / "settings.json").write_text(json.dumps(data), encoding="utf-8")


def write_agent(root: Path, name: str, data: dict[str, Any]) -> None:
    """Write ``.veil/agents/<name>/agent.json``."""
    folder = root / ".veil" / "agents" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.json").write_text(json.dumps(data), encoding="utf-8")


def fake_session(
    config: Config, agent: str = "default", context_window: int = 8192
) -> SimpleNamespace:
    """The few Session attributes the plugin uses."""
    return SimpleNamespace(
        id="sess_test",
        agent=agent,
        cwd=config.project_dir,
        config=config,
        context_window=context_window,
        state={},
        resumed=False,
    )


@pytest.fixture
def helpers() -> SimpleNamespace:
    """write_settings, write_agent, fake_session and load_config for the tests."""
    return SimpleNamespace(
        write_settings=write_settings,
        write_agent=write_agent,
        fake_session=fake_session,
        load_config=load_config,
    )
