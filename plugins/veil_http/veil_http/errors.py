"""Every error answers ``{"error": {"code", "message"}}`` as JSON, never a traceback.

Core errors (:class:`veil.core.errors.VeilError`) carry their own ``code`` and ``http_status``
(seed 000's ``SESSION_NOT_FOUND`` 404, ``SESSION_CLOSED`` / ``COMPACTION_DISABLED`` 400...);
Starlette's own 404 / 405 and anything unexpected are mapped here too. Every body
:func:`json_response` renders and every message passes through :class:`Redactor`: credentials
become ``[redacted:NAME]`` (the core's :mod:`veil.core.safety.redaction`), and veil's own secrets
(provider API keys, the bearer token, secret-looking environment variables) are removed even
when ``security.redactSecrets`` is off.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from veil import BadRequest, VeilError

log = logging.getLogger("veil_http")

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
    """What the HTTP API sends back passes through here: the core's redactor
    (:class:`veil.core.safety.redaction.Redactor`) with the server's own secrets added.

    Args:
        secrets: secrets of this server (the bearer token, provider API keys); values under
            8 characters are ignored.
        core: the project's redactor (``veil.redactor``); default one that knows the
            secret-looking environment variables (:func:`veil.core.safety.redaction.environment_secrets`).

    With ``security.redactSecrets`` off only the known secrets are removed (as veil did before
    it redacted anything else).
    """

    def __init__(self, secrets: list[str] | tuple[str, ...] = (), core: Any = None) -> None:
        from veil import Redactor as CoreRedactor
        from veil import environment_secrets

        base = core if core is not None else CoreRedactor(environment_secrets())
        self.core = base.with_known([s for s in secrets if s])

    @property
    def secrets(self) -> tuple[str, ...]:
        """The known secrets, longest first."""
        return self.core.known

    def __call__(self, text: str) -> str:
        """``text`` with credentials replaced (known secrets only when redaction is off)."""
        if self.core.enabled:
            return self.core.text(text)
        return self.core.known_only(text)

    def value(self, data: Any) -> Any:
        """JSON-like ``data`` with credentials replaced in its strings
        (:meth:`veil.core.safety.redaction.Redactor.value`); unchanged when redaction is off."""
        return self.core.value(data)

    def known_only(self, text: str) -> str:
        """``text`` with the known secrets replaced."""
        return self.core.known_only(text)

    def message(self, text: str) -> str:
        """An error message with known secrets (also in part: a run of 12 or more of its characters) and
        key-shaped strings removed (:func:`veil.core.models.llm.redact`)."""
        from veil import redact

        return redact(self.core.known_only(text), list(self.core.known))


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
    """Render ``body`` as compact UTF-8 JSON with secrets removed: every string value
    redacted (:meth:`Redactor.value`), then the known secrets removed from the rendered text.

    Floats that are not finite become null (JSON has no NaN); unknown objects become strings.
    """
    data = jsonable(body)
    if redactor is not None:
        data = redactor.value(data)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if redactor is not None:
        text = redactor.known_only(text)
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
