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
  an ``Origin`` header; a request whose ``Origin`` is not this server's own (a name of this
  machine *and* the port the request was addressed to) gets 403 ``FORBIDDEN_ORIGIN``. Programs
  (curl, httpx, the openai SDK) send no ``Origin`` and pass.

  The port matters: a page served by another local server (a project's dev server on
  ``localhost:3000``, which runs the repository's code in the browser) is another origin
  (RFC 6454 section 4: scheme, host and port), and a cloned repository must not reach the agent
  through it.

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

from veil import LOOPBACK_HOSTS
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


def host_port(header: str | None) -> int | None:
    """The port of a ``Host`` header value (``127.0.0.1:5051`` -> 5051, ``[::1]:80`` -> 80);
    None when it names none (the scheme's default port then applies)."""
    if not header:
        return None
    value = header.strip()
    after_name = value.partition("]")[2] if value.startswith("[") else value
    _, colon, port = after_name.rpartition(":")
    return int(port) if colon and _PORT.match(port) else None


def origin_port(origin: str) -> int | None:
    """The port of an ``Origin`` header, the scheme's default when it names none
    (``http://localhost`` -> 80, ``https://localhost`` -> 443); None when it is not http(s) or
    malformed."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None
    return port if port is not None else (443 if parts.scheme == "https" else 80)


def same_origin(origin: str, host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a browser's ``Origin`` is this server's own: its host is one of ``allowed`` and
    its port is the one the request was addressed to (``Host``; the origin scheme's default port
    when ``Host`` names none). RFC 6454 section 4 compares scheme, host and port; the scheme is
    not compared here because the server cannot tell which one the browser used, and only http
    and https origins pass."""
    name, port = origin_host(origin), origin_port(origin)
    if name is None or port is None or name not in allowed:
        return False
    addressed = host_port(host)
    if addressed is None:
        addressed = 443 if origin.strip().lower().startswith("https:") else 80
    return port == addressed


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
    """ASGI middleware for a loopback server: 421 for a foreign ``Host``, 403 for an ``Origin``
    that is not this server's own (see the module docstring).

    Args:
        app: the wrapped application.
        allowed: host names (no port, no brackets) the server answers.
        server: how the refusals name the server (``veil proxy``, ``veil mcp --http``).
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str], server: str = "veil serve") -> None:
        self.app = app
        self.server = server
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
                f"Host {host!r} is not this server: {self.server} on a loopback address answers "
                f"only requests addressed to {self._names} (any port), which protects it from "
                "DNS rebinding; use http://127.0.0.1:<port>/"
            )
        elif origin is not None and not same_origin(origin, host, self.allowed):
            status, code = 403, "FORBIDDEN_ORIGIN"
            message = (
                f"Origin {origin!r} is not this server: {self.server} refuses requests that web "
                "pages from other origins make, other local ports included (allowed: "
                f"http(s)://{{{self._names}}} on the port this request was sent to); programs "
                "send no Origin header"
            )
        else:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": code})
            return
        await error_response(status, code, message)(scope, receive, send)
