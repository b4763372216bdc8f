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
        for fact in facts_in_tool_output(
            command if isinstance(command, str) else "", event.message.get("content") or ""
        ):
            session.veil.beliefs.assert_fact(
                session, fact, tool_call_id=event.tool_call_id, source="tool_result"
            )
    return capture_event(session, event)


@hookimpl
def system_prompt_sections(session: Any) -> list:
    """The manifest of loaded context (its stable guide and its volatile counts) and any open
    belief conflicts (volatile)."""
    from veil.core.manifest import conflicts_section, manifest_sections

    conflicts = conflicts_section(session)
    return [*manifest_sections(session), *([conflicts] if conflicts is not None else [])]


@hookimpl
def recall(session: Any, query: str, limit: int, tags: list[str] | None) -> list | None:
    """Hybrid (vector + keyword) search over this project's warm and cold items, every session
    (:meth:`veil.core.tiers.Tiers.search`); hits have source ``"warm"`` or ``"cold"``. Without a
    session there is no project to search here, so it answers nothing."""
    if session is None:
        return None
    return session.veil.tiers.search(query, limit, tags, None)


def _beliefs_text(session: Any, arg: str) -> str:
    beliefs = session.veil.beliefs
    rows = beliefs.beliefs(include_retracted=arg.strip() == "all")
    conflicts = beliefs.open_conflicts()
    lines = [f"{len(rows)} belief(s), {len(conflicts)} open conflict(s)"]
    for b in rows:
        mark = " (retracted)" if b["status"] == "retracted" else ""
        lines.append(
            f"  {b['id']}: {b['statement']}{mark}  [{b['source']}, session "
            f"{b['session_id'] or '-'}, tool call {b['tool_call_id'] or '-'}]"
        )
    for c in conflicts:
        lines.append(f"conflict {c['id']}: " + " | ".join(x["statement"] for x in c["beliefs"]))
    return "\n".join(lines)


@hookimpl
def register_slash_commands(veil: Any) -> list:
    """``/beliefs [all]``: beliefs with provenance and open conflicts."""
    from veil.core.types import SlashCommand

    return [
        SlashCommand(
            "beliefs",
            "beliefs with provenance and open conflicts (/beliefs all includes retracted ones)",
            _beliefs_text,
        )
    ]


def _beliefs_route(req: Any) -> Any:
    from veil.core.types import RouteResponse

    beliefs = req.veil.beliefs
    include = req.query.get("include_retracted", "false").lower() in ("1", "true", "yes")
    return RouteResponse(
        {
            "beliefs": beliefs.beliefs(include_retracted=include),
            "conflicts": beliefs.open_conflicts(),
        }
    )


_BELIEF = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "statement": {"type": "string"},
        "subject": {"type": ["string", "null"]},
        "predicate": {"type": ["string", "null"]},
        "value": {"type": ["string", "null"]},
        "status": {"type": "string"},
        "session_id": {"type": ["string", "null"]},
        "step": {"type": ["integer", "null"]},
        "tool_call_id": {"type": ["string", "null"]},
        "source": {"type": ["string", "null"]},
        "created_at": {"type": "number"},
        "reinforced": {"type": "integer"},
        "retracted_at": {"type": ["number", "null"]},
    },
}


@hookimpl
def register_routes(veil: Any) -> list:
    """``GET /beliefs``: beliefs (``?include_retracted=true`` for all) and open conflicts."""
    from veil.core.types import Route

    return [
        Route(
            "/beliefs",
            "GET",
            _beliefs_route,
            summary="Beliefs with provenance and open conflicts",
            response_schema={
                "type": "object",
                "properties": {
                    "beliefs": {"type": "array", "items": _BELIEF},
                    "conflicts": {"type": "array", "items": {"type": "object"}},
                },
                "required": ["beliefs", "conflicts"],
            },
        )
    ]
