"""Mount the routes other plugins contribute through ``register_routes``.

A :class:`veil.core.types.Route` is framework-neutral: a path, a method, a handler taking a
:class:`RouteRequest`, and JSON Schemas. Here each becomes an :class:`Operation`:

* a body whose schema is a string (``{"type": "string"}``) is raw text, handed over as bytes;
  its media type is the schema's ``contentMediaType`` (JSON Schema 2020-12), else
  ``text/plain`` for requests and ``text/*`` for answers;
* any other body schema is JSON: decoded (400 when malformed) and validated against the schema
  (422 naming the place) before the handler runs, so the document and the behaviour agree;
* synchronous handlers run in a worker thread (they do file I/O, take locks).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from veil import ConfigError, Route, RouteRequest, RouteResponse, call_impl, checked_list
from veil_http.api import Content, Operation, guard, openapi_path, parse_json, read_body
from veil_http.errors import ValidationFailed, json_response

METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")
_PATH = re.compile(r"^(/[A-Za-z0-9._~\-]*|/\{[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\})+$")


def collect_routes(veil: Any) -> list[Route]:
    """Every plugin's ``register_routes`` answer, with ``Route.plugin`` filled in.

    Raises:
        PluginHookFailed: a plugin's ``register_routes`` raised, or (PluginResultInvalid)
            returned something other than a list of :class:`~veil.core.types.Route`.
    """
    routes: list[Route] = []
    # the hook is this plugin's (veil_http.hookspecs); a Veil opened without veil_http loaded
    # (create_app on any Veil) has no declaration of it, only the implementations
    caller = getattr(veil.pm.hook, "register_routes", None)
    for impl in reversed(caller.get_hookimpls() if caller is not None else []):
        plugin_name = veil.pm.get_name(impl.plugin)
        result = call_impl(impl, "register_routes", veil=veil)
        expected = "a list of veil.core.types.Route"
        for route in checked_list(plugin_name, "register_routes", result, Route, expected):
            route.plugin = plugin_name
            routes.append(route)
    return routes


def is_text(schema: dict[str, Any] | None) -> bool:
    """Whether a body schema describes raw text rather than JSON."""
    return bool(schema) and schema.get("type") == "string"


def _validator(route: Route) -> Draft202012Validator | None:
    schema = route.request_schema
    if schema is None or is_text(schema):
        return None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(
            f"plugin {route.plugin!r}: route {route.method} {route.path}: request_schema is not "
            f"a valid JSON Schema ({exc.message})"
        ) from exc
    return Draft202012Validator(schema)


def _validate(validator: Draft202012Validator, data: Any) -> None:
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for err in errors[:5]:
            where = ".".join(str(p) for p in ("body", *err.absolute_path))
            parts.append(f"{where}: {err.message}")
        raise ValidationFailed("; ".join(parts))


def _render(result: Any, request: Request) -> Response:
    redactor = getattr(request.app.state, "redactor", None)
    if not isinstance(result, RouteResponse):
        result = RouteResponse(body=result)
    body = result.body
    if isinstance(body, bytes):
        return Response(body, status_code=result.status, media_type=result.content_type)
    if isinstance(body, str):
        text = redactor(body) if redactor is not None else body
        return Response(text, status_code=result.status, media_type=result.content_type)
    return json_response(body, result.status, redactor=redactor)


def adapt(route: Route, veil: Any) -> Operation:
    """Turn a contributed :class:`Route` into a mounted, documented :class:`Operation`.

    Raises:
        ConfigError: a method other than GET/PUT/POST/DELETE/PATCH, a malformed path, or a
            request schema that is not a JSON Schema (names the plugin and the route).
    """
    method = route.method.upper()
    where = f"plugin {route.plugin!r}: route {route.method} {route.path}"
    if method not in METHODS:
        raise ConfigError(f"{where}: method must be one of {', '.join(METHODS)}")
    if not _PATH.match(route.path):
        raise ConfigError(f"{where}: path must look like /name/{{param}}")
    validator = _validator(route)
    takes_body = route.request_schema is not None or method in ("PUT", "POST", "PATCH")
    is_async = inspect.iscoroutinefunction(route.handler)

    async def endpoint(request: Request) -> Response:
        raw = await read_body(request) if takes_body else b""
        data = None
        if validator is not None:
            data = parse_json(raw) if raw.strip() else None
            _validate(validator, data)
        req = RouteRequest(
            method=method,
            path_params={k: str(v) for k, v in request.path_params.items()},
            query=dict(request.query_params),
            body=raw,
            veil=veil,
            json=data,
        )
        if is_async:
            result = await route.handler(req)
        else:
            result = await run_in_threadpool(route.handler, req)
            if inspect.isawaitable(result):
                result = await result
        return _render(result, request)

    endpoint.__name__ = f"{route.plugin}_{method.lower()}"
    request = None
    if route.request_schema is not None:
        media = (
            route.request_schema.get("contentMediaType", "text/plain")
            if is_text(route.request_schema)
            else "application/json"
        )
        request = Content(media, route.request_schema)
    response = None
    if route.response_schema is not None:
        media = (
            route.response_schema.get("contentMediaType", "text/*")
            if is_text(route.response_schema)
            else "application/json"
        )
        response = Content(media, route.response_schema)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", openapi_path(route.path)).strip("_")
    errors = tuple(route.errors) + ((422,) if validator is not None else ())
    return Operation(
        method=method,
        path=route.path,
        endpoint=guard(endpoint),
        operation_id=f"{route.plugin}_{method.lower()}_{slug}",
        summary=route.summary,
        tag=route.plugin,
        request=request,
        request_required=route.request_schema is not None and not is_text(route.request_schema),
        responses={200: response},
        errors=errors,
        plugin=route.plugin,
    )
