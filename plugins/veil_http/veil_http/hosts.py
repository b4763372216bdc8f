"""Requests to a loopback server must be addressed to it and come from no foreign web page.

A web page the user opens can make the browser send requests to ``http://127.0.0.1:5051`` in two
ways, and ``veil serve`` without a token would run them (turns, tools, memory writes):

* **DNS rebinding**: the page's own name (``evil.example``) is made to resolve to 127.0.0.1, so
  the browser treats the API as the page's own origin; the request then carries
  ``Host: evil.example:5051``. A loopback server answers only ``Host`` names of this machine:
  ``localhost``, ``127.0.0.1``, ``[::1]`` and the configured bind host, any port (421
  ``MISDIRECTED_REQUEST`` otherwise).
* **Cross-site requests**: a "simple" POST (a form, ``fetch`` with ``text/plain``) reaches the
  server without a CORS preflight, with the right ``Host``. Browsers mark every such request with
  an ``Origin`` header; a request whose ``Origin`` is not on this machine gets 403
  ``FORBIDDEN_ORIGIN``. Programs (curl, httpx, the openai SDK) send no ``Origin`` and pass.

This is the check Starlette's ``TrustedHostMiddleware`` makes for ``Host``, with three
differences that matter here: ``[::1]:port`` is parsed (Starlette splits at the first ``:``), the
answer is veil's JSON error body, and ``Origin`` is checked too. Servers bound beyond loopback
need a bearer token instead (:func:`veil_http.serve.check_bind`), which a browser cannot send
across origins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from veil.core.settings import LOOPBACK_HOSTS
from veil_http.errors import error_response

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")
_PORT = re.compile(r"^[0-9]{1,5}$")


def host_name(header: str | None) -> str | None:
    """The host name of a ``Host`` header value, lower-cased, without port or IPv6 brackets
    (``[::1]:5051`` -> ``::1``, ``LocalHost:80`` -> ``localhost``); None when it is missing or
    malformed (user info, paths, spaces, a bad port)."""
    if not header:
        return None
    value = header.strip().lower()
    if value.startswith("["):
        inside, bracket, rest = value[1:].partition("]")
        if not bracket or not re.fullmatch(r"[0-9a-f:.]+", inside):
            return None
        name = inside
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
        if not _NAME.match(name):
            return None
    if rest and not (rest.startswith(":") and _PORT.match(rest[1:])):
        return None
    return name


def origin_host(origin: str) -> str | None:
    """The host name of an ``Origin`` header (``http://localhost:3000`` -> ``localhost``); None
    for ``null`` (sandboxed frames, ``file:`` pages) and anything that is not http(s)."""
    try:
        parts = urlsplit(origin.strip())
        name = parts.hostname
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not name:
        return None
    return name.lower()


def loopback_names(bind_host: str) -> frozenset[str]:
    """Host names a loopback server bound to ``bind_host`` answers: this machine's loopback
    names plus the bind host itself."""
    return frozenset(LOOPBACK_HOSTS | {bind_host.strip("[]").lower()})


class HostCheck:
    """ASGI middleware for a loopback server: 421 for a foreign ``Host``, 403 for a foreign
    ``Origin`` (see the module docstring).

    Args:
        app: the wrapped application.
        allowed: host names (no port, no brackets) the server answers.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.strip("[]").lower() for h in allowed)
        shown = sorted("[" + h + "]" if ":" in h else h for h in self.allowed)
        self._names = ", ".join(shown)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        origin = headers.get("origin")
        if host_name(host) not in self.allowed:
            status, code = 421, "MISDIRECTED_REQUEST"
            message = (
                f"Host {host!r} is not this server: veil serve on a loopback address answers "
                f"only requests addressed to {self._names} (any port), which protects it from "
                "DNS rebinding; use http://127.0.0.1:<port>/"
            )
        elif origin is not None and origin_host(origin) not in self.allowed:
            status, code = 403, "FORBIDDEN_ORIGIN"
            message = (
                f"Origin {origin!r} is not this machine: veil serve refuses requests that web "
                f"pages make (allowed origins: http(s)://{{{self._names}}}[:port]); programs "
                "send no Origin header"
            )
        else:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": code})
            return
        await error_response(status, code, message)(scope, receive, send)
