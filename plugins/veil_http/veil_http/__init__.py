"""veil_http: veil's headless HTTP API (Starlette) and the ``veil serve`` command.

Hooks implemented (veil/hookspecs.py): ``render`` (a session's events go to the requests
streaming it, see :mod:`veil_http.events`) and ``register_commands`` (``veil serve``). The routes
other plugins contribute through ``register_routes`` are mounted by :func:`create_app`.
Starlette and uvicorn load only when an app is built or served, never a terminal UI.
"""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl

# events and settings (pydantic) load when an event or the settings are asked for, not when
# ``veil --help`` loads the plugin (issue 30)

__all__ = ["register_settings", "create_app", "register_commands", "render"]


def create_app(
    veil: Any,
    *,
    token: str | None = None,
    max_body_bytes: int | None = None,
    host: str | None = None,
) -> Any:
    """Build the Starlette app over ``veil``; see :func:`veil_http.app.create_app`."""
    from veil_http.app import create_app as _create_app

    return _create_app(veil, token=token, max_body_bytes=max_body_bytes, host=host)


@hookimpl
def register_hookspecs() -> list[Any]:
    """The hook this plugin fires (``register_routes``: :mod:`veil_http.hookspecs`)."""
    from veil_http import hookspecs

    return [hookspecs]


@hookimpl
def render(event: Any) -> None:
    """Hand a render event to the requests streaming its session (never blocks)."""
    from veil_http.events import HUB

    HUB.publish(event)


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil serve``."""
    from veil_http.serve import add_serve_command

    add_serve_command(cli)


@hookimpl
def register_settings() -> dict[str, Any]:
    """Where ``veil serve`` listens: ``http.host``, ``port``, ``maxBodyBytes``
    (:class:`~veil_http.settings.ServeSettings`)."""
    from veil_http.settings import ServeSettings

    return {"http": ServeSettings}
