"""Fixtures for the memory-files plugin's tests: real memory files and a fake session (the
isolated project and environment come from veil's pytest plugin, through the root conftest)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
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


def _shared_store(project: Path) -> Any:
    """The test's shared store when it runs on PostgreSQL (``--veil-store=postgresql``), else
    None: memory files are then in its ``memory_files`` rows, not under ``.veil/memory/``."""
    if not os.environ.get("VEIL_STORE__URL"):
        return None
    from veil.testing.postgres import project_store

    return project_store(project, write_behind=False)


def _stored_memory(project: Path, name: str) -> str | None:
    """The text of memory file ``name`` (below ``.veil/memory``, ``/``-separated) where veil
    keeps it under this test's store: the database, or the file on disk; None when missing."""
    store = _shared_store(project)
    if store is None:
        path = project / ".veil" / "memory" / name
        return path.read_text(encoding="utf-8") if path.exists() else None
    from veil.core.shared_files import SharedFiles

    try:
        found = SharedFiles(store).read(name)
        return None if found is None else found.text
    finally:
        store.close()


def _place_memory(project: Path, name: str, text: str) -> None:
    """Put ``text`` as memory file ``name`` where veil reads it, as text veil did not write: a
    file on disk (a clone's, or one edited by hand), or on PostgreSQL a row written by hand
    (no provenance tag)."""
    store = _shared_store(project)
    if store is None:
        path = project / ".veil" / "memory" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    from veil.core.shared_files import FileChange, SharedFiles

    try:
        shared = SharedFiles(store)
        version = shared.versions([name]).get(name)
        assert shared.commit([FileChange(name, text, version)])
    finally:
        store.close()


@pytest.fixture
def stored_memory() -> Any:
    """``stored_memory(project, name)``: a memory file's text where veil keeps it under this
    test's store (:func:`_stored_memory`)."""
    return _stored_memory


@pytest.fixture
def place_memory() -> Any:
    """``place_memory(project, name, text)``: put text veil did not write where veil reads
    memory files under this test's store (:func:`_place_memory`)."""
    return _place_memory


@contextlib.contextmanager
def _memory_service(project: Path, agent: str = "default") -> Iterator[Any]:
    """A MemoryService on ``project``'s memory files where this test's store keeps them."""
    from veil_memoryfiles.backend import StoreFiles
    from veil_memoryfiles.service import MemoryService

    config = load_config(project)
    store = _shared_store(project)
    if store is None:
        yield MemoryService(config, agent)
        return
    from veil.core.shared_files import SharedFiles

    try:
        yield MemoryService(config, agent, StoreFiles(project, SharedFiles(store)))
    finally:
        store.close()


@pytest.fixture
def memory_service() -> Any:
    """``with memory_service(project) as svc``: a MemoryService where this test's store keeps
    memory files (:func:`_memory_service`)."""
    return _memory_service
