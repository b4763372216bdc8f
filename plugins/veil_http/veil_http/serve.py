"""``veil serve``: the HTTP API under uvicorn, headless.

Nothing here (nor in the app) imports a terminal UI; the REPL plugin may be blocked or absent.
Binding an address other than loopback (``127.0.0.1``, ``localhost``, ``::1``) needs a bearer
token, else the command refuses to start. Whether to serve beyond this machine is the user's
choice, never the project's: ``http.host`` and ``http.token`` from the project's
``.veil/settings.json`` (a file that comes with a clone, so everyone who has the repository knows
its token) do not open the server to the network; ``--host`` / ``VEIL_HTTP__HOST`` and
``VEIL_HTTP_TOKEN`` do.

When the server is asked to stop (SIGTERM, Ctrl-C), the commands tools are running are killed at
once (:func:`veil.stop_tool_processes`), so the turns in progress end and the server exits
instead of waiting for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from veil import ConfigError, stop_tool_processes, store_option

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
"""Loopback host names (:data:`veil.core.settings.LOOPBACK_HOSTS`, not imported from there so
that ``veil --help``, which lists ``veil serve``, does not load the settings models)."""

GRACEFUL_SHUTDOWN_S = 2.0
"""Seconds a stopping server (SIGTERM, Ctrl-C) waits for requests in flight before it cancels
them (uvicorn's ``timeout_graceful_shutdown``; its default, None, waits for ever). A turn waiting
on a slow provider kept ``veil serve`` alive until the provider answered (37 s in one try);
tool commands are killed at once either way. The same limit holds for ``veil proxy``."""


def is_loopback(host: str) -> bool:
    """:func:`veil.core.settings.is_loopback`, imported when a bind is checked."""
    from veil import is_loopback as check

    return check(host)


def run_headless(state: Any, project: str | None, build: Callable[[Any], Any]) -> None:
    """Open the project of a CLI invocation, build its server and run it until it stops (the
    body of ``veil serve``, ``veil proxy``...).

    Args:
        state: the CLI's :class:`veil.cli.VeilContext`.
        project: ``--project`` (None: the invocation's own).
        build: ``veil -> server`` with a blocking ``run()`` (e.g. :func:`build_server`); a
            :class:`ConfigError` it raises becomes a clean CLI error.

    On the way out the tool commands still running are killed (:func:`veil.stop_tool_processes`) and
    the project is closed. Says so on stderr when the context layer is off (nothing would be
    evicted).
    """
    if project:
        state.project = project
    veil = state.open()
    try:
        server = build(veil)
    except ConfigError as exc:
        veil.close()
        raise click.ClickException(exc.message) from exc
    if not veil.context_layer_on:
        click.echo(
            "veil: context layer off (no scorer or eviction plugin loaded): "
            "nothing will be evicted",
            err=True,
        )
    # what the first turn would load (the loop, the tokenizer, litellm where a call needs
    # it) loads before uvicorn says it is running: the first request waited 8.5-9.5 s for it
    veil.prepare()
    try:
        server.run()
    finally:
        stop_tool_processes()
        veil.close()


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose the API beyond this machine without a token.

    Raises:
        ConfigError: ``host`` is not loopback and ``token`` is empty.
    """
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to bind {host}: serving beyond this machine needs a bearer token; set "
            "VEIL_HTTP_TOKEN, or bind 127.0.0.1"
        )


def check_sources(veil: Any, host: str, host_given: bool) -> None:
    """Refuse a bind beyond this machine that the project's settings.json asked for, or that a
    token from that file would guard (see the module docstring).

    Args:
        veil: the open project (its :class:`~veil.core.settings.Config` knows where each
            setting came from).
        host: the address to bind.
        host_given: ``host`` came from the command line (the user), not from settings.

    Raises:
        ConfigError: naming the settings file and ``http.host`` / ``http.token``.
    """
    if is_loopback(host):
        return
    config = veil.config
    where = config.settings_file
    if not host_given and config.setting_from_project("http.host"):
        raise ConfigError(
            f"{where}: http.host: a project file may not open veil serve beyond this machine "
            f"({host}); pass --host {host} or set VEIL_HTTP__HOST={host} yourself"
        )
    if config.setting_from_project("http.token"):
        raise ConfigError(
            f"{where}: http.token: this token comes with the repository, so everyone who has it "
            f"knows it; set VEIL_HTTP_TOKEN to serve on {host}"
        )


SHUTTING_DOWN_STATUS = 503
"""What a request still in flight when the server stops answers (HTTP 503 Service Unavailable,
RFC 9110 15.6.4: the server cannot handle it now; a client may send it again to the next one).
Before, uvicorn answered such a cancelled request 500 and logged a traceback."""

SHUTTING_DOWN_MESSAGE = "veil is shutting down: the request was stopped before it finished"
"""The message of that answer (``veil serve``: code ``SHUTTING_DOWN``)."""

FORCED_EXIT_WAIT_S = 1.0
"""After a second Ctrl-C, seconds the server waits for the requests it cancels to send their 503
(each is one write, so far less is needed) before it exits."""


class AnswerAtShutdown:
    """ASGI wrapper: a request cancelled because the server is stopping answers ``answer(path)``
    (a :data:`SHUTTING_DOWN_STATUS` JSON error in the app's own error shape) instead of
    uvicorn's 500 and its ``CancelledError`` traceback; one whose answer had already started (a
    stream) has its body ended. A cancellation at any other time is passed on.

    Args:
        app: the ASGI application.
        answer: ``path -> starlette Response`` for a request cancelled at shutdown.
        stopping: whether the server is stopping (uvicorn's ``should_exit``).
    """

    def __init__(
        self, app: Any, answer: Callable[[str], Any], stopping: Callable[[], bool]
    ) -> None:
        self.app = app
        self.answer = answer
        self.stopping = stopping

    def __getattr__(self, name: str) -> Any:
        # the wrapped app's own attributes (Starlette's ``state``) stay reachable through it
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import asyncio

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if not self.stopping():
                raise
            # the cancellation is uvicorn's end of the graceful wait (or a forced exit): answer
            # and end this task normally, so uvicorn neither logs it nor answers 500
            if started:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await self.answer(scope.get("path", ""))(scope, receive, send)


def _server_class() -> type:
    import asyncio
    import contextlib
    import signal

    import uvicorn

    class StoppingServer(uvicorn.Server):
        """uvicorn's server, which also kills running tool commands when asked to stop, answers
        503 to the requests it cancels, and exits with 128 + the signal that stopped it
        (SIGTERM 143, Ctrl-C 130) without a traceback, however many signals arrive."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            # Off the signal handler: killing waits up to a grace period per group.
            threading.Thread(
                target=stop_tool_processes, name="veil-stop-tools", daemon=True
            ).start()

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            # uvicorn's, less the re-raise of the signals once stopped: inside asyncio.run a
            # re-raised SIGINT became KeyboardInterrupt ("Aborted!", exit 1) and a second one
            # cancelled the requests still open with a CancelledError traceback; run() exits
            # with the signal's status instead
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = [signal.SIGINT, signal.SIGTERM]
            if hasattr(signal, "SIGBREAK"):  # pragma: no cover - Windows
                handled.append(signal.SIGBREAK)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets=sockets)
            # a forced exit (second Ctrl-C) leaves the requests in flight running: cancel them
            # now, so each answers 503 (AnswerAtShutdown), rather than when asyncio.run ends
            left = [t for t in self.server_state.tasks if not t.done()]
            for task in left:
                task.cancel(msg="veil is shutting down")
            if left:
                await asyncio.wait(left, timeout=FORCED_EXIT_WAIT_S)

        def run(self, sockets: Any = None) -> None:
            try:
                super().run(sockets=sockets)
            except KeyboardInterrupt:  # a Ctrl-C after the handlers were put back
                self._captured_signals.append(signal.SIGINT)
            if self._captured_signals:
                raise SystemExit(128 + int(self._captured_signals[0]))

    return StoppingServer


def uvicorn_server(app: Any, host: str, port: int, answer: Callable[[str], Any]) -> Any:
    """The :class:`uvicorn.Server` of ``veil serve`` and ``veil proxy`` (not started): requests in
    flight get :data:`GRACEFUL_SHUTDOWN_S` to finish when it is asked to stop, then answer
    ``answer(path)`` (:class:`AnswerAtShutdown`); stopping kills the running tool commands; a
    second Ctrl-C stops it at once; :meth:`run` ends with ``SystemExit(128 + signal)`` when a
    signal stopped it.

    Args:
        app: the ASGI application.
        host: the address to bind (brackets of an IPv6 literal are removed).
        port: the port (0: any free one).
        answer: ``path -> starlette Response``, the app's :data:`SHUTTING_DOWN_STATUS` error.
    """
    import uvicorn

    holder: list[Any] = []
    config = uvicorn.Config(
        AnswerAtShutdown(app, answer, lambda: bool(holder and holder[0].should_exit)),
        host=host.strip("[]"),
        port=port,
        log_level="info",
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = _server_class()(config)
    holder.append(server)
    return server


def build_server(veil: Any, host: str | None = None, port: int | None = None) -> Any:
    """A :class:`uvicorn.Server` for ``veil`` (not started); stopping it (SIGTERM, Ctrl-C) kills
    the tool commands running in its turns.

    Args:
        host, port: default settings ``http.host`` / ``http.port`` (127.0.0.1:5051); a ``host``
            given here is the user's choice (the command line).

    Raises:
        ConfigError: a non-loopback host without a token (see :func:`check_bind`), or one that
            the project's settings.json asks for or guards (:func:`check_sources`).
    """
    from veil_http.app import create_app

    http = veil.config.settings.http
    host_given = host is not None
    host = host or http.host
    port = http.port if port is None else port
    token = http.token.get_secret_value() if http.token is not None else None
    # the project's own asks first: a token would not lift them, so "set VEIL_HTTP_TOKEN" first
    # would send the user to a fix that leads to the next refusal
    check_sources(veil, host, host_given)
    check_bind(host, token)
    app = create_app(veil, token=token, host=host)
    return uvicorn_server(app, host, port, _shutting_down)


def _shutting_down(path: str) -> Any:
    """``veil serve``'s answer to a request cut off by the server stopping: 503
    ``SHUTTING_DOWN`` in its error shape (:func:`veil_http.errors.error_response`)."""
    from veil_http.errors import error_response

    return error_response(SHUTTING_DOWN_STATUS, "SHUTTING_DOWN", SHUTTING_DOWN_MESSAGE)


def add_serve_command(cli: click.Group) -> None:
    """Add ``veil serve [--host H] [--port P] [--project DIR]`` to the command line."""

    @cli.command("serve")
    @store_option
    @click.option("--host", default=None, help="Address to bind (settings http.host; 127.0.0.1).")
    @click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=None,
        help="Port (settings http.port; 5051).",
    )
    @click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="Project root (default: current directory).",
    )
    @click.pass_obj
    def serve(state: Any, host: str | None, port: int | None, project: str | None) -> None:
        """Serve the HTTP API (headless; JSON, SSE, /openapi.json)."""
        run_headless(state, project, lambda veil: build_server(veil, host, port))
