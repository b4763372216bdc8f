"""The plugin examples of docs/writing-a-plugin.md run as written (issue 33: the documentation
moved to docs/; an example that no longer loads, or that does something else than the page
says, fails here). Each example is loaded as a module from the page's Python block and driven
through a real Veil with the scripted model."""

from __future__ import annotations

import re
import types
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "writing-a-plugin.md"


def _example(marker: str, name: str) -> types.ModuleType:
    """The page's first Python block containing ``marker``, executed as module ``name``."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    (source,) = [b for b in blocks if marker in b][:1]
    module = types.ModuleType(name)
    exec(compile(source, f"{PAGE}:{name}", "exec"), module.__dict__)
    return module


def test_the_greeting_plugin_adds_its_section_and_its_tool(make_veil):
    plugin = _example("def register_tools", "veil_myplugin")
    veil = make_veil(
        [{"tool_calls": [{"name": "greet", "arguments": {"name": "Ada"}}]}, "done"],
        plugins=[plugin],
    )
    result = veil.run_turn(veil.new_session(), "greet Ada")

    assert result.final == "done"
    first_prompt, second_prompt = veil.model.calls
    assert "Answer in French." in first_prompt[0]["content"]  # the plugin's prompt section
    (tool_message,) = [m for m in second_prompt if m["role"] == "tool"]
    assert tool_message["content"] == "bonjour Ada"  # what _greet returned for these arguments


def test_the_settings_example_declares_a_section_users_can_set(make_veil):
    plugin = _example("def register_settings", "veil_ratelimits")
    veil = make_veil(plugins=[plugin], settings={"rateLimits": {"perMinute": 30}})
    assert veil.config.settings.rate_limits.per_minute == 30

    default = make_veil(plugins=[plugin], project=veil.config.project_dir.parent / "other")
    assert default.config.settings.rate_limits.per_minute == 60  # the field's default
