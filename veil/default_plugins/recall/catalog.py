"""The in-memory catalog of recall: which rows of ``recall_index`` are searchable, and each
row's session, capture order, tags and neighbours, as numpy arrays a query masks and indexes in
one pass (:mod:`veil.default_plugins.recall.search`).

A row is the ``recall_index.row`` of an item (also its FTS5 rowid and its key in the
:class:`~veil.default_plugins.recall.vector_index.VectorIndex`); rows are small dense integers,
so arrays indexed by row stay compact. :class:`~veil.default_plugins.recall.index.RecallIndex`
fills the catalog from the store's changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class RowState:
    """What the catalog knows of one ``recall_index`` row.

    Attributes:
        item_id: the item's id.
        session: the item's session as a small integer (:meth:`Catalog.session_code`).
        seq: capture order (the item's rowid in ``items``).
        tier: ``"warm"``, ``"cold"`` or ``"live"`` (hydrated again).
        tags: the item's tags, lower-cased.
        embed_key: the key of its embedding in the ``embeddings`` table, or None.
        searchable: warm or cold and not forgotten.
        fts: whether its text is in the FTS5 table.
    """

    item_id: str
    session: int
    seq: int
    tier: str
    tags: tuple[str, ...]
    embed_key: str | None
    searchable: bool
    fts: bool


class Catalog:
    """In-memory mirror of ``recall_index``: which rows are searchable, their session, capture
    order, tags and neighbours (the previous / next searchable row of the same session).

    Not thread-safe: the :class:`~veil.default_plugins.recall.index.RecallIndex` that owns it
    holds its lock around every use.
    """

    def __init__(self) -> None:
        self.rows: dict[int, RowState] = {}
        self.row_of: dict[str, int] = {}
        self.sessions: dict[str | None, int] = {}
        self.tag_rows: dict[str, set[int]] = {}
        self.text_pending: set[int] = set()
        self.size = 0
        self._searchable = np.zeros(0, dtype=bool)
        self._session = np.zeros(0, dtype=np.int64)
        self._seq = np.zeros(0, dtype=np.int64)
        self._neighbours: tuple[np.ndarray, np.ndarray] | None = None

    def session_code(self, session_id: str | None) -> int:
        """A small integer for ``session_id``, the same for the life of the catalog."""
        return self.sessions.setdefault(session_id, len(self.sessions))

    def _grow(self, row: int) -> None:
        if row < self.size:
            return
        size = max(row + 1, 2 * self.size, 1024)
        searchable = np.zeros(size, dtype=bool)
        searchable[: self.size] = self._searchable[: self.size]
        session = np.full(size, -1, dtype=np.int64)
        session[: self.size] = self._session[: self.size]
        seq = np.zeros(size, dtype=np.int64)
        seq[: self.size] = self._seq[: self.size]
        self._searchable, self._session, self._seq = searchable, session, seq
        self.size = size

    def apply(self, row: int, state: RowState) -> None:
        """Record ``state`` as row ``row`` (new or changed), its tags and whether its text still
        has to go into FTS5."""
        old = self.rows.get(row)
        if old is not None:
            for tag in old.tags:
                self.tag_rows.get(tag, set()).discard(row)
        self._grow(row)
        self.rows[row] = state
        self.row_of[state.item_id] = row
        self._searchable[row] = state.searchable
        self._session[row] = state.session
        self._seq[row] = state.seq
        if state.searchable:
            for tag in state.tags:
                self.tag_rows.setdefault(tag, set()).add(row)
        if state.searchable and not state.fts:
            self.text_pending.add(row)
        else:
            self.text_pending.discard(row)
        self._neighbours = None

    def allowed(self, session_id: str | None, tags: Sequence[str] | None) -> np.ndarray:
        """Searchable rows, restricted to a session and to items carrying any of ``tags``."""
        mask = self._searchable[: self.size].copy()
        if session_id is not None:
            code = self.sessions.get(session_id)
            if code is None:
                return np.zeros(self.size, dtype=bool)
            mask &= self._session[: self.size] == code
        if tags:
            tagged = np.zeros(self.size, dtype=bool)
            for tag in tags:
                rows = self.tag_rows.get(tag.lower())
                if rows:
                    tagged[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
            mask &= tagged
        return mask

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """``(prev, next)``: ``(size,)`` int64 rows, -1 where there is none."""
        if self._neighbours is None:
            prev = np.full(self.size, -1, dtype=np.int64)
            nxt = np.full(self.size, -1, dtype=np.int64)
            rows = np.flatnonzero(self._searchable[: self.size])
            if len(rows):
                order = rows[np.lexsort((self._seq[rows], self._session[rows]))]
                same = self._session[order[1:]] == self._session[order[:-1]]
                nxt[order[:-1][same]] = order[1:][same]
                prev[order[1:][same]] = order[:-1][same]
            self._neighbours = (prev, nxt)
        return self._neighbours
