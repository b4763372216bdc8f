"""Build the OpenAPI 3.1 document from the route table (never written by hand).

Each :class:`~veil_http.api.Operation` gives its path, body, answers and own error statuses;
pydantic models become ``components.schemas`` (pydantic emits JSON Schema 2020-12, the dialect
of OpenAPI 3.1). Statuses that any route of a kind can answer are added here, once, from what
the app really does:

* 400 / 413: every route that reads a body (malformed JSON or text, over ``maxBodyBytes``);
* 422: every route that validates a JSON body or query string;
* 404: every route with path parameters (unknown session or item, or a value the path cannot
  hold, such as one with ``/``);
* 401: every route when a bearer token is set.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from veil_http.api import Operation, openapi_path
from veil_http.schemas import Body, ErrorOut

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}


def error_statuses(op: Operation, *, bearer: bool, host_check: bool = False) -> list[int]:
    """Every error status ``op`` can answer: its own plus those of its kind (module doc);
    ``host_check`` (a loopback server, :mod:`veil_http.hosts`) adds 403 and 421."""
    statuses = set(op.errors)
    if op.request is not None:
        statuses |= {400, 413}
        if op.request.media_type == "application/json":
            statuses.add(422)
    if op.query:
        statuses.add(422)
    if op.path_params:
        statuses.add(404)
    if bearer:
        statuses.add(401)
    if host_check:
        statuses |= {403, 421}
    return sorted(statuses)


def _component_schemas(operations: list[Operation]) -> dict[str, Any]:
    models: dict[str, type[BaseModel]] = {"ErrorOut": ErrorOut}
    for op in operations:
        for model in op.models:
            models[model.__name__] = model
    pairs = [(m, "validation" if issubclass(m, Body) else "serialization") for m in models.values()]
    _, defs = models_json_schema(pairs, ref_template="#/components/schemas/{model}")
    return dict(defs.get("$defs", {}))


def build_openapi(
    operations: list[Operation],
    *,
    title: str = "veil",
    version: str = "0.1.0",
    bearer: bool = False,
    max_body_bytes: int | None = None,
    host_check: bool = False,
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations``.

    Args:
        bearer: requests need ``Authorization: Bearer <token>`` (adds the security scheme and
            401 answers).
        max_body_bytes: the body limit, stated in the description.
        host_check: the server refuses foreign ``Host`` / ``Origin`` headers (adds 403 and 421
            answers).
    """
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        path = openapi_path(op.path)
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in op.path_params
        ]
        for name, schema, required, description in op.query:
            param: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": required,
                "schema": schema,
            }
            if description:
                param["description"] = description
            parameters.append(param)
        responses: dict[str, Any] = {}
        for status, content in op.responses.items():
            entry: dict[str, Any] = {"description": HTTPStatus(status).phrase}
            if content is not None:
                entry["content"] = {content.media_type: {"schema": content.schema}}
            responses[str(status)] = entry
        for status in error_statuses(op, bearer=bearer, host_check=host_check):
            responses[str(status)] = {
                "description": HTTPStatus(status).phrase,
                "content": {"application/json": {"schema": ERROR_REF}},
            }
        entry = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "tags": [op.tag],
            "responses": responses,
        }
        doc = (op.endpoint.__doc__ or "").strip()
        if doc:
            entry["description"] = doc
        if parameters:
            entry["parameters"] = parameters
        if op.request is not None:
            entry["requestBody"] = {
                "required": op.request_required,
                "content": {op.request.media_type: {"schema": op.request.schema}},
            }
        paths.setdefault(path, {})[op.method.lower()] = entry

    description = "veil's headless API: sessions, turns, compaction, context, plugin routes."
    if max_body_bytes is not None:
        description += f" Request bodies are limited to {max_body_bytes} bytes (413 above)."
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {"schemas": _component_schemas(operations)},
    }
    if bearer:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
