"""veil_proxy: ``veil proxy``, an OpenAI-compatible (and Anthropic-compatible) endpoint that an
agent points its base URL at; veil captures the conversation, fits the prompt to the upstream
model's window and forwards it through litellm (see :mod:`veil_proxy.app`).

Hook implemented (veil/hookspecs.py): ``register_commands`` (``veil proxy``). Starlette, uvicorn
and litellm load only when the proxy is built or served.
"""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl

__all__ = ["create_app", "register_commands"]


def create_app(veil: Any, **kwargs: Any) -> Any:
    """Build the proxy's Starlette app over ``veil``; see :func:`veil_proxy.app.create_app`."""
    from veil_proxy.app import create_app as _create_app

    return _create_app(veil, **kwargs)


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil proxy``."""
    from veil_proxy.serve import add_proxy_command

    add_proxy_command(cli)
