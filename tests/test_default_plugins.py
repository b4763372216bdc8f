"""veil's default plugins (veil.default_plugins): each is registered under its own name and can be
blocked alone; with any one blocked the rest still runs a turn, and what the blocked one provided
is gone."""

from __future__ import annotations

import click
import pytest

from veil.core.types import ContextItem
from veil.default_plugins import DEFAULT_PLUGINS
from veil.default_plugins.beliefs import belief_store
from veil.harness import VeilHarness

NAMES = [name for name, _ in DEFAULT_PLUGINS]
CODING_TOOLS = {"read", "write", "edit", "bash", "grep", "ls"}
MEMORY_TOOLS = {
    "veil_recall",
    "veil_hydrate",
    "veil_promote",
    "veil_demote",
    "veil_remember",
    "veil_pin",
    "veil_unpin",
    "veil_forget",
    "veil_history",
    "veil_turn_meta",
    "veil_conflicts",
    "veil_resolve_conflict",
}
# an embedder nobody serves: recall falls back to keywords at once instead of loading a model
NO_EMBEDDER = {
    "embeddings": {"provider": "ollama", "ollamaModel": "none", "ollamaUrl": "http://127.0.0.1:9"}
}


def test_every_default_plugin_is_listed_under_its_own_name(make_veil):
    veil = make_veil(settings=NO_EMBEDDER)
    info = veil.describe()
    listed = {p["name"]: p for p in info["plugins"]}
    assert set(NAMES) == {
        "veil.coding_tools",
        "veil.memory_tools",
        "veil.capture",
        "veil.manifest",
        "veil.recall",
        "veil.beliefs",
        "veil.replay",
        "veil.doctor",
    }
    for name in NAMES:
        assert listed[name]["default"] is True and listed[name]["hooks"], name
    # registration keeps the order the former veil.core plugin gave: coding tools first
    assert list(veil.tools)[:7] == ["read", "write", "edit", "bash", "grep", "ls", "veil_recall"]


@pytest.mark.parametrize("blocked", NAMES)
def test_blocking_one_default_plugin_leaves_the_rest_running_a_turn(make_veil, project, blocked):
    veil = make_veil(
        [{"tool_calls": [{"name": "bash", "arguments": {"command": "python3 -V"}}]}, "done"],
        settings=NO_EMBEDDER,
        use_entry_points=True,
        disable=(blocked,),
    )
    loaded = {name for name, plugin in veil.pm.list_name_plugin() if plugin is not None}
    assert blocked not in loaded and set(NAMES) - {blocked} <= loaded
    assert blocked in veil.describe()["blocked"]

    session = veil.new_session()
    result = veil.run_turn(session, "which python version do we run?")
    assert result.status == "done" and result.final == "done"

    tools = set(veil.tools)
    sent = {t["function"]["name"] for t in veil.model.tools_seen[0]}
    tool_reply = next(m["content"] for m in session.messages if m["role"] == "tool")
    if blocked == "veil.coding_tools":
        assert not tools & CODING_TOOLS and not sent & CODING_TOOLS
        assert "bash" in tool_reply and "Python 3" not in tool_reply  # an unknown tool, not run
    else:
        assert tools >= CODING_TOOLS and sent >= CODING_TOOLS
        assert "Python 3" in tool_reply
    if blocked == "veil.memory_tools":
        assert not tools & MEMORY_TOOLS and not sent & MEMORY_TOOLS
    else:
        assert tools >= MEMORY_TOOLS and sent >= MEMORY_TOOLS

    intents = [i for i in session.live_items if i.kind == "intent"]
    assert len(intents) == (0 if blocked == "veil.capture" else 1)

    prompts = "\n".join(str(m.get("content")) for call in veil.model.calls for m in call)
    assert ("## Context manifest" in prompts) == (blocked != "veil.manifest")

    beliefs = [b["statement"] for b in belief_store(veil).beliefs()]
    python_fact = [s for s in beliefs if s.startswith("python version is 3.")]
    assert len(python_fact) == (0 if blocked in ("veil.beliefs", "veil.coding_tools") else 1)
    assert ("beliefs" in veil.slash_commands()) == (blocked != "veil.beliefs")
    commands = click.Group()
    veil.pm.hook.register_commands(cli=commands)
    assert ("replay" in commands.commands) == (blocked != "veil.replay")
    assert ("doctor" in commands.commands) == (blocked != "veil.doctor")

    stored = ContextItem(content="disk quota exceeded on the build host", session_id=session.id)
    veil.tiers.store_items([stored], "warm")
    answers = veil.pm.hook.recall(session=session, query="quota", limit=5, tags=None)
    warm = [hit.id for answer in answers for hit in answer or [] if hit.source == "warm"]
    assert warm == ([] if blocked == "veil.recall" else [stored.id])


@pytest.mark.parametrize("blocked", [False, True])
def test_the_harness_shows_no_manifest_when_its_plugin_is_blocked(project, monkeypatch, blocked):
    if blocked:
        monkeypatch.setenv("VEIL_DISABLE_PLUGINS", "veil.manifest")
    (project / ".veil").mkdir(exist_ok=True)
    harness = VeilHarness(project / ".veil" / "context.db")
    try:
        assert harness.veil.context_layer_on  # veil_fsrs is installed: a manifest is due
        text = harness.manifest()
        assert (text == "") if blocked else text.startswith("## Context manifest\n")
        if not blocked:  # the plugin's prompt sections joined are its one-piece manifest
            from veil.default_plugins.manifest.sections import manifest_section

            assert text == manifest_section(harness.session).text
    finally:
        harness.veil.close()
