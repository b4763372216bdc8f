"""Every error answers ``{"error": {"code", "message"}}`` as JSON, never a traceback.

Core errors (:class:`veil.core.errors.VeilError`) carry their own ``code`` and ``http_status``
(seed 000's ``SESSION_NOT_FOUND`` 404, ``SESSION_CLOSED`` / ``COMPACTION_DISABLED`` 400...);
Starlette's own 404 / 405 and anything unexpected are mapped here too. Known secrets (provider
API keys, the bearer token, secret-looking environment variables) are removed from every
message, and from every body :func:`json_response` renders.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from veil.core.errors import BadRequest, VeilError

log = logging.getLogger("veil_http")

REDACTED = "[redacted]"
_ENV_SECRET_NAME = re.compile(r"(?i)(API_KEY|_TOKEN|SECRET|PASSWORD|_KEY$)")
_MIN_SECRET_CHARS = 8
_STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "VALIDATION_ERROR",
}


class ItemNotFound(VeilError):  # noqa: N818 - named like the core's SessionNotFound
    """No context item with that id in that session (404 ``ITEM_NOT_FOUND``)."""

    code = "ITEM_NOT_FOUND"
    http_status = 404


class InvalidBody(BadRequest):
    """The body is not valid JSON / UTF-8 (400 ``INVALID_JSON``)."""

    code = "INVALID_JSON"


class ValidationFailed(VeilError):  # noqa: N818 - an HTTP status, like BadRequest
    """The body or query parameters break the declared schema (422 ``VALIDATION_ERROR``); the
    message names each field (``body.content: Field required``)."""

    code = "VALIDATION_ERROR"
    http_status = 422


class BodyTooLarge(VeilError):  # noqa: N818 - an HTTP status, like BadRequest
    """The body exceeds ``http.max_body_bytes`` (413 ``PAYLOAD_TOO_LARGE``)."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class Redactor:
    """Removes known secrets from text: exact occurrences of each secret of 8+ characters.

    Args:
        secrets: provider API keys, the bearer token...; secret-looking environment variables
            (names with ``API_KEY``, ``_TOKEN``, ``SECRET``, ``PASSWORD``, ending ``_KEY``; the
            rule of :mod:`veil.core.llm`) are added.

    Exact replacement is linear in the text, so it runs on every response body.
    """

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        env = [v for k, v in os.environ.items() if _ENV_SECRET_NAME.search(k)]
        found = {s for s in [*secrets, *env] if s and len(s) >= _MIN_SECRET_CHARS}
        # Longest first so a key containing another is removed whole.
        self.secrets = sorted(found, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` with every known secret replaced by ``[redacted]``."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def message(self, text: str) -> str:
        """An error message with known secrets and key-shaped strings removed (core's redact)."""
        from veil.core.llm import redact

        return redact(self(text))


def jsonable(value: Any) -> Any:
    """Make floats JSON-safe (NaN / inf -> None) and anything unknown a string."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def json_response(
    body: Any,
    status: int = 200,
    *,
    redactor: Redactor | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """Render ``body`` as compact UTF-8 JSON with secrets removed.

    Floats that are not finite become null (JSON has no NaN); unknown objects become strings.
    """
    text = json.dumps(jsonable(body), ensure_ascii=False, separators=(",", ":"))
    if redactor is not None:
        text = redactor(text)
    return Response(text, status_code=status, media_type="application/json", headers=headers)


def error_body(code: str, message: str) -> dict[str, Any]:
    """``{"error": {"code": code, "message": message}}``."""
    return {"error": {"code": code, "message": message}}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    redactor: Redactor | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A JSON error answer (secrets removed from ``message``)."""
    if redactor is not None:
        message = redactor.message(message)
    return json_response(error_body(code, message), status, redactor=redactor, headers=headers)


def _redactor(request: Request) -> Redactor | None:
    return getattr(request.app.state, "redactor", None)


async def veil_error_handler(request: Request, exc: Exception) -> Response:
    """Map a :class:`VeilError` to its ``http_status`` and ``code``."""
    assert isinstance(exc, VeilError)
    status = exc.http_status if 400 <= exc.http_status < 600 else 500
    if status >= 500 and status not in (501, 502, 503):
        log.error("veil error on %s %s", request.method, request.url.path, exc_info=exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return error_response(
        status, exc.code, exc.message, redactor=_redactor(request), headers=headers
    )


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown route 404, wrong method 405 with ``Allow``) as JSON."""
    assert isinstance(exc, HTTPException)
    code = _STATUS_CODES.get(exc.status_code, f"HTTP_{exc.status_code}")
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"method {request.method} not allowed on {request.url.path} (allowed: {allowed})"
    else:
        message = str(exc.detail)
    return error_response(
        exc.status_code, code, message, redactor=_redactor(request), headers=exc.headers
    )


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    """Anything else: logged with its traceback on the server, a plain 500 for the caller."""
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500, "INTERNAL_ERROR", f"internal error ({type(exc).__name__}); see the server log"
    )


EXCEPTION_HANDLERS = {
    VeilError: veil_error_handler,
    HTTPException: http_error_handler,
    Exception: unexpected_error_handler,
}
"""Handlers for :class:`starlette.applications.Starlette`'s ``exception_handlers``."""
