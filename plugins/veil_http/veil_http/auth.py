"""Bearer-token check for every request (pure ASGI middleware).

With a token set (``http.token`` in settings or ``VEIL_HTTP_TOKEN``), every request must carry
``Authorization: Bearer <token>``; anything else answers 401 with the JSON error body and a
``WWW-Authenticate: Bearer`` header. The comparison takes constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from veil_http.errors import error_response


class BearerAuth:
    """ASGI middleware refusing HTTP requests without the right bearer token.

    Args:
        app: the wrapped application.
        token: the expected token (non-empty).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("BearerAuth needs a non-empty token")
        self.app = app
        self._token = token.encode("utf-8")

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the token."""
        if not header:
            return False
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode("utf-8"), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.authorized(Headers(scope=scope).get("authorization")):
            await self.app(scope, receive, send)
            return
        response = error_response(
            401,
            "UNAUTHORIZED",
            "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
            "(the token is http.token in .veil/settings.json or VEIL_HTTP_TOKEN)",
            headers={"WWW-Authenticate": 'Bearer realm="veil"'},
        )
        await response(scope, receive, send)
