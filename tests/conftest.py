"""Shared fixtures: an isolated project folder, user config folder and plugin manager per test."""

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


@pytest.fixture
def make_veil(project: Path):
    """Factory: ``make_veil(replies, plugins=(), settings=None)`` opens an isolated Veil (no entry
    points) on ``project`` with a :class:`ScriptedModel` as the main model."""
    from veil.core.app import open_veil
    from veil.core.llm import LLM
    from veil.core.settings import load_config
    from veil.testing.scripted_model import ScriptedModel

    opened = []

    def factory(replies=(), plugins=(), settings=None, context_window=8192, **kwargs):
        if settings is not None:
            import json

            (project / ".veil").mkdir(exist_ok=True)
            (project / ".veil" / "settings.json").write_text(json.dumps(settings))
        config = load_config(project)
        model = ScriptedModel(list(replies), context_window=context_window)
        veil = open_veil(
            project,
            config=config,
            llm=LLM(config, models={"main": model, "compact": model}),
            use_entry_points=kwargs.pop("use_entry_points", False),
            extra_plugins=tuple(plugins),
            **kwargs,
        )
        veil.model = model
        opened.append(veil)
        return veil

    yield factory
    for v in opened:
        v.close()
