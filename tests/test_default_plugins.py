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
        "veil.elision",
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


# -- veil.recall blocked: eviction, tiers and memory files keep working (a real `veil -p`) -------

MEMORY_ENTRY = "The zebrafish fixture is regenerated by make fixtures."
FILE_FACT = "zebrafish_{n} = load_fixture('zebrafish', part={n})  # line {i}"


def _read(n: int) -> dict:
    return {
        "tool_calls": [{"id": f"call_read_{n}", "name": "read", "arguments": {"path": f"f{n}.py"}}]
    }


@pytest.mark.parametrize("blocked", [False, True])
def test_blocked_recall_leaves_eviction_running_and_recall_answers_from_memory_files(
    project, tmp_path, monkeypatch, blocked
):
    """``veil --disable-plugin veil.recall -p``: tool results are still evicted into the warm /
    cold tiers, and ``veil_recall`` answers only what the memory files hold; not blocked, the same
    query also finds the evicted file contents (the control that shows the setup evicts)."""
    import json
    import os
    import subprocess
    import sys

    from veil.core.app import open_veil
    from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

    files = 4
    for n in range(files):
        (project / f"f{n}.py").write_text(
            "\n".join(FILE_FACT.format(n=n, i=i) for i in range(40)) + "\n"
        )
    memory = project / ".veil" / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text(f"<!-- 2026-12-01 -->\n{MEMORY_ENTRY}\n")
    recall_call = {
        "tool_calls": [
            {"id": "call_recall", "name": "veil_recall", "arguments": {"query": "zebrafish"}}
        ]
    }
    script = [*(_read(n) for n in range(files)), recall_call, "done"]
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        VEIL_HOME=str(home),
        VEIL_ALLOW_PROJECT_PROVIDERS="1",
        VEIL_CONTEXT__RESCUE_EMBEDDINGS="off",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    flags = ["--disable-plugin", "veil.recall"] if blocked else []
    with ScriptedOpenAIServer(script) as server:
        configure_project(project, server)
        settings_path = project / ".veil" / "settings.json"
        settings = json.loads(settings_path.read_text())
        settings.update({"context": {"budgetTokens": 1500, "protectedResults": 1}, **NO_EMBEDDER})
        settings_path.write_text(json.dumps(settings))
        proc = subprocess.run(
            [sys.executable, "-m", "veil.cli", "--project", str(project), *flags, "-p", "go"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "done" and "Traceback" not in proc.stderr

    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")  # the scripted provider, above
    veil = open_veil(project, use_entry_points=False)
    try:
        reads = [i for i in veil.store.conn.execute("SELECT id, tier FROM items")]
    finally:
        veil.close()
    evicted = [r["id"] for r in reads if r["tier"] in ("warm", "cold")]
    assert evicted, reads  # the session evicted tool results into the tiers

    answered = server.requests[-1].body["messages"]
    result = next(m["content"] for m in answered if m.get("tool_call_id") == "call_recall")
    listed = [line for line in result.splitlines() if line.startswith("- ")]
    sources = [line.split("[", 1)[1].split(",", 1)[0] for line in listed]
    assert "memory" in sources and MEMORY_ENTRY in result
    if blocked:
        assert sources == ["memory"]
    else:
        assert {"warm", "cold"} & set(sources)
        assert any(item_id in result for item_id in evicted)


# -- veil.coding_tools: the persona that names the tools comes with them (issue 33) -----------------

PERSONA = (
    "You are veil, a coding agent working in the project at {cwd}.\n"
    "Use the tools to read, search, edit and run code; do not guess file contents. Keep answers"
    " short.\nWhen you are done, answer the user plainly. Today is {date}."
)


@pytest.mark.parametrize("blocked", [False, True])
def test_the_coding_persona_is_sent_only_with_the_coding_tools(
    make_veil, scripted_server, veil_project, blocked
):
    """The system message the provider receives opens with veil's coding persona (the same
    bytes as before the persona moved to ``veil.coding_tools``) when the coding tools are
    loaded; blocked, with the core's neutral line, and no message names a tool or the persona."""
    import datetime as dt

    veil = make_veil(
        ["done"],
        server=scripted_server,
        settings=NO_EMBEDDER,
        disable=("veil.coding_tools",) if blocked else (),
    )
    session = veil.new_session()
    assert veil.run_turn(session, "hello").final == "done"
    date = dt.datetime.fromtimestamp(session.created_at, dt.timezone.utc).date().isoformat()
    sent = scripted_server.requests[0].body["messages"]
    system = sent[0]["content"]
    assert sent[0]["role"] == "system"
    if blocked:
        assert system.split("\n\n")[0] == f"The project is at {veil_project}. Today is {date}."
        assert all("Use the tools" not in str(m.get("content")) for m in sent)
        assert "You are veil" not in system
    else:
        assert system.split("\n\n")[0] == PERSONA.format(cwd=veil_project, date=date)
