"""Hybrid recall over one project's warm and cold items (seed 002; DESIGN.md "Vectors"; issue 3
"Tiers and recall"): vector and FTS5 keyword candidates merged by
:mod:`~veil.default_plugins.recall.fusion` (relative scores, neighbour expansion), best first.

Query words: :mod:`~veil.default_plugins.recall.keyword`; the state searched:
:class:`~veil.default_plugins.recall.index.RecallIndex`. Forgotten items and items live again
are never found. When no embedding model can run the vector leg is skipped and
:attr:`Recall.last_warning` says why.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from veil import EmbeddingUnavailableError, RecallHit, cold_text
from veil import recall_tables as sql
from veil.default_plugins.recall import fusion
from veil.default_plugins.recall.index import RecallIndex
from veil.default_plugins.recall.keyword import item_ids_in, query_terms

if TYPE_CHECKING:  # pragma: no cover
    from veil import CachedEmbedder, Tiers

META_WEIGHT = 0.5
"""BM25 weight of the ``meta`` column (tags, targets, kind) against 1.0 for the content."""


class Recall:
    """Searches over one project's warm and cold items.

    Args:
        tiers: the project's tiers (store and embedder).
        index: the search index to read (default: a new one over ``tiers``).

    Attributes:
        index: the :class:`~veil.default_plugins.recall.index.RecallIndex` searched.
        last_warning: why the last search ran on keywords only (embedding unavailable), or None.

    Thread-safe: every search holds the index's lock.
    """

    def __init__(self, tiers: Tiers, index: RecallIndex | None = None) -> None:
        self.tiers = tiers
        self.index = index if index is not None else RecallIndex(tiers)
        self.last_warning: str | None = None

    @property
    def embedder(self) -> CachedEmbedder:
        """The project's embedder (:attr:`veil.core.tiers.Tiers.embedder`)."""
        return self.tiers.embedder

    def flush(self) -> int:
        """:meth:`RecallIndex.flush`: index and embed the queued items now; return how many
        rows the vector index holds.

        Raises:
            EmbeddingUnavailableError: no embedding model can run.
        """
        return self.index.flush()

    def _query_vector(self, query: str) -> np.ndarray | None:
        try:
            vectors, _ = self.embedder.embed([query])
        except EmbeddingUnavailableError as exc:
            self.last_warning = f"recall used keywords only: {exc}"
            return None
        return vectors[0]

    def _prepare(self) -> None:
        index = self.index
        index.sync()
        index.index_pending_text()
        try:
            index.embed_pending()
            self.last_warning = None
        except EmbeddingUnavailableError as exc:
            self.last_warning = f"recall used keywords only: {exc}"

    def vector_search(
        self,
        vector: np.ndarray,
        k: int = 10,
        *,
        session_id: str | None = None,
        tags: list[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` warm items nearest to a unit ``vector`` (cosine), best first, as
        ``[(item_id, cosine)]``. Queued items are embedded first. On a PostgreSQL store, by
        pgvector's HNSW index (approximate) in the database."""
        with self.index.lock:
            self._prepare()
            if self.index.in_database:
                return self._stored_nearest(vector, k, session_id, tags)
            vectors = self.index.vectors
            if vectors is None or not len(vectors):
                return []
            catalog = self.index.catalog
            assert catalog is not None
            allowed = None
            if session_id is not None or tags:
                allowed = catalog.allowed(session_id, tags)[vectors.keys]
            rows, cosines = vectors.search(vector, k, allowed)
            return [
                (catalog.rows[int(r)].item_id, float(c)) for r, c in zip(rows, cosines, strict=True)
            ]

    def _stored_nearest(
        self, vector: np.ndarray, k: int, session_id: str | None, tags: list[str] | None
    ) -> list[tuple[str, float]]:
        """The store's own vector search (:func:`veil.core.store.recall_tables.nearest_warm`),
        restricted to items the catalog knows are searchable."""
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        found = sql.nearest_warm(
            self.tiers.store.conn,
            blob,
            self.embedder.name,
            k,
            session_id=session_id,
            tags=[t.lower() for t in tags] if tags else None,
        )
        catalog = self.index.catalog
        assert catalog is not None
        return [(item_id, cos) for item_id, cos in found if item_id in catalog.row_of]

    def keyword_search(
        self,
        query: str,
        k: int = fusion.KEYWORD_DEPTH,
        *,
        session_id: str | None = None,
        tags: list[str] | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 over warm and cold items (FTS5, :mod:`~veil.default_plugins.recall.keyword`
        rewriting), best first, as ``[(item_id, bm25)]`` with bm25 > 0."""
        with self.index.lock:
            self.index.sync()
            self.index.index_pending_text()
            rows, scores = self._keyword_rows(query, k, session_id, tags)
            catalog = self.index.catalog
            assert catalog is not None
            return [
                (catalog.rows[int(r)].item_id, float(s)) for r, s in zip(rows, scores, strict=True)
            ]

    def _keyword_rows(
        self, query: str, k: int, session_id: str | None, tags: list[str] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        terms = [t for t in query_terms(query) if t]
        catalog = self.index.catalog
        if not terms or catalog is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        found = sql.keyword_rows(self.tiers.store.conn, terms, k, META_WEIGHT, session_id, tags)
        known = [(r, s) for r, s in found if r in catalog.rows]
        if not known:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = np.asarray([r for r, _ in known], dtype=np.int64)
        return rows, np.asarray([s for _, s in known], dtype=np.float64)

    def search(
        self,
        query: str,
        limit: int = 10,
        tags: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[RecallHit]:
        """Hybrid recall over warm and cold items (forgotten ones excluded): vector and FTS5
        keyword candidates merged by :mod:`~veil.default_plugins.recall.fusion` (relative
        scores, neighbour expansion), best first.

        Args:
            query: free text; item ids in it (``item_...``) are returned first, score 1.
            limit: at most this many hits.
            tags: only items carrying at least one of these tags (case-insensitive).
            session_id: only items of this session (None: the whole project).

        Returns:
            :class:`RecallHit` list: ``source`` ``"warm"`` / ``"cold"``, ``content`` whole
            (decompressed), ``score`` in [0, 1], ``meta`` with ``session_id``, ``kind``,
            ``tags``, ``tokens``, ``vector`` (cosine or None) and ``keyword`` (BM25 or None).
            When no embedding model can run, the vector leg is skipped and
            :attr:`last_warning` says why.
        """
        if limit <= 0:
            return []
        with self.index.lock:
            self._prepare()
            catalog = self.index.catalog
            assert catalog is not None
            size = catalog.size
            allowed = catalog.allowed(session_id, tags)
            direct = [
                row
                for row in (catalog.row_of.get(i) for i in item_ids_in(query))
                if row is not None and allowed[row]
            ]
            # keywords first: the vector scan streams the whole matrix and evicts the CPU caches
            # the FTS5 pages would otherwise be read from (measured 2x slower the other way)
            keyword_rows, bm25 = self._keyword_rows(query, fusion.KEYWORD_DEPTH, session_id, tags)
            vector_rows = np.zeros(0, dtype=np.int64)
            cosines = np.zeros(0, dtype=np.float32)
            vectors = self.index.vectors
            stored_cos: dict[int, float] = {}
            if self.index.in_database and self.index.vector_count:
                # the VECTOR_DEPTH nearest allowed items from pgvector: the best of them is the
                # best allowed item, so the relative scores are those of the exact search down
                # to that depth (below it an item's vector share is 0)
                qvec = self._query_vector(query)
                if qvec is not None:
                    found = self._stored_nearest(qvec, fusion.VECTOR_DEPTH, session_id, tags)
                    vector_rows = np.asarray([catalog.row_of[i] for i, _ in found], dtype=np.int64)
                    cosines = np.asarray([c for _, c in found], dtype=np.float32)
                    stored_cos = dict(zip(vector_rows.tolist(), cosines.tolist(), strict=True))
            elif vectors is not None and len(vectors):
                qvec = self._query_vector(query)
                if qvec is not None and qvec.shape[0] == vectors.dim:
                    vector_rows = vectors.keys.copy()
                    cosines = vectors.similarities(qvec)
                    if session_id is not None or tags:  # scale by the best *allowed* item
                        cosines = np.where(allowed[vector_rows], cosines, np.float32(0))
            base = fusion.base_scores(size, vector_rows, cosines, keyword_rows, bm25)
            prev, nxt = catalog.neighbours()
            fused = fusion.with_neighbours(base, prev, nxt)
            fused[~allowed] = 0.0
            if direct:
                fused[direct] = fusion.MAX_FUSED
            candidates = np.flatnonzero(fused > 0)
            if len(candidates) > limit:
                part = np.argpartition(-fused[candidates], limit)[:limit]
                candidates = candidates[part]
            ranked = candidates[np.lexsort((candidates, -fused[candidates]))][:limit]
            bm_of = dict(zip(keyword_rows.tolist(), bm25.tolist(), strict=True))

            def cos_of(row: int) -> float | None:
                if self.index.in_database:
                    return stored_cos.get(row)
                slot = vectors.slot(row) if vectors is not None and len(vector_rows) else None
                return None if slot is None else float(cosines[slot])

            picks = [
                (
                    int(r),
                    min(1.0, float(fused[r]) / fusion.MAX_FUSED),
                    cos_of(int(r)),
                    bm_of.get(int(r)),
                )
                for r in ranked
            ]
            return self._hits(picks)

    def _hits(self, picks: list[tuple[int, float, float | None, float | None]]) -> list[RecallHit]:
        catalog = self.index.catalog
        assert catalog is not None
        if not picks:
            return []
        conn = self.tiers.store.conn
        ids = [catalog.rows[r].item_id for r, *_ in picks]
        rows = sql.item_summaries(conn, ids)
        hits = []
        for (row, score, cosine, bm), item_id in zip(picks, ids, strict=True):
            stored = rows.get(item_id)
            if stored is None:  # deleted with its session since the index was read
                continue
            state = catalog.rows[row]
            text = cold_text(conn, item_id) if state.tier == "cold" else None
            hits.append(
                RecallHit(
                    id=item_id,
                    content=stored["content"] if text is None else text,
                    score=score,
                    source=state.tier,
                    meta={
                        "session_id": stored["session_id"],
                        "kind": stored["kind"],
                        "tags": json.loads(stored["tags"]),
                        "tokens": stored["tokens"],
                        "vector": cosine,
                        "keyword": bm,
                    },
                )
            )
        return hits

    def sql_vector_search(self, vector: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The same exact search as :meth:`vector_search`, done in SQL by sqlite-vec's
        ``vec_distance_cosine`` over the stored BLOBs (no in-memory index): the oracle for tests
        and the baseline of bench/bench_recall.py. Embeds queued items first.

        Raises:
            VeilError: sqlite-vec cannot be loaded into this connection.
        """
        with self.index.lock:
            self._prepare()
            blob = np.asarray(vector, dtype=np.float32).tobytes()
            return sql.nearest_warm(self.tiers.store.conn, blob, self.embedder.name, k)
