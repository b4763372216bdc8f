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
