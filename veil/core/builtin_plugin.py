"""The core's own plugin (registered as ``veil.core``): the built-in coding tools."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def register_tools(veil: Any) -> list:
    """read, write, edit, bash, grep, ls (see :mod:`veil.core.tools`)."""
    from veil.core.tools import builtin_tools

    return builtin_tools()
