"""The route table: every route declares its body, query, answers and errors once; the same
declaration validates requests, mounts the Starlette route and feeds ``/openapi.json``.

Two kinds of routes end up as :class:`Operation`:

* the plugin's own, declared with :func:`operation` and pydantic models (:mod:`veil_http.schemas`);
* routes other plugins contribute through ``register_routes`` (:class:`veil.core.types.Route`,
  JSON Schemas as dicts), adapted in :mod:`veil_http.plugin_routes`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from veil import VeilError
from veil_http.errors import (
    BodyTooLarge,
    InvalidBody,
    ValidationFailed,
    error_response,
    json_response,
)

log = logging.getLogger("veil_http")

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Content:
    """A body as OpenAPI describes it: media type and JSON Schema (``$ref``s allowed)."""

    media_type: str
    schema: dict[str, Any]


@dataclass
class Operation:
    """One method on one path.

    Attributes:
        method, path: ``POST``, ``/sessions/{session_id}/messages`` (Starlette path syntax, the
            same as OpenAPI's).
        endpoint: the Starlette endpoint (already guarded: errors become JSON answers).
        operation_id, summary, tag: for the OpenAPI document.
        request: the body, or None when the route takes none.
        request_required: whether an empty body is refused.
        responses: 2xx status -> body (None: no content, e.g. 204).
        errors: 4xx / 5xx statuses the route itself can answer (404 unknown session...).
        query: ``(name, JSON Schema, required, description)`` per query parameter.
        plugin: the plugin that contributed the route (``veil_http`` for its own).
        models: pydantic models whose schemas go to ``components.schemas``.
    """

    method: str
    path: str
    endpoint: Endpoint
    operation_id: str
    summary: str
    tag: str
    request: Content | None = None
    request_required: bool = True
    responses: dict[int, Content | None] = field(default_factory=dict)
    errors: tuple[int, ...] = ()
    query: tuple[tuple[str, dict[str, Any], bool, str], ...] = ()
    plugin: str = "veil_http"
    models: tuple[type[BaseModel], ...] = ()

    @property
    def path_params(self) -> list[str]:
        """Names of the ``{name}`` parts of the path, in order."""
        return re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}", self.path)


def openapi_path(path: str) -> str:
    """Starlette path -> OpenAPI path (``{file:path}`` -> ``{file}``)."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*):[a-z]+\}", r"{\1}", path)


def ref(model: type[BaseModel]) -> dict[str, str]:
    """``{"$ref": "#/components/schemas/<Model>"}``."""
    return {"$ref": f"#/components/schemas/{model.__name__}"}


# -- reading requests -------------------------------------------------------------------------


async def read_body(request: Request) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``app.state.max_body_bytes``.

    A declared ``Content-Length`` over the limit is refused before reading; a chunked body is
    counted as it streams in, so an oversized upload is never held in memory whole.

    Raises:
        BodyTooLarge: over the limit. InvalidBody: a malformed Content-Length.
    """
    limit: int = request.app.state.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise InvalidBody(f"Content-Length: not a number ({declared!r})") from None
        if size > limit:
            raise BodyTooLarge(
                f"body of {size} bytes exceeds the limit of {limit} bytes (http.maxBodyBytes)"
            )
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge(f"body exceeds the limit of {limit} bytes (http.maxBodyBytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    """Decode a UTF-8 JSON body.

    Raises:
        InvalidBody: not UTF-8 or not JSON (the message gives the position).
    """
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidBody(f"body: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidBody(
            f"body: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidBody("body: JSON nested too deeply") from None


def _describe(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in (where, *err["loc"]))
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


async def parse_body(request: Request, model: type[BaseModel], *, required: bool) -> BaseModel:
    """Read, decode and validate a JSON body against ``model``.

    An empty body stands for ``{}`` when the body is optional.

    Raises:
        BodyTooLarge (413), InvalidBody (400), ValidationFailed (422, naming each field).
    """
    raw = await read_body(request)
    if not raw.strip():
        if required:
            raise ValidationFailed("body: a JSON object is required")
        data: Any = {}
    else:
        data = parse_json(raw)
    if not isinstance(data, dict):
        raise ValidationFailed(f"body: expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValidationFailed(_describe(exc, "body")) from None


def parse_query(request: Request, model: type[BaseModel]) -> BaseModel:
    """Validate the query string against ``model`` (last value of a repeated name wins).

    Raises:
        ValidationFailed: naming the parameter (422).
    """
    try:
        return model.model_validate(dict(request.query_params))
    except ValidationError as exc:
        raise ValidationFailed(_describe(exc, "query")) from None


# -- declaring routes -------------------------------------------------------------------------


def guard(endpoint: Endpoint) -> Endpoint:
    """Wrap an endpoint so that every failure is a JSON error answer: :class:`VeilError` by its
    ``http_status``, anything else a logged 500 without traceback for the caller."""

    async def guarded(request: Request) -> Response:
        redactor = getattr(request.app.state, "redactor", None)
        try:
            return await endpoint(request)
        except ClientDisconnect:  # nobody is left to answer; not a server fault
            return Response(status_code=400)
        except VeilError as exc:
            status = exc.http_status if 400 <= exc.http_status < 600 else 500
            if status == 500:
                log.error("veil error on %s %s", request.method, request.url.path, exc_info=exc)
            return error_response(status, exc.code, exc.message, redactor=redactor)
        except Exception as exc:  # noqa: BLE001 - no traceback ever reaches a caller
            log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
            return error_response(
                500,
                "INTERNAL_ERROR",
                f"internal error ({type(exc).__name__}); see the server log",
                redactor=redactor,
            )

    guarded.__name__ = getattr(endpoint, "__name__", "endpoint")
    guarded.__doc__ = endpoint.__doc__
    return guarded


def operation(
    method: str,
    path: str,
    handler: Endpoint,
    *,
    summary: str,
    tag: str,
    body: type[BaseModel] | None = None,
    body_required: bool = True,
    query: type[BaseModel] | None = None,
    response: type[BaseModel] | None = None,
    status: int = 200,
    media_type: str = "application/json",
    response_schema: dict[str, Any] | None = None,
    errors: tuple[int, ...] = (),
) -> Operation:
    """Declare one of the plugin's own routes.

    Args:
        handler: ``async handler(request) -> Response``; it reads its body with
            :func:`parse_body` (same ``body`` model) and answers with :func:`answer`.
        body, query, response: pydantic models (documented and validated).
        status: the success status (201 for a creation, 204 for no content).
        media_type, response_schema: for answers that are not a ``response`` model
            (``text/event-stream``).
        errors: error statuses besides the ones every route can give (see
            :mod:`veil_http.openapi`).
    """
    models: list[type[BaseModel]] = [m for m in (body, response) if m is not None]
    content = None
    if response is not None:
        content = Content(media_type, ref(response))
    elif response_schema is not None:
        content = Content(media_type, response_schema)
    query_params: tuple[tuple[str, dict[str, Any], bool, str], ...] = ()
    if query is not None:
        schema = query.model_json_schema()
        required = set(schema.get("required", []))
        query_params = tuple(
            (name, _query_schema(prop), name in required, prop.get("description", ""))
            for name, prop in schema.get("properties", {}).items()
        )
    op_id = handler.__name__.lstrip("_")
    return Operation(
        method=method,
        path=path,
        endpoint=guard(handler),
        operation_id=op_id,
        summary=summary,
        tag=tag,
        request=Content("application/json", ref(body)) if body is not None else None,
        request_required=body_required,
        responses={status: content},
        errors=errors,
        query=query_params,
        models=tuple(models),
    )


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema without pydantic's ``null`` alternative (an absent parameter
    is how a query string says None) and without title / description."""
    out = {k: v for k, v in prop.items() if k not in ("title", "description")}
    options = [o for o in out.pop("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        out.update(options[0])
    elif options:
        out["anyOf"] = options
    if out.get("default", 0) is None:
        del out["default"]
    return out


def answer(
    request: Request, model: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """Render a response model as JSON (camelCase aliases, secrets removed)."""
    return json_response(
        model.model_dump(mode="json", by_alias=True),
        status,
        redactor=getattr(request.app.state, "redactor", None),
        headers=headers,
    )
