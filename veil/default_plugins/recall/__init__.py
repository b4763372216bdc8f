"""Default plugin ``veil.recall``: hybrid (vector + keyword) search over this project's warm and
cold items, every session (:meth:`veil.core.tiers.Tiers.search`). Blocked, ``veil_search`` and
every other caller of the ``recall`` hook get only what other plugins (memory files) answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session_api import PluginSession


@hookimpl
def recall(
    session: PluginSession | None, query: str, limit: int, tags: list[str] | None
) -> list | None:
    """Hits with source ``"warm"`` or ``"cold"`` (:meth:`veil.core.tiers.Tiers.search`). Without a
    session there is no project to search here, so it answers nothing."""
    if session is None:
        return None
    return session.veil.tiers.search(query, limit, tags, None)
