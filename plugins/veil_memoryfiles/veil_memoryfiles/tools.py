"""The model's memory tools (seed 000): ``memory_write``, ``memory_read``, ``memory_search``,
and the interactive ``/memory`` and ``/remember`` commands built on the same service."""

from __future__ import annotations

import json
from typing import Any

from veil.core.types import SlashCommand, Tool, ToolContext, ToolResult
from veil_memoryfiles.service import MemoryService

DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 50


def _service(session: Any) -> MemoryService:
    return MemoryService(session.config, session.agent)


def memory_write_handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """``memory_write(content, scope="agent")``: append a dated entry.

    Returns a ToolResult whose content is JSON ``{"status", "scope", "file", ...}``; status is
    ``written``, ``skipped_empty``, ``skipped_duplicate`` or ``disabled`` (memory off for the
    agent). ``meta`` holds the same fields.

    Raises:
        BadRequest: ``content`` not a string, ``scope`` not ``agent``/``global``.
    """
    out = _service(ctx.session).write(args.get("content"), args.get("scope", "agent"))
    data = out.as_dict()
    return ToolResult(content=json.dumps(data, ensure_ascii=False), meta=data)


def memory_read_handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """``memory_read(scope=None)``: raw text of the agent's and/or global MEMORY.md.

    Raises:
        BadRequest: ``scope`` not ``agent``/``global``.
    """
    scope = args.get("scope")
    return ToolResult(content=_service(ctx.session).read(scope), meta={"scope": scope})


def memory_search_handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """``memory_search(query, limit=10)``: BM25 keyword search, entries returned whole.

    ``meta["hits"]`` holds the hits as dicts (scope, file, date, content, score).

    Raises:
        BadRequest: empty ``query`` or a ``limit`` outside 1..50.
    """
    svc = _service(ctx.session)
    query = args.get("query")
    limit = args.get("limit", DEFAULT_SEARCH_LIMIT)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > MAX_SEARCH_LIMIT:
        limit = MAX_SEARCH_LIMIT
    hits = svc.search(query, limit)
    return ToolResult(
        content=svc.format_hits(query, hits), meta={"hits": [svc.hit_dict(h) for h in hits]}
    )


def memory_tools() -> list[Tool]:
    """The three tools with their JSON Schemas."""
    scope_schema = {"type": "string", "enum": ["agent", "global"]}
    return [
        Tool(
            name="memory_write",
            description=(
                "Remember a fact across sessions: append a dated entry to a MEMORY.md file. "
                "scope 'agent' (default) is your own memory; 'global' is shared by every agent. "
                "Write focused, factual entries. Returns a status: written, skipped_empty "
                "(nothing to write), skipped_duplicate (same as the last entry) or disabled."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The fact to remember."},
                    "scope": {**scope_schema, "default": "agent"},
                },
                "required": ["content"],
            },
            handler=memory_write_handler,
        ),
        Tool(
            name="memory_read",
            description=(
                "Read your memory files as they are on disk: scope 'agent', 'global', or omit "
                "it for both."
            ),
            parameters={"type": "object", "properties": {"scope": scope_schema}},
            handler=memory_read_handler,
        ),
        Tool(
            name="memory_search",
            description=(
                "Search memory entries (archives included) by keywords; returns whole entries "
                "with their date and file, best match first. Search before writing to avoid "
                "duplicates."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Keywords."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "default": DEFAULT_SEARCH_LIMIT,
                    },
                },
                "required": ["query"],
            },
            handler=memory_search_handler,
        ),
    ]


def _slash_memory(session: Any, argument: str) -> str:
    return _service(session).read(None)


def _slash_remember(session: Any, argument: str) -> str:
    out = _service(session).write(argument, "agent")
    return f"{out.status} ({out.file})"


def slash_commands() -> list[SlashCommand]:
    """``/memory`` (both scopes) and ``/remember TEXT`` (agent scope; prints the status)."""
    return [
        SlashCommand("memory", "show the agent's and the global memory files", _slash_memory),
        SlashCommand("remember", "remember TEXT in the agent's memory file", _slash_remember),
    ]
