"""What the README and the documentation show a new user is what veil accepts (issue 30: the
auth.json example had no contextWindow, so every command warned about it, and the REPL banner
named another file for the model than the README did). The README's first session and
docs/models.md ("The model") both show the example (issue 33 moved the reference to docs/)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MODELS_PAGE = ROOT / "docs" / "models.md"


def _auth_example(page: Path = README) -> dict:
    """The first JSON block with ``providers`` of ``page``: its auth.json example."""
    blocks = re.findall(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    return next(json.loads(b) for b in blocks if '"providers"' in b)


@pytest.mark.parametrize("page", [README, MODELS_PAGE], ids=["README", "docs/models.md"])
def test_the_auth_json_example_is_valid_and_gives_every_role_a_window(page):
    from veil.core.settings import AuthConfig

    example = _auth_example(page)
    auth = AuthConfig.model_validate(example)
    assert auth.routing.default in auth.providers
    roles = {"main": auth.models.main, "compact": auth.models.compact}
    assert all(role is not None and role.model for role in roles.values())
    assert all(role.context_window for role in roles.values()), roles


def test_the_banner_names_the_file_the_readme_puts_the_model_in(tmp_path, monkeypatch):
    """The bundled model's notice (shown in the REPL's banner) says to name the model in
    auth.json, beside the provider: where the README's example has it."""
    veil_bundled = pytest.importorskip("veil_bundled")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    assert "models" in _auth_example(README) and "models" in _auth_example(MODELS_PAGE)
    notice = veil_bundled.notice()
    assert f"configure a provider and its model in {tmp_path / 'auth.json'}" in notice
    assert "models.main" in notice and "settings.json" not in notice


def _json_blocks(page: Path) -> list[dict]:
    return [
        json.loads(b)
        for b in re.findall(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    ]


def test_the_configuration_page_examples_load_as_written(tmp_path, veil_isolated_env):
    """docs/configuration.md's settings.json and agent.json examples, written into a project,
    load through veil's own loader with the values the page shows."""
    from veil.core.settings import load_config

    settings, agent = _json_blocks(ROOT / "docs" / "configuration.md")[:2]
    assert "compaction" in settings and "defaultCompaction" in agent
    (tmp_path / ".veil" / "agents" / "reviewer").mkdir(parents=True)
    (tmp_path / ".veil" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    agent_file = tmp_path / ".veil" / "agents" / "reviewer" / "agent.json"
    agent_file.write_text(json.dumps(agent), encoding="utf-8")

    config = load_config(tmp_path)
    assert config.settings.compaction.threshold == 0.9
    assert config.settings.compaction.keep_recent_turns == 4
    assert config.settings.memory.max_lines == 300
    assert config.settings.plugins.disable == ["veil_convergence"]
    assert config.settings.loop.max_iterations == 40
    reviewer = config.agent("reviewer")
    assert reviewer.model == "anthropic/claude-sonnet-4"
    assert reviewer.memory.max_lines == 200
    assert reviewer.default_compaction.auto_threshold == 80
    assert reviewer.default_compaction.compaction_count == 50
    assert reviewer.default_compaction.custom_instructions == "Keep every file path."
