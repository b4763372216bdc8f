"""``veil mcp``: serve one project's memory over MCP, on stdio (default) or streamable HTTP.

stdio is what Claude Code, Codex and Cursor launch: the client starts ``veil mcp`` as a
subprocess and talks JSON-RPC over its stdin and stdout (the SDK moves anything else written to
stdout onto stderr while it serves, so a stray print cannot break the protocol).

``--http`` serves streamable HTTP at ``http://HOST:PORT/mcp`` (default ``127.0.0.1:5052``), with
``veil serve``'s rules, imported from :mod:`veil_http` rather than copied:

* beyond loopback a bearer token is required (``VEIL_HTTP_TOKEN``, or ``http.token`` from the
  user's settings; :func:`veil_http.serve.check_bind`), and the project's own settings.json can
  neither open the server to the network nor provide that token
  (:func:`veil_http.serve.check_sources`);
* with a token set, every request must carry ``Authorization: Bearer <token>``
  (:class:`veil_http.auth.BearerAuth`, 401 otherwise);
* on loopback, requests must be addressed to this machine and come from no foreign web page
  (:class:`veil_http.hosts.HostCheck`: DNS rebinding, 421 / 403).
"""

from __future__ import annotations

from typing import Any

import click

from veil import ConfigError, VeilError, store_option

DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 5052
"""``veil mcp --http``'s port: next to ``veil serve``'s 5051, so both can run side by side."""

MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint answers (the SDK's and the clients' usual path)."""


def http_token(veil: Any) -> str | None:
    """The bearer token ``veil mcp --http`` requires: settings ``http.token`` (or
    ``VEIL_HTTP_TOKEN``), as ``veil serve``; None when unset.

    Raises:
        ConfigError: the token is shorter than ``veil serve`` accepts.
    """
    from veil import check_http_token

    http = veil.config.settings.http
    token = http.token.get_secret_value() if http.token is not None else None
    if not token:
        return None
    try:
        check_http_token(token)
    except ValueError as exc:
        raise ConfigError(f"http.token: {exc}") from exc
    return token


def build_http_app(server: Any, host: str, token: str | None) -> Any:
    """The Starlette app serving ``server`` at :data:`MCP_PATH`, behind veil_http's host check
    (loopback) and bearer check (when ``token`` is set).

    Args:
        server: a :class:`veil_mcp.server.VeilMCPServer`.
        host: the address it will be bound to.
        token: the bearer token every request must carry, or None.
    """
    from starlette.middleware import Middleware
    from veil_http.auth import BearerAuth
    from veil_http.hosts import HostCheck, loopback_names

    from veil import is_loopback

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host.strip("[]"))
    # Starlette runs user_middleware first to last, outermost first: as in veil_http's app.
    app.user_middleware[:0] = [
        *(
            [Middleware(HostCheck, allowed=loopback_names(host), server="veil mcp --http")]
            if is_loopback(host)
            else []
        ),
        *([Middleware(BearerAuth, token=token)] if token else []),
    ]
    return app


def build_http_server(server: Any, host: str, port: int) -> Any:
    """A :class:`uvicorn.Server` for ``server`` (not started).

    Raises:
        ConfigError: a host beyond loopback without a token, or a host or token that the
            project's settings.json asks for (see the module docstring); a token too short.
    """
    import uvicorn
    from veil_http.serve import check_bind, check_sources

    veil = server.veil
    token = http_token(veil)
    check_bind(host, token)
    check_sources(veil, host, host_given=True)
    app = build_http_app(server, host, token)
    config = uvicorn.Config(
        app, host=host.strip("[]"), port=port, log_level="warning", server_header=False
    )
    return uvicorn.Server(config)


def check_agent(veil: Any, agent: str) -> None:
    """Refuse an agent the session could not run as, before serving: a bad name, an invalid
    agent.json, or (as :meth:`veil.core.app.Veil.new_session` does) an agent other than the
    default one without a ``.veil/agents/<name>/`` folder.

    Raises:
        UnsafePath, ConfigError, AgentNotFound: naming the agent.
    """
    from veil import AgentNotFound

    veil.agent_snapshot(agent)  # validates the name and agent.json
    if agent != veil.config.settings.default_agent:
        folder = veil.config.agent_file(agent).parent
        if not folder.is_dir():
            raise AgentNotFound(f"--agent: agent {agent!r} not found: no {folder}")


def add_mcp_command(cli: click.Group) -> None:
    """Add ``veil mcp [--http] [--host H] [--port P] [--project DIR] [--agent NAME]``."""

    @cli.command("mcp")
    @store_option
    @click.option(
        "--http",
        "use_http",
        is_flag=True,
        help=f"Serve streamable HTTP at http://HOST:PORT{MCP_PATH} instead of stdio.",
    )
    @click.option(
        "--host",
        default=None,
        help=f"With --http: address to bind ({DEFAULT_HTTP_HOST}; beyond loopback needs "
        "VEIL_HTTP_TOKEN).",
    )
    @click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=None,
        help=f"With --http: port ({DEFAULT_HTTP_PORT}).",
    )
    @click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="Project root (default: current directory).",
    )
    @click.option(
        "--agent", metavar="NAME", default=None, help="Agent to act as (settings defaultAgent)."
    )
    @click.pass_obj
    def mcp(
        state: Any,
        use_http: bool,
        host: str | None,
        port: int | None,
        project: str | None,
        agent: str | None,
    ) -> None:
        """Serve this project's memory to MCP clients (Claude Code, Codex, Cursor): memory
        tools and the MEMORY.md files, over stdio (default) or streamable HTTP (--http)."""
        import anyio

        from veil_mcp.server import VeilMCPServer

        if not use_http and (host is not None or port is not None):
            raise click.UsageError("--host and --port go with --http")
        if project:
            state.project = project
        veil = state.open()
        server = None
        try:
            try:
                if agent is not None:  # a bad name or agent.json fails now, not at a call
                    check_agent(veil, agent)
                server = VeilMCPServer(veil, agent=agent)
                if use_http:
                    http = build_http_server(
                        server,
                        host or DEFAULT_HTTP_HOST,
                        DEFAULT_HTTP_PORT if port is None else port,
                    )
            except VeilError as exc:  # settings, a bad agent name or agent.json, the bind
                raise click.ClickException(exc.message) from exc
            if use_http:
                http.run()
            else:
                anyio.run(server.run_stdio_async)
        finally:
            if server is not None:
                server.close()
            veil.close()
