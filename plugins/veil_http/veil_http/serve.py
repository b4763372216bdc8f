"""``veil serve``: the HTTP API under uvicorn, headless.

Nothing here (nor in the app) imports a terminal UI; the REPL plugin may be blocked or absent.
Binding an address other than loopback (``127.0.0.1``, ``localhost``, ``::1``) needs a bearer
token, else the command refuses to start.
"""

from __future__ import annotations

from typing import Any

import click

from veil.core.errors import ConfigError

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def check_bind(host: str, token: str | None) -> None:
    """Refuse to expose the API beyond this machine without a token.

    Raises:
        ConfigError: ``host`` is not loopback and ``token`` is empty.
    """
    if host.strip("[]") not in LOOPBACK and not token:
        raise ConfigError(
            f"refusing to bind {host}: serving beyond this machine needs a bearer token; set "
            "VEIL_HTTP_TOKEN or http.token in .veil/settings.json, or bind 127.0.0.1"
        )


def build_server(veil: Any, host: str | None = None, port: int | None = None) -> Any:
    """A :class:`uvicorn.Server` for ``veil`` (not started).

    Args:
        host, port: default settings ``http.host`` / ``http.port`` (127.0.0.1:5051).

    Raises:
        ConfigError: a non-loopback host without a token (see :func:`check_bind`).
    """
    import uvicorn

    from veil_http.app import create_app

    http = veil.config.settings.http
    host = host or http.host
    port = http.port if port is None else port
    token = http.token.get_secret_value() if http.token is not None else None
    check_bind(host, token)
    app = create_app(veil, token=token)
    config = uvicorn.Config(
        app, host=host.strip("[]"), port=port, log_level="info", lifespan="off", server_header=False
    )
    return uvicorn.Server(config)


def add_serve_command(cli: click.Group) -> None:
    """Add ``veil serve [--host H] [--port P] [--project DIR]`` to the command line."""

    @cli.command("serve")
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
        if project:
            state.project = project
        veil = state.open()
        try:
            server = build_server(veil, host, port)
        except ConfigError as exc:
            raise click.ClickException(exc.message) from exc
        if not veil.context_layer_on:
            click.echo(
                "veil: context layer off (no scorer or eviction plugin loaded): "
                "nothing will be evicted",
                err=True,
            )
        try:
            server.run()
        finally:
            veil.close()
