"""The core's own plugin (registered as ``veil.core``): the coding tools, the twelve memory
tools, the default ``capture``, the manifest and belief-conflict sections, facts recognised in
tool results, and ``recall`` over the warm and cold tiers."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def register_tools(veil: Any) -> list:
    """read, write, edit, bash, grep, ls (:mod:`veil.core.tools`) and the twelve memory tools
    (:mod:`veil.core.memory_tools`)."""
    from veil.core.memory_tools import memory_tools
    from veil.core.tools import builtin_tools

    return builtin_tools() + memory_tools()


@hookimpl
def capture(session: Any, event: Any) -> list:
    """Items for turns and tool results (:mod:`veil.core.capture`); facts a rule recognises in a
    tool result become beliefs (:func:`veil.core.beliefs.facts_in_tool_output`)."""
    from veil.core.beliefs import facts_in_tool_output
    from veil.core.capture import capture_event

    if event.phase == "tool_result" and event.result is not None and not event.result.is_error:
        command = (event.arguments or {}).get("command", "")
        for fact in facts_in_tool_output(command if isinstance(command, str) else "",
                                         event.message.get("content") or ""):
            session.veil.beliefs.assert_fact(session, fact, tool_call_id=event.tool_call_id,
                                             source="tool_result")
    return capture_event(session, event)


@hookimpl
def system_prompt_sections(session: Any) -> list:
    """The manifest of loaded context and any open belief conflicts."""
    from veil.core.manifest import conflicts_section, manifest_section

    return [s for s in (manifest_section(session), conflicts_section(session)) if s is not None]


@hookimpl
def recall(session: Any, query: str, limit: int, tags: list[str] | None) -> list | None:
    """Hybrid (vector + keyword) search over this project's warm and cold items, every session
    (:meth:`veil.core.tiers.Tiers.search`); hits have source ``"warm"`` or ``"cold"``. Without a
    session there is no project to search here, so it answers nothing."""
    if session is None:
        return None
    return session.veil.tiers.search(query, limit, tags, None)
