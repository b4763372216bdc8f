"""Default plugin ``veil.coding_tools``: the coding tools read, write, edit, bash, grep and ls
(:mod:`veil.default_plugins.coding_tools.tools`). Blocked, the agent has no tools to touch the
project; the memory tools and every other plugin's tools remain."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def register_tools(veil: Any) -> list:
    """read, write, edit, bash, grep, ls
    (:func:`veil.default_plugins.coding_tools.tools.builtin_tools`)."""
    from veil.default_plugins.coding_tools.tools import builtin_tools

    return builtin_tools()
