"""Default plugin ``veil.memory_tools``: the twelve ``veil_*`` memory tools the model uses to
search, page in, pin, forget and annotate its context
(:mod:`veil.default_plugins.memory_tools.tools`)."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def register_tools(veil: Any) -> list:
    """The twelve memory tools (:func:`veil.default_plugins.memory_tools.tools.memory_tools`)."""
    from veil.default_plugins.memory_tools.tools import memory_tools

    return memory_tools()
