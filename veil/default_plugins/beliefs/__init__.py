"""Default plugin ``veil.beliefs``: facts a rule recognises in a tool result become beliefs
(:func:`~veil.default_plugins.beliefs.store.facts_in_tool_output`), open belief conflicts are
shown in the system prompt, and ``/beliefs`` and ``GET /beliefs`` list beliefs with provenance.

The belief store (:class:`~veil.default_plugins.beliefs.store.BeliefStore`, the core's
``Veil.beliefs``) and the contradiction rule (:mod:`veil.default_plugins.beliefs.claims`) live in
this package; the core still opens the store for the memory tools (``veil_remember`` with kind
``fact``, ``veil_conflicts``) and ``veil doctor``, so with this plugin blocked those keep working,
but no fact is asserted from tool output and no conflict is shown in the prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session_api import PluginSession
    from veil.core.types import PromptSection


@hookimpl
def capture(session: PluginSession, event: Any) -> list:
    """Assert the facts a rule recognises in a successful tool result; captures no item (the
    ``veil.capture`` plugin does)."""
    from veil.default_plugins.beliefs.store import facts_in_tool_output

    if event.phase == "tool_result" and event.result is not None and not event.result.is_error:
        command = (event.arguments or {}).get("command", "")
        for fact in facts_in_tool_output(
            command if isinstance(command, str) else "", event.message.get("content") or ""
        ):
            session.veil.beliefs.assert_fact(
                session, fact, tool_call_id=event.tool_call_id, source="tool_result"
            )
    return []


def conflicts_section(session: Any) -> PromptSection | None:
    """Open belief conflicts for the model to settle (None when there are none): a volatile
    section sent in the context note, order 850 (before the manifest's 900)."""
    from veil.core.types import PromptSection

    conflicts = session.veil.beliefs.open_conflicts()
    if not conflicts:
        return None
    lines = ["## Conflicting beliefs (settle with veil_conflicts / veil_resolve_conflict)"]
    for c in conflicts[:5]:
        values = "; ".join(f"{b['id']}: {b['statement']}" for b in c["beliefs"][:4])
        lines.append(f"- {c['id']}: {values}")
    return PromptSection("conflicts", "\n".join(lines), order=850, volatile=True)


@hookimpl
def system_prompt_sections(session: PluginSession) -> list:
    """Open belief conflicts, if any (volatile; :func:`conflicts_section`)."""
    conflicts = conflicts_section(session)
    return [conflicts] if conflicts is not None else []


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
