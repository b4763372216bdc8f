"""``GET /health``, ``GET /plugins`` and ``GET /openapi.json``.

None of them reads configuration values: plugin names, versions and hooks only, so no API key
or token can leak through them.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from veil_http.api import Operation, answer, operation
from veil_http.errors import json_response
from veil_http.schemas import HealthOut, PluginsOut
from veil_http.sessions import veil_of

TAG = "meta"


def loaded_plugins(pm: Any) -> list[str]:
    """Names of the registered plugins (blocked names, which pluggy lists with no plugin
    object, are left out)."""
    return [name for name, plugin in pm.list_name_plugin() if name and plugin is not None]


async def health(request: Request) -> Response:
    """Liveness, whether the context layer is on, and how many plugins are loaded."""
    from veil import __version__

    veil = veil_of(request)
    return answer(
        request,
        HealthOut(
            ok=True,
            context_layer=veil.context_layer_on,
            plugins=len(loaded_plugins(veil.pm)),
            version=__version__,
        ),
    )


async def plugins(request: Request) -> Response:
    """Loaded plugins with versions and hooks, hooks in call order, tools by plugin."""
    veil = veil_of(request)
    info = veil.describe()
    loaded = set(loaded_plugins(veil.pm))
    info["plugins"] = [p for p in info["plugins"] if p["name"] in loaded]
    return answer(request, PluginsOut.model_validate(info))


async def openapi(request: Request) -> Response:
    """This API's OpenAPI 3.1 document (generated from the route table)."""
    return json_response(request.app.state.openapi)


def operations() -> list[Operation]:
    """The meta routes of the table."""
    return [
        operation(
            "GET",
            "/health",
            health,
            tag=TAG,
            response=HealthOut,
            summary="Health and whether the context layer is on",
        ),
        operation(
            "GET",
            "/plugins",
            plugins,
            tag=TAG,
            response=PluginsOut,
            summary="Loaded plugins, hooks in call order, tools",
        ),
        operation(
            "GET",
            "/openapi.json",
            openapi,
            tag=TAG,
            response_schema={"type": "object", "description": "OpenAPI 3.1 document"},
            summary="This document",
        ),
    ]
