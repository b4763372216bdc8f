"""The Starlette application factory: :func:`create_app`."""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from veil import ConfigError, check_http_token, is_loopback
from veil_http import context, meta, sessions
from veil_http.api import Endpoint, Operation, openapi_path
from veil_http.auth import BearerAuth
from veil_http.errors import EXCEPTION_HANDLERS, Redactor
from veil_http.hosts import HostCheck, loopback_names
from veil_http.openapi import build_openapi
from veil_http.paths import EncodedSlashes, restore_slashes
from veil_http.plugin_routes import adapt, collect_routes

PLUGIN_NAME = "veil_http"


def own_operations() -> list[Operation]:
    """The HTTP plugin's own route table (sessions, context, meta)."""
    return sessions.operations() + context.operations() + meta.operations()


def _shape(path: str) -> str:
    """A path with its parameter names erased: two routes of one shape and method clash."""
    return re.sub(r"\{[^}]+\}", "{}", openapi_path(path))


def _check_clashes(operations: list[Operation]) -> None:
    seen: dict[tuple[str, str], Operation] = {}
    for op in operations:
        key = (op.method, _shape(op.path))
        if key in seen:
            other = seen[key]
            raise ConfigError(
                f"HTTP route {op.method} {op.path} is registered by both {other.plugin!r} "
                f"and {op.plugin!r}; disable one of the plugins"
            )
        seen[key] = op


def _dispatch(by_method: dict[str, Endpoint]) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        request.scope["path_params"] = restore_slashes(request.scope.get("path_params", {}))
        return await by_method[method](request)

    return endpoint


def mount(operations: list[Operation]) -> list[StarletteRoute]:
    """One Starlette route per path, dispatching on the method, so a wrong method answers 405
    with an ``Allow`` header listing every method the path has."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for op in operations:
        by_path.setdefault(op.path, {})[op.method] = op.endpoint
    return [
        StarletteRoute(path, _dispatch(methods), methods=sorted(methods))
        for path, methods in by_path.items()
    ]


def _ensure_render_hook(veil: Any) -> None:
    """Register this plugin on the Veil's manager when it was opened without it (tests,
    embedding), so its ``render`` hook feeds the streams; a blocked name stays blocked."""
    import veil_http

    if not veil.pm.is_registered(veil_http) and not veil.pm.has_plugin(PLUGIN_NAME):
        veil.pm.register(veil_http, name=PLUGIN_NAME)


def _secrets(veil: Any, token: str | None) -> list[str]:
    out = [token] if token else []
    for provider in veil.config.auth.providers.values():
        if provider.api_key is not None:
            out.append(provider.api_key.get_secret_value())
    return out


def create_app(
    veil: Any,
    *,
    token: str | None = None,
    max_body_bytes: int | None = None,
    host: str | None = None,
) -> Starlette:
    """Build the HTTP API over an open :class:`veil.core.app.Veil`.

    Args:
        veil: the project to serve (its plugins' ``register_routes`` are mounted too).
        token: bearer token every request must carry (at least
            :data:`~veil.core.settings.MIN_HTTP_TOKEN_CHARS` characters); None takes settings
            ``http.token`` (``VEIL_HTTP_TOKEN``), and an empty string turns the check off.
        max_body_bytes: request body limit in bytes (413 above); None takes settings
            ``http.maxBodyBytes`` (1 MiB by default).
        host: the address the app is served on; None takes settings ``http.host``
            (127.0.0.1). On a loopback address every request must name this machine in ``Host``
            (else 421) and carry no foreign ``Origin`` (else 403): :mod:`veil_http.hosts`.

    Returns:
        The :class:`Starlette` app. ``app.state`` holds ``veil``, ``openapi`` (the document),
        ``operations`` (the route table), ``max_body_bytes``, ``redactor``.

    Raises:
        ConfigError: two plugins (or a plugin and this one) declare the same method and path,
            or a contributed route is malformed (names the plugin and the route), or the token
            is too short.
    """
    from veil import __version__

    http = veil.config.settings.http
    if token is None and http.token is not None:
        token = http.token.get_secret_value()
    token = token or None
    if token is not None:
        try:
            check_http_token(token)
        except ValueError as exc:
            raise ConfigError(f"http.token: {exc}") from exc
    host = http.host if host is None else host
    limit = int(max_body_bytes if max_body_bytes is not None else http.max_body_bytes)
    if limit < 1:
        raise ConfigError(f"max_body_bytes must be at least 1, got {limit}")

    _ensure_render_hook(veil)
    operations = own_operations() + [adapt(r, veil) for r in collect_routes(veil)]
    _check_clashes(operations)

    app = Starlette(
        routes=mount(operations),
        middleware=[
            *([Middleware(HostCheck, allowed=loopback_names(host))] if is_loopback(host) else []),
            *([Middleware(BearerAuth, token=token)] if token else []),
            Middleware(EncodedSlashes),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.veil = veil
    app.state.operations = operations
    app.state.max_body_bytes = limit
    app.state.redactor = Redactor(_secrets(veil, token), core=veil.redactor)
    app.state.tasks = set()
    app.state.openapi = build_openapi(
        operations,
        version=__version__,
        bearer=token is not None,
        max_body_bytes=limit,
        host_check=is_loopback(host),
    )
    return app
