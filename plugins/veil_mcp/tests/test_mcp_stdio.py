"""``veil mcp`` as Claude Code, Codex and Cursor run it: a real subprocess launched by the SDK's
``stdio_client``, speaking JSON-RPC over its stdin and stdout, with the installed plugins
loaded from their entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from veil_mcp.server import MCP_TOOLS

TIMEOUT_S = 240  # the first recall loads the embedding model from disk


def veil_mcp_params(project, *extra: str) -> StdioServerParameters:
    """``python -m veil.cli mcp --project PROJECT`` with this process's environment (the
    test's VEIL_HOME, PYTHONPATH and offline switches; stdio_client passes only a safe subset
    by default)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "veil.cli", "mcp", "--project", str(project), *extra],
        env=dict(os.environ),
        cwd=str(project),
    )


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def test_a_client_session_over_stdio(seeded, opener):
    project = seeded.project
    fact = "Releases are tagged vX.Y.Z on the trunk branch."
    out = {}

    async def main():
        with anyio.fail_after(TIMEOUT_S):
            await session_script()

    async def session_script():
        async with (
            stdio_client(veil_mcp_params(project)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            out["tools"] = (await session.list_tools()).tools
            out["write"] = await session.call_tool("memory_write", {"content": fact})
            out["read"] = await session.call_tool("memory_read", {})
            out["again"] = await session.call_tool("memory_write", {"content": fact})
            out["search"] = await session.call_tool("memory_search", {"query": "tagged"})
            out["recall"] = await session.call_tool("veil_recall", {"query": "deploy script token"})
            out["bad"] = await session.call_tool("memory_search", {"query": 3})
            out["resources"] = (await session.list_resources()).resources
            out["memory"] = await session.read_resource("veil://memory/agents/default")

    anyio.run(main)

    # the same definitions the project's own loop offers (entry points loaded, as in the server)
    veil = opener(project, use_entry_points=True)
    assert [t.name for t in out["tools"]] == list(MCP_TOOLS)
    for tool in out["tools"]:
        assert veil.tools[tool.name].schema()["function"] == {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        }
    assert json.loads(text(out["write"]))["status"] == "written"
    assert fact in text(out["read"])
    assert json.loads(text(out["again"]))["status"] == "skipped_duplicate"
    assert fact in text(out["search"])
    assert f"- {seeded.warm_item_id} [warm," in text(out["recall"])
    assert out["bad"].is_error and text(out["bad"]) == (
        "memory_search: query: expected a string, got integer"
    )
    assert "veil://memory/agents/default" in [str(r.uri) for r in out["resources"]]
    assert fact in out["memory"].contents[0].text
    # the server's session is in the store, titled "mcp" and closed when the server stopped
    sessions = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "sessions"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sessions.returncode == 0, sessions.stderr
    assert [line for line in sessions.stdout.splitlines() if line.endswith("mcp (closed)")]


@pytest.mark.parametrize(
    ("agent", "message"), [("../x", "agent name"), ("ghost", "--agent: agent 'ghost' not found")]
)
def test_a_bad_agent_is_a_clean_error_before_serving(project, agent, message):
    done = subprocess.run(
        [sys.executable, "-m", "veil.cli", "mcp", "--project", str(project), "--agent", agent],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and "Traceback" not in done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_veil_plugins_lists_it(project):
    done = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "plugins"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("veil_mcp ")))
    assert lines[at + 1].strip() == "register_commands"
