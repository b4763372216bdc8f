"""Default plugin ``veil.recall``: hybrid (vector + keyword) search over this project's warm and
cold items, every session. Blocked, ``veil_recall`` and every other caller of the ``recall``
hook get only what other plugins (memory files) answer; eviction, the tiers and hydrating keep
working, since they are the core's (:mod:`veil.core.tiers`).

Modules, each for what it holds:

* :mod:`.search`: :class:`~.search.Recall`, the queries (hybrid, vector, keyword, the SQL
  oracle) and the hits they return;
* :mod:`.index`: :class:`~.index.RecallIndex`, the in-memory state searched, kept in step with
  the store's ``recall_index`` (text indexing and embedding done lazily, in batches);
* :mod:`.catalog`: which rows are searchable, with session, order, tags and neighbours;
* :mod:`.vector_index`: exact cosine search over one float32 matrix;
* :mod:`.keyword`: a free-text query as an FTS5 ``MATCH`` expression;
* :mod:`.fusion`: how the two legs merge into one ranking;
* :mod:`.registry`: one search per open Veil (:func:`~.registry.recall_for`).

The tables are the core's storage layer (:mod:`veil.core.store.recall_tables`); the embedding
model is the core's model access (:mod:`veil.core.models.embedder`), shared with the eviction
policy's rescue of old turns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession


@hookimpl
def recall(
    session: PluginSession | None, query: str, limit: int, tags: list[str] | None
) -> list | None:
    """Hits with source ``"warm"`` or ``"cold"`` from every session of the project
    (:meth:`~veil.default_plugins.recall.search.Recall.search`). Without a session there is no
    project to search here, so it answers nothing."""
    if session is None:
        return None
    # imported on the first search, as before the move: registering the plugin stays cheap
    from veil.default_plugins.recall.registry import recall_for

    return recall_for(session.veil).search(query, limit, tags, None)
