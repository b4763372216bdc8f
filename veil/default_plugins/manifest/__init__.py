"""Default plugin ``veil.manifest``: the manifest of loaded context in the system prompt, its
stable guide and its volatile counts (:mod:`veil.default_plugins.manifest.sections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession


@hookimpl
def system_prompt_sections(session: PluginSession) -> list:
    """The manifest's guide (stable) and counts (volatile, anchored)
    (:func:`veil.default_plugins.manifest.sections.manifest_sections`)."""
    from veil.default_plugins.manifest.sections import manifest_sections

    return manifest_sections(session)
