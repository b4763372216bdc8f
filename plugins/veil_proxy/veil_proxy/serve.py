"""``veil proxy``: the proxy under uvicorn, headless, with ``veil serve``'s binding and token
rules (:func:`veil_http.serve.check_bind`, :func:`veil_http.serve.check_sources`): loopback
without a token; any other address only with a token the user set (``VEIL_HTTP_TOKEN``), never
one or a host that the project's settings.json asks for.
"""

from __future__ import annotations

from typing import Any

import click

from veil import store_option

DEFAULT_PORT = 5052
"""The proxy's port (``veil serve`` has 5051, so both can run at once)."""


def build_server(
    veil: Any,
    host: str | None = None,
    port: int | None = None,
    *,
    upstream_model: str | None = None,
    memory_tools: bool = False,
) -> Any:
    """A :class:`uvicorn.Server` for the proxy over ``veil`` (not started).

    Args:
        host: address to bind (the user's choice); None takes settings ``http.host``.
        port: None takes :data:`DEFAULT_PORT`.
        upstream_model, memory_tools: see :func:`veil_proxy.app.create_app`.

    Raises:
        ConfigError: a non-loopback host without a token, or one the project's settings ask
            for or guard.
    """
    from veil_http.serve import check_bind, check_sources, uvicorn_server

    from veil import import_litellm
    from veil_proxy.app import create_app, shutting_down

    # every request is forwarded through litellm: loaded before the server reports ready, not
    # by the first request (issue 30: 8.5-9.5 s)
    import_litellm()

    http = veil.config.settings.http
    host_given = host is not None
    host = host or http.host
    port = DEFAULT_PORT if port is None else port
    token = http.token.get_secret_value() if http.token is not None else None
    check_bind(host, token)
    check_sources(veil, host, host_given)
    app = create_app(
        veil, token=token, host=host, upstream_model=upstream_model, memory_tools=memory_tools
    )
    return uvicorn_server(app, host, port, shutting_down)


def add_proxy_command(cli: click.Group) -> None:
    """Add ``veil proxy [--host H] [--port P] [--upstream-model M] [--memory-tools]``."""

    @cli.command("proxy")
    @store_option
    @click.option("--host", default=None, help="Address to bind (settings http.host; 127.0.0.1).")
    @click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=None,
        help=f"Port ({DEFAULT_PORT}).",
    )
    @click.option(
        "--upstream-model",
        default=None,
        help="Model every request goes to (default: the request's model, else models.main).",
    )
    @click.option(
        "--memory-tools/--no-memory-tools",
        default=False,
        envvar="VEIL_PROXY_MEMORY_TOOLS",
        show_envvar=True,
        help="Offer veil's memory tools to the model beside the client's; veil runs the calls "
        "and asks again (off by default: the client does not know them).",
    )
    @click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="Project root (default: current directory).",
    )
    @click.pass_obj
    def proxy(
        state: Any,
        host: str | None,
        port: int | None,
        upstream_model: str | None,
        memory_tools: bool,
        project: str | None,
    ) -> None:
        """Serve an OpenAI-compatible endpoint that fits each agent's prompt with veil."""
        from veil_http.serve import run_headless

        run_headless(
            state,
            project,
            lambda veil: build_server(
                veil, host, port, upstream_model=upstream_model, memory_tools=memory_tools
            ),
        )
