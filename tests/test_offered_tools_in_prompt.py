"""The prompt names only tools the model was offered: with ``veil.memory_tools`` blocked, the
manifest's guide and the pointers of oversized messages say nothing of ``veil_hydrate``,
``veil_recall`` or ``veil_history`` (a real ``veil -p`` against a scripted OpenAI server); with
the tools offered, the guide is the text replay figures were measured with, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from veil.default_plugins.manifest.sections import MANIFEST_GUIDE, manifest_guide
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

MEMORY_TOOL_NAMES = ("veil_hydrate", "veil_recall", "veil_history")
# the guide as it stood before tools were checked (replay figures depend on it), typed out
GUIDE_WITH_TOOLS = (
    "Evicted content appears as [evicted … #N] and [cold … item_…] stubs: veil_hydrate(#N or "
    "the id) loads one back; veil_recall(query) and veil_history(query) search the rest."
)
NO_EMBEDDER = {
    "embeddings": {"provider": "ollama", "ollamaModel": "none", "ollamaUrl": "http://127.0.0.1:9"}
}


def test_the_guide_is_unchanged_when_every_tool_it_names_is_offered():
    offered = {"read", "bash", *MEMORY_TOOL_NAMES, "veil_pin"}
    assert manifest_guide(offered) == MANIFEST_GUIDE == GUIDE_WITH_TOOLS


@pytest.mark.parametrize(
    ("offered", "named", "absent"),
    [
        (set(), [], MEMORY_TOOL_NAMES),
        ({"veil_hydrate"}, ["veil_hydrate"], ("veil_recall", "veil_history")),
        ({"veil_recall", "veil_history"}, ["veil_recall", "veil_history"], ("veil_hydrate",)),
        # veil_recall without veil_history: the sentence naming both would name one not offered
        ({"veil_recall", "read"}, [], MEMORY_TOOL_NAMES),
    ],
)
def test_the_guide_names_only_offered_tools(offered, named, absent):
    guide = manifest_guide(offered)
    assert guide.startswith("Evicted content appears as [evicted … #N] and [cold … item_…] stubs")
    for name in named:
        assert name in guide
    for name in absent:
        assert name not in guide
    if not named:
        assert "no tool to load them back is offered here" in guide


def _read(n: int) -> dict:
    return {
        "tool_calls": [{"id": f"call_read_{n}", "name": "read", "arguments": {"path": f"f{n}.py"}}]
    }


@pytest.mark.parametrize("blocked", [False, True])
def test_veil_p_with_memory_tools_blocked_sends_no_memory_tool_name(project, tmp_path, blocked):
    """Reads evict earlier results (stubs and the manifest appear) and the task is too large
    for its share of the budget (it goes behind a pointer): every request is searched for the
    memory tools' names."""
    files = 3
    for n in range(files):
        (project / f"f{n}.py").write_text(
            "\n".join(f"value_{n}_{i} = compute({i})  # line {i}" for i in range(60)) + "\n"
        )
    task = "Check these files. " + " ".join(f"word{i}" for i in range(900))
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
    flags = ["--disable-plugin", "veil.memory_tools"] if blocked else []
    with ScriptedOpenAIServer([*(_read(n) for n in range(files)), "done"]) as server:
        configure_project(project, server)
        settings_path = project / ".veil" / "settings.json"
        settings = json.loads(settings_path.read_text())
        settings.update({"context": {"budgetTokens": 1500, "protectedResults": 1}, **NO_EMBEDDER})
        settings_path.write_text(json.dumps(settings))
        proc = subprocess.run(
            [sys.executable, "-m", "veil.cli", "--project", str(project), *flags, "-p", task],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "done"
    bodies = [r.body for r in server.requests]
    assert len(bodies) == files + 1
    sent = "\n".join(str(m.get("content")) for b in bodies for m in b["messages"])
    tools = {t["function"]["name"] for b in bodies for t in b.get("tools") or []}
    system = bodies[-1]["messages"][0]["content"]
    assert "## Context manifest" in system and "[evicted " in sent  # the setup evicts
    assert "tokens of this message are not shown here" in sent  # ... and cuts the task
    if blocked:
        assert not {t for t in tools if t.startswith("veil_")}
        for name in MEMORY_TOOL_NAMES:
            assert name not in sent, name
        assert manifest_guide(tools) in system and MANIFEST_GUIDE not in system
        # the user is told the model cannot follow the task's pointer, not to use veil_hydrate
        # (no registered tool declares loads_pointers)
        assert (
            "no tool that loads it back is registered, so the model cannot load the rest"
            in proc.stderr
        )
    else:
        assert set(MEMORY_TOOL_NAMES) <= tools
        assert GUIDE_WITH_TOOLS in system
        assert 'veil_hydrate("#' in sent  # the task's pointer says how to follow it
        assert "returns it whole)" in proc.stderr
