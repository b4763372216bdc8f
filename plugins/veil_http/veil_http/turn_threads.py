"""Turns run on daemon threads, so a stopping server is never held by a provider.

Starlette's ``run_in_threadpool`` runs a call on one of anyio's worker threads, which are not
daemons: the interpreter (and :func:`veil.core.background.finish`, which joins the same threads
before it exits) waits for each to end. A turn waiting on a slow provider kept a SIGTERM'd
``veil serve`` alive until the provider answered (37 s in one try; issue 30: every exit within
5 s). uvicorn cancels the request after :data:`veil_http.serve.GRACEFUL_SHUTDOWN_S`; the turn's
thread, a daemon here, then ends with the process. What it had not finished is lost as a crash
would lose it: the store commits whole transactions, the tool commands are killed by
``stop_tool_processes``, and the turn's user message stays stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run on a new daemon thread (with the caller's context
    variables, as ``run_in_threadpool`` copies them).

    Returns what ``fn`` returns; raises what it raises. Cancelling the awaiting task leaves the
    thread running to its end (its result is dropped), as ``run_in_threadpool`` does.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the request was cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result, error = context.run(fn, *args, **kwargs), None
        except BaseException as exc:  # handed to the awaiting task, which raises it
            result, error = None, exc
        # the loop is closed when the server stopped before the turn ended: nobody waits
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="veil-http-turn", daemon=True).start()
    return await future
