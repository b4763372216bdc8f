"""veil_mcp: veil's memory as an MCP server (``veil mcp``), for Claude Code, Codex, Cursor and
any other MCP client.

Hooks implemented (veil/hookspecs.py): ``register_commands`` (``veil mcp``). The server
(:class:`veil_mcp.server.VeilMCPServer`, on the official SDK's ``MCPServer``) offers the memory
tools veil's own loop offers its model, taken from ``veil.tools``, and the MEMORY.md files as
read-only resources. The SDK is imported only when the command runs.
"""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil mcp``."""
    from veil_mcp.command import add_mcp_command

    add_mcp_command(cli)
