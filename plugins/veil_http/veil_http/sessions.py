"""Session routes: create, list, get, close, delete; post a message (JSON answer); compact.

Every call into the core runs in a worker thread (``run_in_threadpool``): the store, the model
and the tools block. Whatever changes a session (a turn, compaction, close, delete, pin) runs
under ``veil.session_lock(id)``, so requests on one session are serialised while requests on
different sessions run side by side. While another process (a second server, the REPL, ``veil
-p``) changes the session, such a request gets 409 ``SESSION_BUSY`` before anything is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from veil import RenderEvent
from veil_http.api import Operation, answer, operation, parse_body, parse_query
from veil_http.events import HUB
from veil_http.schemas import (
    CompactBody,
    CompactOut,
    CreateSession,
    ListSessionsQuery,
    PostMessage,
    SessionList,
    SessionOut,
    SessionSummary,
    TurnOut,
)
from veil_http.turn_threads import run_in_daemon_thread

TAG = "sessions"


def veil_of(request: Request) -> Any:
    """The :class:`veil.core.app.Veil` the app serves."""
    return request.app.state.veil


def session_out(session: Any) -> SessionOut:
    """A :class:`SessionOut` from a :class:`veil.core.session.Session`."""
    return SessionOut.model_validate(
        {**session.to_dict(), "warnings": getattr(session, "load_warnings", [])}
    )


NOTE_KINDS = frozenset({"warning", "info"})
"""Render events whose text a turn's JSON result carries in ``warnings`` (the stream sends them
as ``warning`` / ``info`` events): over-budget reports, pointers put in place of oversized
content, refused compactions, convergence warnings."""


def turn_out(result: Any, session: Any, warnings: list[str] | None = None) -> TurnOut:
    """A :class:`TurnOut` from a :class:`veil.core.loop.TurnResult`, its session and the
    texts of the turn's warning and info events."""
    return TurnOut(
        warnings=list(warnings or []),
        status=result.status,
        final=result.final or "",
        reason=result.reason,
        iterations=result.iterations,
        usage={k: int(v or 0) for k, v in result.usage.items()},
        usage_estimated=bool(getattr(result, "usage_estimated", False)),
        seconds=max(0.0, float(result.seconds)),
        session=session_out(session),
    )


async def create_session(request: Request) -> Response:
    """Create a session for an agent (its config is snapshotted, seed 000)."""
    body = await parse_body(request, CreateSession, required=False)
    veil = veil_of(request)
    session = await run_in_threadpool(veil.new_session, body.agent, body.model)
    return answer(
        request, session_out(session), 201, headers={"Location": f"/sessions/{session.id}"}
    )


async def list_sessions(request: Request) -> Response:
    """Stored sessions, most recently updated first."""
    query = parse_query(request, ListSessionsQuery)
    problems: list[str] = []
    rows = await run_in_threadpool(veil_of(request).list_sessions, query.limit, problems)
    sessions = [
        SessionSummary(
            id=r["id"],
            agent=r["agent"],
            model=r["model"],
            title=r["title"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            closed=r["closed_at"] is not None,
            message_count=r["message_count"],
            compact_size=r["compact_size"] or 0,
        )
        for r in rows
    ]
    return answer(request, SessionList(sessions=sessions, warnings=problems))


async def get_session(request: Request) -> Response:
    """One session (404 SESSION_NOT_FOUND)."""
    session = await run_in_threadpool(
        veil_of(request).load_session, request.path_params["session_id"]
    )
    return answer(request, session_out(session))


def _close(veil: Any, session_id: str) -> Any:
    with veil.session_lock(session_id):
        session = veil.load_session(session_id)
        veil.close_session(session)
        return session


async def close_session(request: Request) -> Response:
    """Close a session: it stays readable, it cannot be changed (closing twice is harmless)."""
    session = await run_in_threadpool(_close, veil_of(request), request.path_params["session_id"])
    return answer(request, session_out(session))


async def delete_session(request: Request) -> Response:
    """Delete a session with its messages and items (the event log keeps its entries)."""
    await run_in_threadpool(veil_of(request).delete_session, request.path_params["session_id"])
    return Response(status_code=204)


def run_message(
    veil: Any,
    session_id: str,
    content: str,
    *,
    stream: bool,
    listener: Callable[[RenderEvent], None] | None = None,
) -> TurnOut:
    """Run one turn on a session under its lock.

    Args:
        stream: ask the model to stream tokens (``token`` render events).
        listener: receives the session's render events while the turn holds the lock (and only
            then, so it never sees another request's turn).

    Raises:
        SessionNotFound, SessionClosed, ProviderError, ConfigError: as the core raises them.
    """
    notes: list[str] = []

    def collect(event: RenderEvent) -> None:
        # what a terminal would have shown beside the answer: a JSON client reads it here
        if event.kind in NOTE_KINDS:
            data = event.data or {}
            notes.append(str(data.get("text") or data.get("message") or data))
        if listener is not None:
            listener(event)

    with veil.session_lock(session_id), HUB.subscribe(session_id, collect):
        session = veil.load_session(session_id)
        session.ensure_open()
        result = veil.run_turn(session, content, stream=stream)
        return turn_out(result, session, notes)


async def post_message(request: Request) -> Response:
    """Post a user message and run the agent turn; the JSON result comes when it ends.

    A convergence halt is ``status: "halted"`` with its ``reason`` (still a 200: the turn ran).
    """
    body = await parse_body(request, PostMessage, required=True)
    out = await run_in_daemon_thread(
        run_message,
        veil_of(request),
        request.path_params["session_id"],
        body.content,
        stream=False,
    )
    return answer(request, out)


def _compact(veil: Any, session_id: str, instructions: str | None) -> dict[str, Any]:
    with veil.session_lock(session_id):
        # Load it fresh under the lock, so the core's compaction acts on the stored state, not
        # on an object an earlier read request left behind.
        veil.load_session(session_id)
        return veil.compact(session_id, instructions)


async def compact_session(request: Request) -> Response:
    """Seed 000's defaultCompaction, on demand (``POST /sessions/:id/compact``)."""
    body = await parse_body(request, CompactBody, required=False)
    result = await run_in_daemon_thread(
        _compact, veil_of(request), request.path_params["session_id"], body.instructions
    )
    return answer(request, CompactOut.model_validate(result))


def operations() -> list[Operation]:
    """The session routes of the table."""
    from veil_http.streaming import EVENT_SCHEMA, stream_message

    sid = "/sessions/{session_id}"
    return [
        operation(
            "POST",
            "/sessions",
            create_session,
            tag=TAG,
            body=CreateSession,
            body_required=False,
            response=SessionOut,
            status=201,
            errors=(400, 404),
            summary="Create a session (agent and model optional; 404 AGENT_NOT_FOUND for an "
            "agent the project does not have)",
        ),
        operation(
            "GET",
            "/sessions",
            list_sessions,
            tag=TAG,
            query=ListSessionsQuery,
            response=SessionList,
            errors=(422,),
            summary="List sessions, newest first",
        ),
        operation("GET", sid, get_session, tag=TAG, response=SessionOut, summary="Get a session"),
        operation(
            "POST",
            f"{sid}/close",
            close_session,
            tag=TAG,
            response=SessionOut,
            errors=(409,),
            summary="Close a session (read-only from now on)",
        ),
        operation(
            "DELETE",
            sid,
            delete_session,
            tag=TAG,
            status=204,
            errors=(409,),
            summary="Delete a session, its messages and items",
        ),
        operation(
            "POST",
            f"{sid}/messages",
            post_message,
            tag=TAG,
            body=PostMessage,
            response=TurnOut,
            errors=(400, 409, 502),
            summary="Post a user message and run the agent turn (JSON result)",
        ),
        operation(
            "POST",
            f"{sid}/messages/stream",
            stream_message,
            tag=TAG,
            body=PostMessage,
            media_type="text/event-stream",
            response_schema=EVENT_SCHEMA,
            errors=(400, 409),
            summary="Post a user message and stream the turn (server-sent events)",
        ),
        operation(
            "POST",
            f"{sid}/compact",
            compact_session,
            tag=TAG,
            body=CompactBody,
            body_required=False,
            response=CompactOut,
            errors=(400, 409, 501, 502),
            summary="Summarise the session's older messages now (its defaultCompaction settings)",
        ),
    ]
