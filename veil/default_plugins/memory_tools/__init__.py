"""Default plugin ``veil.memory_tools``: the twelve ``veil_*`` memory tools the model uses to
search, page in, pin, forget and annotate its context (:mod:`veil.core.memory_tools`)."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl


@hookimpl
def register_tools(veil: Any) -> list:
    """The twelve memory tools (:func:`veil.core.memory_tools.memory_tools`)."""
    from veil.core.memory_tools import memory_tools

    return memory_tools()
