"""The in-memory vector index that serves recall queries: exact cosine search over one contiguous
float32 matrix.

Why this shape (DESIGN.md "Vectors"; issue 3 "Recall latency"): at 100k 384-d vectors a query is a
single BLAS matrix-vector product (~150 MB of float32 streamed once) plus an O(n) top-k partition,
the same work as a plain numpy brute force (done on one BLAS thread, see :data:`BLAS_THREADS`). The
alternatives measured for the issue were slower: sqlite-vec's vec0 brute force ~37 ms in memory and
~71 ms from a file against numpy's ~7 ms. Approximate indexes (HNSW, IVF) would add a dependency
and lose exactness for no need at this size.

The matrix grows by doubling (amortised O(1) appends) and removals swap the last row into the
hole, so rows ``[0, n)`` are always live and contiguous. Each row carries an integer *key* chosen
by the caller (:class:`~veil.default_plugins.recall.index.RecallIndex` uses its catalog row
number).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

_INITIAL_CAPACITY = 1024
BLAS_THREADS = 1
"""The matrix-vector product runs on one BLAS thread. OpenBLAS's worker threads spin-wait after
each call; on a busy machine (a local model generating beside veil, the 2-core development box
under load) a 2-thread product of 10k rows took 8-12 ms against 0.9 ms on one thread, and at 100k
rows the spinning slowed the FTS5 query that follows it in a hybrid search from ~80 to ~160 ms.
One thread streams the matrix at close to the memory bandwidth a query needs anyway."""

_controller: Any = None
_controller_lock = threading.Lock()


def _one_blas_thread() -> AbstractContextManager[Any]:
    """A context limiting numpy's BLAS to :data:`BLAS_THREADS` thread (threadpoolctl), or a
    no-op without threadpoolctl."""
    global _controller
    if _controller is None:
        with _controller_lock:
            if _controller is None:
                try:
                    from threadpoolctl import ThreadpoolController

                    _controller = ThreadpoolController()
                except ImportError:  # pragma: no cover - threadpoolctl is a dependency
                    _controller = False
    if not _controller:
        return nullcontext()
    return _controller.limit(limits=BLAS_THREADS, user_api="blas")


class VectorIndex:
    """Exact cosine (dot product of unit vectors) search over float32 rows.

    Args:
        dim: vector width (384 for all-MiniLM-L6-v2).

    Not thread-safe for writers and readers at once: the caller holds a lock (the recall index
    does).
    """

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dim: expected a positive width, got {dim}")
        self.dim = dim
        self._matrix = np.zeros((_INITIAL_CAPACITY, dim), dtype=np.float32)
        self._keys = np.zeros(_INITIAL_CAPACITY, dtype=np.int64)
        self._slot: dict[int, int] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: int) -> bool:
        return int(key) in self._slot

    @property
    def keys(self) -> np.ndarray:
        """Keys of the live rows, ``(n,)`` int64 (a view: copy it before changing the index)."""
        return self._keys[: self._n]

    @property
    def matrix(self) -> np.ndarray:
        """The live rows, ``(n, dim)`` float32 (a view)."""
        return self._matrix[: self._n]

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need <= len(self._keys):
            return
        capacity = max(need, 2 * len(self._keys))
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: self._n] = self._matrix[: self._n]
        keys = np.zeros(capacity, dtype=np.int64)
        keys[: self._n] = self._keys[: self._n]
        self._matrix, self._keys = matrix, keys

    def add(self, keys: np.ndarray | list[int], vectors: np.ndarray) -> None:
        """Insert or replace rows. ``vectors`` is ``(len(keys), dim)``, unit rows expected.

        Raises:
            ValueError: shapes disagree with ``keys`` or ``dim``.
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(
                f"vectors: expected shape ({len(keys)}, {self.dim}), got {vectors.shape}"
            )
        self._reserve(len(keys))
        for key, vector in zip(keys.tolist(), vectors, strict=True):
            slot = self._slot.get(key)
            if slot is None:
                slot = self._n
                self._n += 1
                self._slot[key] = slot
                self._keys[slot] = key
            self._matrix[slot] = vector

    def remove(self, keys: list[int] | np.ndarray) -> int:
        """Drop rows by key (unknown keys are ignored); return how many were removed."""
        removed = 0
        for key in np.asarray(keys, dtype=np.int64).reshape(-1).tolist():
            slot = self._slot.pop(key, None)
            if slot is None:
                continue
            last = self._n - 1
            if slot != last:
                moved = int(self._keys[last])
                self._matrix[slot] = self._matrix[last]
                self._keys[slot] = moved
                self._slot[moved] = slot
            self._n -= 1
            removed += 1
        return removed

    def slot(self, key: int) -> int | None:
        """Position of ``key`` in :attr:`keys` (and in :meth:`similarities`), or None."""
        return self._slot.get(int(key))

    def vector(self, key: int) -> np.ndarray | None:
        """A copy of the row stored under ``key``, or None."""
        slot = self._slot.get(int(key))
        return None if slot is None else self._matrix[slot].copy()

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` (a unit ``(dim,)`` vector) with every live row: ``(n,)`` float32,
        aligned with :attr:`keys`."""
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query: expected {self.dim} values, got {query.shape[0]}")
        with _one_blas_thread():
            return self._matrix[: self._n] @ query

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` rows most similar to ``query``, best first (ties: smaller key first).

        Args:
            query: unit ``(dim,)`` vector.
            k: how many (fewer when the index holds fewer allowed rows).
            allowed: optional ``(n,)`` bool mask aligned with :attr:`keys`; False rows are skipped.

        Returns:
            ``(keys (m,) int64, cosines (m,) float32)`` with ``m <= k``.
        """
        if k <= 0 or self._n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.similarities(query)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        n = scores.shape[0]
        if k < n:
            kth = scores[np.argpartition(scores, n - k)[n - k :]].min()
            top = np.flatnonzero(scores >= kth)  # every row tied with the k-th too
        else:
            top = np.arange(n)
        top = top[np.lexsort((self._keys[top], -scores[top]))][:k]  # ties: smaller key first
        top = top[np.isfinite(scores[top])]
        return self._keys[top].copy(), scores[top].astype(np.float32)
