"""Default plugin ``veil.beliefs``: facts become beliefs with provenance, contradictions become
conflicts the model settles.

Facts arrive from a rule over tool results
(:func:`~veil.default_plugins.beliefs.store.facts_in_tool_output`, on ``capture``) and from the
``assert_fact`` hook (``veil_remember`` with kind ``fact``, memory extraction). Open conflicts are
shown in the system prompt, listed by ``belief_conflicts`` (the ``veil_conflicts`` tool) and
settled by ``resolve_conflict`` (``veil_resolve_conflict``); ``/beliefs`` and ``GET /beliefs``
list beliefs with provenance; after ``veil doctor --repair`` the beliefs are rebuilt from the
event log (``rebuild_derived``).

The belief store (:class:`~veil.default_plugins.beliefs.store.BeliefStore`, one per open project:
:func:`belief_store`) and the contradiction rule (:mod:`veil.default_plugins.beliefs.claims`) live
in this package; the core reaches them only through these hooks. Blocked, a remembered fact stays
a context item and nothing else: no belief is recorded, ``veil_conflicts`` lists none and
``veil_resolve_conflict`` answers that beliefs are off."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession, PromptSection, Store, Veil
    from veil.default_plugins.beliefs.store import BeliefStore

_stores: weakref.WeakKeyDictionary[Any, BeliefStore] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def belief_store(veil: Veil) -> BeliefStore:
    """The :class:`~veil.default_plugins.beliefs.store.BeliefStore` over ``veil``'s store (its
    event log), opened on first use and kept while ``veil`` lives (its tables are created then).

    Raises:
        sqlite3.Error: the store cannot create the belief tables.
    """
    from veil.default_plugins.beliefs.store import BeliefStore

    with _stores_lock:
        beliefs = _stores.get(veil)
        if beliefs is None:
            beliefs = _stores[veil] = BeliefStore(veil.store)
        return beliefs


@hookimpl
def assert_fact(
    session: PluginSession | None, statement: str, tool_call_id: str | None, source: str
) -> None:
    """Record a stated fact as a belief (:meth:`BeliefStore.assert_fact`); nothing outside a
    session (no project to keep it in)."""
    if session is not None:
        belief_store(session.veil).assert_fact(
            session, statement, tool_call_id=tool_call_id, source=source
        )


@hookimpl
def belief_conflicts(session: PluginSession | None) -> list[dict[str, Any]] | None:
    """Open conflicts (:meth:`BeliefStore.open_conflicts`); None outside a session."""
    return None if session is None else belief_store(session.veil).open_conflicts()


@hookimpl
def resolve_conflict(session: PluginSession | None, conflict_id: str, keep: str) -> str | None:
    """Keep ``keep``, retract the rest (:meth:`BeliefStore.resolve`); None outside a session.

    Raises:
        BadRequest: unknown or closed conflict, or ``keep`` is not one of its beliefs.
    """
    if session is None:
        return None
    return belief_store(session.veil).resolve(session, conflict_id, keep)


@hookimpl
def register_migrations() -> list[Any]:
    """The view's tables (:func:`veil.default_plugins.beliefs.tables.migrations`)."""
    from veil.default_plugins.beliefs.tables import migrations

    return migrations()


@hookimpl(optionalhook=True)  # declared by the plugin that fires it
def rebuild_derived(store: Store) -> list[str]:
    """Rebuild the belief tables from the event log alone (:meth:`BeliefStore.rebuild`)."""
    from veil.default_plugins.beliefs.store import BeliefStore

    BeliefStore(store).rebuild()
    return ["beliefs"]


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
            belief_store(session.veil).assert_fact(
                session, fact, tool_call_id=event.tool_call_id, source="tool_result"
            )
    return []


def conflicts_section(session: Any) -> PromptSection | None:
    """Open belief conflicts for the model to settle (None when there are none): a volatile
    section sent in the context note, order 850 (before the manifest's 900)."""
    from veil import PromptSection

    conflicts = belief_store(session.veil).open_conflicts()
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
    beliefs = belief_store(session.veil)
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
    from veil import SlashCommand

    return [
        SlashCommand(
            "beliefs",
            "beliefs with provenance and open conflicts (/beliefs all includes retracted ones)",
            _beliefs_text,
        )
    ]


def _beliefs_route(req: Any) -> Any:
    from veil import RouteResponse

    beliefs = belief_store(req.veil)
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


@hookimpl(optionalhook=True)  # declared by the plugin that fires it
def register_routes(veil: Any) -> list:
    """``GET /beliefs``: beliefs (``?include_retracted=true`` for all) and open conflicts."""
    from veil import Route

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
