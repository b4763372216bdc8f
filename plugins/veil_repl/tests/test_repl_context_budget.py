"""``/context`` says which budget the kept messages get and where it comes from (issue 30):
``context.budgetTokens``, else ``context.targetTokens`` (veil_fsrs' eviction aim), else the
window. The real ``veil`` REPL in a pseudo-terminal, a provider configured (the scripted
server), each source set in the user's settings. Expected figures by hand: a 64,000-token window
less the 1,024 completion reserve (``loop.completionReserve``) leaves 62,976; the full-compaction
trigger with the context layer on is 1.0 x the window, so it does not cap."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from veil.testing.scripted_server import ScriptedOpenAIServer

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("veil_fsrs", reason="the default scorer and eviction plugin")

START_LIMIT_S = 180.0


def _context_output(tmp_path: Path, settings: dict) -> str:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "settings.json").write_text(json.dumps(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(VEIL_HOME=str(home), TERM="dumb", LITELLM_LOCAL_MODEL_COST_MAP="True")
    with ScriptedOpenAIServer(default="hello") as server:
        auth = {
            "providers": {"local": server.provider()},
            "models": {"main": {"model": "gpt-4o-mini", "contextWindow": 64000}},
        }
        (home / "auth.json").write_text(json.dumps(auth))
        veil = Path(sys.executable).parent / "veil"
        # wide enough that no line of the summary wraps; the matches are short anyway
        child = pexpect.spawn(
            str(veil), cwd=str(project), env=env, encoding="utf-8", dimensions=(50, 400)
        )
        try:
            child.expect("› ", timeout=START_LIMIT_S)
            child.send("/context\r")
            child.expect("items: live", timeout=START_LIMIT_S)
            child.expect("› ", timeout=START_LIMIT_S)
            shown = child.before
            child.send("/exit\r")
            child.expect(pexpect.EOF, timeout=30)
        finally:
            if child.isalive():
                child.kill(9)
            child.close(force=True)
    [line] = [x for x in re.split(r"[\r\n]+", shown) if x.startswith("budget: ")]
    return line


def test_context_shows_the_budget_setting(tmp_path):
    line = _context_output(tmp_path, {"context": {"budgetTokens": 20000}})
    assert line.startswith("budget: 20,000 tokens (context.budgetTokens 20,000)"), line


def test_context_shows_the_eviction_target_by_default(tmp_path):
    line = _context_output(tmp_path, {})
    assert line.startswith("budget: 8,000 tokens (context.targetTokens"), line
    assert "up to 62,976" in line and "context window 64,000 less 1,024" in line, line


def test_context_shows_the_window_with_no_budget_nor_target(tmp_path):
    line = _context_output(tmp_path, {"context": {"targetTokens": None}})
    assert line.startswith("budget: up to 62,976 tokens (the window: context window 64,000"), line
    assert "context.budgetTokens unset" in line, line
