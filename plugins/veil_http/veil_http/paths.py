"""Encoded slashes stay inside their path segment.

Servers decode ``%2F`` to ``/`` before routing, so ``PUT /memory/..%2Fsettings.json`` would
look like a different path and answer 404, and the route never sees the name the caller sent.
:class:`EncodedSlashes` routes such a request with the slash replaced by a private-use
character; :func:`restore_slashes` puts ``/`` back into the path parameters, so the handler
sees ``../settings.json`` and refuses it for what it is (400 for an unsafe memory file name,
404 for an unknown session id).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

SLASH_STANDIN = "\ue000"
"""A private-use code point standing for ``/`` inside one segment while routing."""


def decode_keeping_slashes(raw_path: str) -> str:
    """Percent-decode a raw path, each ``%2F`` becoming :data:`SLASH_STANDIN`, not ``/``."""
    segments = raw_path.split("/")
    return "/".join(
        unquote(seg.replace("%2F", "%EE%80%80").replace("%2f", "%EE%80%80")) for seg in segments
    )


def restore_slashes(path_params: dict[str, Any]) -> dict[str, Any]:
    """Path parameters with :data:`SLASH_STANDIN` turned back into ``/``."""
    return {
        k: v.replace(SLASH_STANDIN, "/") if isinstance(v, str) else v
        for k, v in path_params.items()
    }


class EncodedSlashes:
    """ASGI middleware: route ``%2F`` as part of a segment (see the module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower():
            raw_path = raw.split(b"?", 1)[0].decode("latin-1")
            scope = {**scope, "path": decode_keeping_slashes(raw_path)}
        await self.app(scope, receive, send)
