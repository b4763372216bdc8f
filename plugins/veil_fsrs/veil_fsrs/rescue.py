"""Cosine similarity of old turns with recent ones, for the rescue rule (seed 002: "a turn the
current one still refers to gets rescued: cosine similarity above 0.7 against a recent turn").

Embeddings come as a mapping item id -> vector (any length-d sequence, unit or not). Vectors
are normalised once and kept as float32 rows of one growing matrix per mapping, so each pass
only gathers rows and multiplies (no Python work per vector after its first use). An item's
vector is assumed not to change once given (embeddings are computed from the item's content,
which does not change).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from veil_fsrs.batch_index import BatchIndex

_STORES_KEPT = 2
_stores: OrderedDict[int, VectorRows] = OrderedDict()
_lock = threading.Lock()


class VectorRows:
    """Unit float32 rows for the vectors of one embeddings mapping.

    Args:
        source: item id -> vector; read lazily, as ids are asked for.
    """

    def __init__(self, source: Mapping[str, Any]) -> None:
        self.source = source
        self.row_of: dict[str, int] = {}
        self.matrix = np.empty((0, 0), dtype=np.float32)
        self.size = 0

    def rows(self, ids: list[str], positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the batch ``positions`` whose ids have a vector: ``(positions, row numbers)``.

        Raises:
            ValueError: vectors of different lengths, or not one-dimensional.
        """
        row_of = self.row_of
        wanted = [ids[p] for p in positions.tolist()]
        missing = [i for i in wanted if i not in row_of]
        if missing:
            self._add(missing)
        rows = np.fromiter((row_of.get(i, -1) for i in wanted), dtype=np.int64, count=len(wanted))
        keep = rows >= 0
        return positions[keep], rows[keep]

    def _add(self, ids: list[str]) -> None:
        found = [(i, v) for i in ids if (v := self.source.get(i)) is not None]
        if not found:
            return
        try:
            block = np.asarray([v for _, v in found], dtype=np.float32)
        except ValueError as exc:  # ragged input
            raise ValueError(f"embeddings: vectors of different lengths ({exc})") from exc
        if block.ndim != 2 or (self.size and block.shape[1] != self.matrix.shape[1]):
            width = self.matrix.shape[1] if self.size else "?"
            raise ValueError(
                f"embeddings: vectors of different lengths ({width} and {block.shape[1:]})"
            )
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        block /= np.where(norms > 0, norms, 1.0)
        needed = self.size + len(block)
        if needed > len(self.matrix):  # grow by doubling: amortised O(1) per row
            grown = np.empty((max(needed, 2 * len(self.matrix)), block.shape[1]), np.float32)
            if self.size:
                grown[: self.size] = self.matrix[: self.size]
            self.matrix = grown
        self.matrix[self.size : needed] = block
        for offset, (item_id, _) in enumerate(found):
            self.row_of[item_id] = self.size + offset
        self.size = needed


def rows_for(embeddings: Mapping[str, Any]) -> VectorRows:
    """The :class:`VectorRows` of ``embeddings`` (kept for the last two mappings seen)."""
    key = id(embeddings)
    with _lock:
        store = _stores.get(key)
        if store is None or store.source is not embeddings:
            store = _stores[key] = VectorRows(embeddings)
            while len(_stores) > _STORES_KEPT:
                _stores.popitem(last=False)
        _stores.move_to_end(key)
        return store


def max_cosine(
    index: BatchIndex, old: np.ndarray, recent: np.ndarray, embeddings: Mapping[str, Any]
) -> np.ndarray:
    """Largest cosine of each ``old`` item with any ``recent`` item (float64, per batch item;
    0 where an item is not old, or it or every recent item lacks a vector).

    Args:
        index: the batch's index (ids, turn flags; caches the row numbers of its turns).
        old, recent: bool masks over the batch (subsets of its turns).

    Raises:
        ValueError: vectors of different lengths.
    """
    best = np.zeros(len(index.ids), dtype=np.float64)
    store = rows_for(embeddings)
    # Row number of every turn of the batch (-1: no vector), looked up once per batch and
    # mapping size (a vector added to the mapping later is picked up).
    row = index.memo(
        ("rescue rows", store, len(embeddings)),  # the store itself: no id reuse
        lambda: _turn_rows(store, index.ids, index.is_turn),
    )
    recent_pos = np.flatnonzero(recent & (row >= 0))
    old_pos = np.flatnonzero(old & (row >= 0))
    if len(recent_pos) and len(old_pos):
        # A contiguous right-hand side: OpenBLAS is pathologically slow (threads) on the
        # transposed view of a small matrix (17 ms instead of 0.05 ms on 400 x 384 x 5).
        recent_t = np.ascontiguousarray(store.matrix[row[recent_pos]].T)
        best[old_pos] = (store.matrix[row[old_pos]] @ recent_t).max(axis=1)
    return best


def _turn_rows(store: VectorRows, ids: list[str], is_turn: np.ndarray) -> np.ndarray:
    row = np.full(len(ids), -1, dtype=np.int64)
    positions = np.flatnonzero(is_turn)
    found, rows = store.rows(ids, positions)
    row[found] = rows
    return row
