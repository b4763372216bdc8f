"""``POST /sessions/{session_id}/messages/stream``: one turn as server-sent events.

The turn runs in a worker thread under the session's lock; while it holds the lock, a listener
on :data:`veil_http.events.HUB` receives the session's render events (the plugin's ``render``
hook publishes them) and hands them to this request's queue on the event loop. Subscribing only
once the lock is held means a stream never shows another request's turn.

Each event is ``event: <kind>`` with a one-line JSON ``data``; the stream ends with ``done``
(the same body as the JSON route) or ``error`` (``{"code", "message"}``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from veil import RenderEvent, SessionClosed, VeilError
from veil_http.api import parse_body
from veil_http.errors import Redactor, jsonable
from veil_http.schemas import PostMessage
from veil_http.sessions import run_message, veil_of
from veil_http.turn_threads import run_in_daemon_thread

log = logging.getLogger("veil_http")

STREAM_DESCRIPTION = (
    "Server-sent events, each `event: <kind>` and a JSON `data` line. Kinds: token {text}, "
    "assistant {text, toolCalls}, tool_call {name, arguments, toolCallId}, tool_result {name, "
    "toolCallId, content, isError, outcome, messageIndex, denied (true when the permission rules "
    "refused the call)}, eviction {items, threshold, report}, "
    "compaction, warning, info, halt {reason}, then done (the JSON route's body) or error "
    "{code, message}."
)

EVENT_KINDS = (
    "token",
    "assistant",
    "tool_call",
    "tool_result",
    "eviction",
    "compaction",
    "warning",
    "info",
    "halt",
    "done",
    "error",
)
"""Event names a stream can carry: the render kinds of :class:`veil.core.types.RenderEvent`,
then ``done`` or ``error``. Render events of other kinds are not forwarded."""

EVENT_SCHEMA = {
    "type": "object",
    "description": STREAM_DESCRIPTION,
    "properties": {
        "event": {"enum": list(EVENT_KINDS)},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["event", "data"],
}
"""One server-sent event (OpenAPI 3.1: the ``schema`` of ``text/event-stream`` describes each
event)."""

_END = object()


def sse(kind: str, data: Any, redactor: Redactor | None = None) -> str:
    """One server-sent event: ``event: kind`` and compact JSON ``data`` (no raw newline), its
    strings redacted like a JSON body (:func:`veil_http.errors.json_response`)."""
    data = jsonable(data)
    if redactor is not None:
        data = redactor.value(data)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if redactor is not None:
        text = redactor.known_only(text)
    return f"event: {kind}\ndata: {text}\n\n"


def _check_open(veil: Any, session_id: str) -> None:
    closed = veil.session_is_closed(session_id)  # SessionNotFound -> 404 before streaming
    veil.session_locks.check_free(session_id, "a turn")  # another process's turn -> 409
    if closed:
        raise SessionClosed(f"session {session_id} is closed")


async def stream_message(request: Request) -> Response:
    """Post a user message and stream the turn's events (tokens, tool calls, evictions...)."""
    body = await parse_body(request, PostMessage, required=True)
    veil = veil_of(request)
    session_id = request.path_params["session_id"]
    await run_in_threadpool(_check_open, veil, session_id)
    redactor: Redactor | None = getattr(request.app.state, "redactor", None)

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()

    def deliver(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone with its client; the turn still completes
            pass

    def on_event(event: RenderEvent) -> None:
        deliver(("event", event))

    def work() -> None:
        try:
            out = run_message(veil, session_id, body.content, stream=True, listener=on_event)
            deliver(("done", out))
        except VeilError as exc:
            deliver(("error", {"code": exc.code, "message": exc.message}))
        except Exception as exc:  # noqa: BLE001 - reported on the stream, logged here
            log.error("turn failed on session %s", session_id, exc_info=exc)
            deliver(
                (
                    "error",
                    {"code": "INTERNAL_ERROR", "message": f"internal error ({type(exc).__name__})"},
                )
            )
        finally:
            deliver(_END)

    # Keep a reference: a client that leaves cancels the response, not the turn.
    task = asyncio.ensure_future(run_in_daemon_thread(work))
    tasks: set[Any] = request.app.state.tasks
    tasks.add(task)
    task.add_done_callback(tasks.discard)

    async def events() -> Any:
        halt_seen = False
        while True:
            item = await queue.get()
            if item is _END:
                return
            kind, payload = item
            if kind == "event":
                if payload.kind not in EVENT_KINDS:
                    continue
                halt_seen = halt_seen or payload.kind == "halt"
                yield sse(payload.kind, payload.data, redactor)
            elif kind == "done":
                if payload.status == "halted" and not halt_seen:
                    yield sse("halt", {"reason": payload.reason}, redactor)
                yield sse("done", payload.model_dump(mode="json", by_alias=True), redactor)
            else:
                if redactor is not None:
                    payload = {**payload, "message": redactor.message(payload["message"])}
                yield sse("error", payload, redactor)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


__all__ = ["EVENT_KINDS", "EVENT_SCHEMA", "sse", "stream_message"]
