"""Default plugin ``veil.coding_tools``: the coding tools read, write, edit, bash, grep and ls
(:mod:`veil.default_plugins.coding_tools.tools`), and the coding persona that opens the system
message when nobody set a prompt of their own (:data:`PERSONA_PROMPT`, the
``base_prompt`` hook). Blocked, the agent has no tools to touch the project and the
system message opens with the core's neutral line instead; the memory tools and every other
plugin's tools remain."""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl

PERSONA_PROMPT = """You are veil, a coding agent working in the project at {cwd}.
Use the tools to read, search, edit and run code; do not guess file contents. Keep answers short.
When you are done, answer the user plainly. Today is {date}."""
"""veil's own system prompt, when neither the project, the user's client nor the user set one
(``{cwd}`` and ``{date}`` are replaced by the core). It tells the model to use the tools this
plugin offers, so it comes with them: with ``veil.coding_tools`` blocked it is not sent."""


@hookimpl
def register_tools(veil: Any) -> list:
    """read, write, edit, bash, grep, ls
    (:func:`veil.default_plugins.coding_tools.tools.builtin_tools`)."""
    from veil.default_plugins.coding_tools.tools import builtin_tools

    return builtin_tools()


@hookimpl
def base_prompt() -> str:
    """:data:`PERSONA_PROMPT`."""
    return PERSONA_PROMPT
