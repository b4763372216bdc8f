"""The tools, slash commands and recall through the plugin's hooks, with a fake session."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import veil_memoryfiles as plugin

from veil.core.errors import BadRequest
from veil.core.plugins import new_plugin_manager
from veil.core.types import ToolContext


def tools_by_name() -> dict:
    return {t.name: t for t in plugin.register_tools(veil=None)}


def call(session: SimpleNamespace, name: str, **args: object):
    return tools_by_name()[name].handler(ToolContext(session=session, tool_call_id="call_1"), args)


def test_hooks_register_with_pluggy() -> None:
    pm = new_plugin_manager()
    pm.register(plugin, name="veil_memoryfiles")
    (tools,) = pm.hook.register_tools(veil=None)
    assert [t.name for t in tools] == ["memory_write", "memory_read", "memory_search"]
    (commands,) = pm.hook.register_slash_commands(veil=None)
    assert [c.name for c in commands] == ["memory", "remember"]
    assert len(pm.hook.register_routes(veil=None)[0]) == 4


def test_tool_schemas() -> None:
    tools = tools_by_name()
    write = tools["memory_write"].schema()["function"]["parameters"]
    assert write["required"] == ["content"]
    assert write["properties"]["scope"]["enum"] == ["agent", "global"]
    assert tools["memory_search"].parameters["required"] == ["query"]
    assert "required" not in tools["memory_read"].parameters


def test_memory_write_statuses(project: Path, helpers: SimpleNamespace) -> None:
    session = helpers.fake_session(helpers.load_config(project))
    statuses = [
        call(session, "memory_write", content="Project uses port 5051.").meta["status"],
        call(session, "memory_write", content=" Project uses port 5051. ").meta["status"],
        call(session, "memory_write", content="   ").meta["status"],
        call(session, "memory_write", content=None).meta["status"],
        call(session, "memory_write").meta["status"],
        call(session, "memory_write", content="Team uses tabs.", scope="global").meta["status"],
    ]
    assert statuses == [
        "written",
        "skipped_duplicate",
        "skipped_empty",
        "skipped_empty",
        "skipped_empty",
        "written",
    ]
    out = call(session, "memory_write", content="Another fact.")
    data = json.loads(out.content)
    assert data["status"] == "written" and data["scope"] == "agent"
    assert data["file"] == ".veil/memory/agents/default/MEMORY.md"
    assert not out.is_error
    with pytest.raises(BadRequest, match="scope"):
        call(session, "memory_write", content="x", scope="team")
    with pytest.raises(BadRequest, match="content"):
        call(session, "memory_write", content=["x"])


def test_memory_write_is_disabled_by_agent_json(project: Path, helpers: SimpleNamespace) -> None:
    helpers.write_settings(project, {"memory": {"enabled": True}})
    helpers.write_agent(project, "quiet", {"memory": {"enabled": False}})
    config = helpers.load_config(project)
    out = call(helpers.fake_session(config, agent="quiet"), "memory_write", content="x")
    assert out.meta["status"] == "disabled" and "memory.enabled is false" in out.content
    assert not (project / ".veil" / "memory").exists()
    assert config.memory_enabled("quiet") is False  # the check the compaction plugin calls
    # and settings.json can disable it for everyone, an agent.json re-enabling it for one
    helpers.write_settings(project, {"memory": {"enabled": False}})
    helpers.write_agent(project, "loud", {"memory": {"enabled": True}})
    config = helpers.load_config(project)
    assert call(helpers.fake_session(config), "memory_write", content="x").meta["status"] == (
        "disabled"
    )
    loud = helpers.fake_session(config, agent="loud")
    assert call(loud, "memory_write", content="x").meta["status"] == "written"


def test_memory_read_scopes(project: Path, helpers: SimpleNamespace) -> None:
    session = helpers.fake_session(helpers.load_config(project))
    assert "(empty)" in call(session, "memory_read").content
    call(session, "memory_write", content="agent fact")
    call(session, "memory_write", content="global fact", scope="global")
    both = call(session, "memory_read").content
    assert both.index("# agent memory (.veil/memory/agents/default/MEMORY.md)") < both.index(
        "# global memory (.veil/memory/MEMORY.md)"
    )
    assert "agent fact" in both and "global fact" in both
    only_global = call(session, "memory_read", scope="global").content
    assert "global fact" in only_global and "agent fact" not in only_global
    with pytest.raises(BadRequest, match="scope"):
        call(session, "memory_read", scope="../x")


def test_memory_read_hides_global_when_disabled(project: Path, helpers: SimpleNamespace) -> None:
    helpers.write_agent(project, "quiet", {"memory": {"enabled": False}})
    config = helpers.load_config(project)
    call(helpers.fake_session(config), "memory_write", content="global fact", scope="global")
    text = call(helpers.fake_session(config, agent="quiet"), "memory_read").content
    assert "global fact" not in text and "memory is disabled for agent 'quiet'" in text


def test_memory_search_tool(project: Path, helpers: SimpleNamespace) -> None:
    session = helpers.fake_session(helpers.load_config(project))
    call(session, "memory_write", content="The API listens on port 5051.")
    call(session, "memory_write", content="Database is Postgres 16.", scope="global")
    out = call(session, "memory_search", query="port")
    assert out.meta["hits"][0]["content"] == "The API listens on port 5051."
    assert "1 memory entries match 'port'" in out.content
    assert (
        call(session, "memory_search", query="redis").content == "No memory entry matches 'redis'."
    )
    assert len(call(session, "memory_search", query="port postgres", limit=500).meta["hits"]) == 2
    with pytest.raises(BadRequest, match="query"):
        call(session, "memory_search", query="")


def test_slash_commands(project: Path, helpers: SimpleNamespace) -> None:
    session = helpers.fake_session(helpers.load_config(project))
    commands = {c.name: c for c in plugin.register_slash_commands(veil=None)}
    remember = commands["remember"].handler
    assert remember(session, "Use pnpm, not npm.") == (
        "written (.veil/memory/agents/default/MEMORY.md)"
    )
    assert remember(session, "Use pnpm, not npm.").startswith("skipped_duplicate")
    assert remember(session, "").startswith("skipped_empty")
    shown = commands["memory"].handler(session, "")
    assert "Use pnpm, not npm." in shown and "# global memory" in shown


def test_recall_hook_returns_memory_hits(project: Path, helpers: SimpleNamespace) -> None:
    session = helpers.fake_session(helpers.load_config(project))
    call(session, "memory_write", content="Deploy with make ship.")
    (hit,) = plugin.recall(session=session, query="deploy", limit=5)
    assert hit.source == "memory" and hit.content == "Deploy with make ship."
    assert 0 < hit.score < 1 and hit.meta["file"] == ".veil/memory/agents/default/MEMORY.md"
    assert hit.id == "memory:.veil/memory/agents/default/MEMORY.md:0"
    assert plugin.recall(session=None, query="deploy", limit=5) is None
