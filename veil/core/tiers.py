"""Warm and cold tiers of the context layer and hybrid recall over them (seed 002; DESIGN.md
"Context layer", "Vectors"; issue 3 "Tiers and recall").

Items that leave the prompt are kept in ``.veil/context.db`` and stay findable:

* **warm**: the item's content stays in ``items.content``; it is indexed for keywords (FTS5
  table ``recall_fts``) and, once embedded, by meaning (in-memory :class:`VectorIndex`).
* **cold**: the content is compressed with zlib into ``cold_content`` (with its sha256, checked on
  the way back), ``items.content`` keeps a one-line preview for pointer stubs, and the item leaves
  the vector index; it stays findable by keyword and by id. Hydrating, promoting, pinning or
  demoting it to warm writes the whole content back. Nothing is ever lost.
* **forgotten**: out of every index; the whole content is back in ``items.content``.

Durable state (migration 2 in :data:`veil.core.store.schema.MIGRATIONS`; every statement in
:mod:`veil.core.store.recall_tables`):

* ``recall_index``: one row per item that ever left the prompt (its ``row`` is the FTS5 rowid and
  the key in memory), with session, capture order (``seq`` = the item's rowid), tier, tags, the
  key of its embedding, a forgotten flag and ``rev``, a revision number bumped by every change.
* ``embeddings``: vectors by content hash (:class:`~veil.core.embedder.CachedEmbedder`), stored
  as float32 little-endian BLOBs, which is sqlite-vec's vector format: sqlite-vec's SQL functions
  read them as they are (:meth:`Tiers.sql_vector_search` is that exact search in SQL, the oracle
  the tests and the benchmark compare the in-memory index with). A BLOB table rather than a
  ``vec0`` table because migrations run on connections that have not loaded the extension, and
  the width depends on the configured model (384 for MiniLM, 768 for nomic-embed-text).
* ``recall_fts``: contentless FTS5 (``content=''``, ``contentless_delete=1``) over
  ``(content, meta)`` where meta = tags, targets and kind; cold text is not stored in clear twice.

In memory, built on the first search and kept in step through ``rev`` (so another process
writing the same database is seen at the next search): a catalog of searchable rows (session,
order, tags, neighbours) and the :class:`~veil.core.vector_index.VectorIndex` of warm rows.

Neither embedding nor text indexing runs inside capture / score / evict: :meth:`Tiers.on_moved`
only writes rows (and compresses cold content); the queued items are put into FTS5 and embedded
in one batch by the next :meth:`Tiers.search` or :meth:`Tiers.flush`. Ranking: :mod:`veil.core.fusion`; query words: :mod:`veil.core.keyword`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.core import fusion
from veil.core.embedder import CachedEmbedder, Embedder, EmbeddingUnavailableError, make_embedder
from veil.core.errors import VeilError
from veil.core.keyword import fts_match, item_ids_in, query_terms
from veil.core.store import recall_tables as sql
from veil.core.types import ContextItem, RecallHit
from veil.core.vector_index import VectorIndex

SEARCHABLE_TIERS = ("warm", "cold")
COLD_PREVIEW_CHARS = 240
"""Characters (whitespace collapsed) a cold item keeps in ``items.content``: longer than the
preview in :func:`veil.core.context.pointer_stub`, so a stub rebuilt from the store when a
session is resumed reads the same."""
META_WEIGHT = 0.5
"""BM25 weight of the ``meta`` column (tags, targets, kind) against 1.0 for the content."""
ZLIB_LEVEL = 6


class ColdContentError(VeilError):
    """The compressed content of a cold item does not match its recorded sha256."""

    code = "COLD_CONTENT_CORRUPT"


def compress(text: str) -> tuple[bytes, str]:
    """zlib-compress ``text`` (UTF-8); return ``(blob, sha256 hex of the UTF-8 bytes)``."""
    raw = text.encode("utf-8")
    return zlib.compress(raw, ZLIB_LEVEL), hashlib.sha256(raw).hexdigest()


def decompress(blob: bytes, sha256: str, item_id: str = "?") -> str:
    """Inverse of :func:`compress`, checked byte for byte against ``sha256``.

    Raises:
        ColdContentError: the blob does not inflate or its hash differs (names the item).
    """
    try:
        raw = zlib.decompress(blob)
    except zlib.error as exc:
        raise ColdContentError(f"cold content of {item_id} does not inflate: {exc}") from exc
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ColdContentError(f"cold content of {item_id} does not match its sha256")
    return raw.decode("utf-8")


MovedRow = tuple[str, "str | None", list[str], str]
"""``(item id, session id, tags, content)``: what a move to warm or cold writes of an item."""


def moved_row(item: ContextItem) -> MovedRow:
    """The :data:`MovedRow` of ``item`` as it is now (tags copied)."""
    return (item.id, item.session_id, list(item.tags), item.content)


def _check_tier(tier: str) -> None:
    if tier not in SEARCHABLE_TIERS:
        raise ValueError(f"tier: expected 'warm' or 'cold', got {tier!r}")


def cold_preview(text: str) -> str:
    """What ``items.content`` holds for a cold item: whitespace collapsed, at most
    :data:`COLD_PREVIEW_CHARS` characters."""
    return " ".join(text.split())[:COLD_PREVIEW_CHARS]


def _meta_text(tags: list[str], targets: list[str], kind: str) -> str:
    return " ".join([*tags, *targets, kind])


@dataclass
class _RowState:
    item_id: str
    session: int
    seq: int
    tier: str
    tags: tuple[str, ...]
    embed_key: str | None
    searchable: bool
    fts: bool


class _Catalog:
    """In-memory mirror of ``recall_index``: which rows are searchable, their session, capture
    order, tags and neighbours (the previous / next searchable row of the same session)."""

    def __init__(self) -> None:
        self.rows: dict[int, _RowState] = {}
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

    def apply(self, row: int, state: _RowState) -> None:
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


class Tiers:
    """Warm and cold storage with hybrid recall for one :class:`~veil.core.app.Veil`.

    Args:
        veil: the app; only ``veil.store`` and ``veil.config.settings.embeddings`` are used.
        embedder: a model to use instead of the configured one (tests, benchmarks).

    Attributes:
        last_warning: why the last search ran on keywords only (embedding unavailable), or None.

    Thread-safe: moves write only the database (in one transaction each, under the store's
    write lock), so evicting never waits for a search that is embedding; searches are serialised
    by one lock around the in-memory state.
    """

    def __init__(self, veil: Any, *, embedder: Embedder | None = None) -> None:
        self.veil = veil
        self.store = veil.store
        self._embedder = embedder
        self._cached: CachedEmbedder | None = None
        self._lock = threading.RLock()
        self._catalog: _Catalog | None = None
        self._index: VectorIndex | None = None
        self._indexed_key: dict[int, str] = {}
        self._pending: set[int] = set()
        self._seen_rev = -1
        self.last_warning: str | None = None

    # -- embedding ----------------------------------------------------------------------------

    @property
    def embedder(self) -> CachedEmbedder:
        """The configured embedder behind the content-hash cache (created without loading any
        model; :class:`~veil.core.embedder.LocalEmbedder` loads on its first encode)."""
        with self._lock:
            if self._cached is None:
                model = self._embedder or make_embedder(self.veil.config.settings.embeddings)
                self._cached = CachedEmbedder(model, self.store)
            return self._cached

    def item_vectors(
        self, items: Iterable[ContextItem], compute: bool = False
    ) -> dict[str, np.ndarray]:
        """Embeddings of items' content by item id (unit float32), e.g. for the eviction
        policy's rescue of old turns (cosine > 0.7 with a recent turn).

        Args:
            compute: False (default) returns only vectors already in the cache, so it is safe
                in the per-tool-call path; True embeds the missing ones (model time).
        """
        items = list(items)
        cache = self.embedder
        if compute:
            vectors, _ = cache.embed([i.content for i in items])
            return {item.id: vectors[n] for n, item in enumerate(items)}
        keys = cache.keys([i.content for i in items])
        found = cache.lookup(keys)
        return {item.id: found[key] for item, key in zip(items, keys, strict=True) if key in found}

    # -- moves (called by the core) -------------------------------------------------------------

    def on_moved(self, items: Sequence[ContextItem], tier: str) -> None:
        """Items left the prompt for ``tier`` (``"warm"`` or ``"cold"``), or moved between them.

        Writes, in one transaction, what :meth:`write_moved` writes; ``item.content`` is
        updated in place when it comes back from cold.

        Raises:
            ValueError: ``tier`` is not warm or cold.
            KeyError: an item is not in the store's ``items`` table.
        """
        _check_tier(tier)
        if not items:
            return
        with self.store.transaction() as conn:
            restored = self.write_moved(conn, [moved_row(item) for item in items], tier)
        for item in items:
            if item.id in restored:
                item.content = restored[item.id]

    def write_moved(self, conn: Any, rows: Sequence[MovedRow], tier: str) -> dict[str, str]:
        """The writes of a move to ``tier`` on ``conn`` (inside the caller's transaction; the
        eviction pass runs them behind the call path): the items' ``recall_index`` rows, and
        for cold the compressed content (``items.content`` then keeps :func:`cold_preview`);
        for warm, content coming back from cold is written back whole. FTS5 entries and
        embeddings are only queued (the next search makes them). A forgotten item stays
        forgotten until it is hydrated.

        Args:
            conn: a connection in an open transaction.
            rows: ``(item id, session id, tags, content)`` per item (:func:`moved_row`).
            tier: ``"warm"`` or ``"cold"``.

        Returns:
            ``{item id: whole content}`` for the items whose content came back from cold.

        Raises:
            ValueError: ``tier`` is not warm or cold.
            KeyError: an item is not in the store's ``items`` table.
        """
        _check_tier(tier)
        if not rows:
            return {}
        ids = [row[0] for row in rows]
        seqs = sql.item_rowids(conn, ids)
        missing = [i for i in ids if i not in seqs]
        if missing:
            raise KeyError(f"item {missing[0]} is not in the store")
        known = sql.index_states(conn, ids)
        cold = {
            item_id: decompress(blob, digest, item_id)
            for item_id, blob, digest in sql.cold_blobs(conn, ids)
        }
        rev = sql.next_rev(conn)
        next_row = sql.next_index_row(conn)
        inserts, updates, to_cold, back = [], [], [], []
        for item_id, session_id, tags, content in rows:
            row, _old_tier, forgotten = known.get(item_id, (None, None, False))
            if forgotten:
                continue
            content = cold.get(item_id, content)
            if tier == "cold" and item_id not in cold:
                to_cold.append((item_id, content))
            elif tier == "warm" and item_id in cold:
                back.append((content, item_id))
            values = (session_id, seqs[item_id], tier, json.dumps(tags), rev)
            if row is None:
                row = next_row
                next_row += 1
                inserts.append((row, item_id, *values))
            else:
                updates.append((*values, row))
            known[item_id] = (row, tier, False)  # an item listed twice is indexed once
        sql.insert_index_rows(conn, inserts)
        sql.update_index_rows(conn, updates)
        for item_id, content in to_cold:
            self._write_cold(conn, item_id, content)
        sql.restore_contents(conn, back)
        return {item_id: content for content, item_id in back}

    def on_hydrated(self, item: ContextItem, previous_tier: str) -> None:
        """``item`` is live again (hydrate, promote, pin): its whole content goes back into
        ``items.content`` and ``item.content`` (if it was cold), it leaves the indexes, and a
        forget mark is cleared. Its embedding stays cached for its next eviction."""
        with self.store.transaction() as conn:
            full = self.write_hydrated(conn, item.id)
        if full is not None:
            item.content = full

    def write_hydrated(self, conn: Any, item_id: str) -> str | None:
        """The writes of :meth:`on_hydrated` on ``conn`` (inside the caller's transaction).
        Returns the whole content when it came back from cold, else None."""
        full = self._cold_text(conn, item_id)
        if full is not None:
            sql.restore_content(conn, item_id, full)
        index_row = sql.index_entry(conn, item_id)
        if index_row is None:
            return full
        if index_row["fts"]:
            sql.delete_text_entry(conn, index_row["row"])
        sql.mark_live(conn, index_row["row"], sql.next_rev(conn))
        return full

    def forget(self, item_id: str) -> None:
        """Take an item out of every index (keyword, vector) for good; its whole content is
        kept in ``items.content`` (written back from cold storage if needed). Only hydrating
        it again makes it searchable after a later eviction.

        Raises:
            KeyError: no item with that id in the store.
        """
        with self.store.transaction() as conn:
            item_row = sql.item_place(conn, item_id)
            if item_row is None:
                raise KeyError(f"item {item_id} is not in the store")
            full = self._cold_text(conn, item_id)
            if full is not None:
                sql.restore_content(conn, item_id, full)
            rev = sql.next_rev(conn)
            index_row = sql.index_entry(conn, item_id)
            if index_row is None:
                sql.insert_forgotten(
                    conn, item_id, item_row["session_id"], item_row["rowid"], item_row["tier"], rev
                )
                return
            if index_row["fts"]:
                sql.delete_text_entry(conn, index_row["row"])
            sql.mark_forgotten(conn, index_row["row"], rev)

    def content(self, item_id: str) -> str | None:
        """The whole content of an item in any tier (decompressed when cold), or None."""
        conn = self.store.conn
        cold = self._cold_text(conn, item_id)
        if cold is not None:
            return cold
        return sql.item_content(conn, item_id)

    def counts(self) -> dict[str, int]:
        """``{"warm", "cold", "forgotten", "pending"}``: searchable rows per tier in the store,
        forgotten rows, and warm rows not embedded yet (as of the last search)."""
        out = {"warm": 0, "cold": 0, "forgotten": 0}
        for tier, n in sql.index_counts(self.store.conn).items():
            if tier in out:
                out[tier] = n
        out["pending"] = len(self._pending)
        return out

    # -- cold storage helpers -------------------------------------------------------------------

    @staticmethod
    def _cold_text(conn: Any, item_id: str) -> str | None:
        found = sql.cold_blob(conn, item_id)
        return None if found is None else decompress(found[0], found[1], item_id)

    @staticmethod
    def _write_cold(conn: Any, item_id: str, content: str) -> None:
        blob, digest = compress(content)
        sql.write_cold(conn, item_id, blob, digest, len(content), cold_preview(content))

    # -- keeping the in-memory state in step ------------------------------------------------------

    def _sync(self) -> None:
        """Apply ``recall_index`` rows changed since the last look to the catalog and index."""
        conn = self.store.conn
        if self._catalog is None:
            self._catalog = _Catalog()
            self._seen_rev = -1
        top = sql.max_rev(conn)
        if top <= self._seen_rev:
            return
        catalog = self._catalog
        for r in sql.index_changes(conn, self._seen_rev):
            searchable = r["tier"] in SEARCHABLE_TIERS and not r["forgotten"]
            state = _RowState(
                item_id=r["item_id"],
                session=catalog.session_code(r["session_id"]),
                seq=int(r["seq"]),
                tier=r["tier"],
                tags=tuple(t.lower() for t in json.loads(r["tags"] or "[]")),
                embed_key=r["embed_key"],
                searchable=searchable,
                fts=bool(r["fts"]),
            )
            row = int(r["row"])
            catalog.apply(row, state)
            if searchable and state.tier == "warm":
                if self._indexed_key.get(row) != state.embed_key or state.embed_key is None:
                    self._pending.add(row)
            else:
                self._pending.discard(row)
                if self._index is not None and row in self._index:
                    self._index.remove([row])
                self._indexed_key.pop(row, None)
        self._seen_rev = top

    def _embed_pending(self) -> None:
        """Give every queued warm row a vector: from the cache by its recorded key when it is
        there for the current model, else by one batched encode (stored in the cache)."""
        if not self._pending:
            return
        catalog = self._catalog
        assert catalog is not None
        cache = self.embedder
        rows = sorted(self._pending)
        known = {r: catalog.rows[r].embed_key for r in rows if catalog.rows[r].embed_key}
        found = cache.lookup(list(known.values())) if known else {}
        ready = {r: (k, found[k]) for r, k in known.items() if k in found}
        missing = [r for r in rows if r not in ready]
        if missing:
            ids = [catalog.rows[r].item_id for r in missing]
            texts = sql.item_contents(self.store.conn, ids)
            present = [r for r in missing if catalog.rows[r].item_id in texts]
            vectors, keys = cache.embed([texts[catalog.rows[r].item_id] for r in present])
            with self.store.transaction() as conn:
                rev = sql.next_rev(conn)
                sql.set_embed_keys(
                    conn, [(key, rev, r) for r, key in zip(present, keys, strict=True)]
                )
            for n, r in enumerate(present):
                ready[r] = (keys[n], vectors[n])
                catalog.rows[r].embed_key = keys[n]
        if ready:
            dim = int(next(iter(ready.values()))[1].shape[0])
            if self._index is None or self._index.dim != dim:
                self._index = VectorIndex(dim)
                self._indexed_key.clear()
            order = sorted(ready)
            self._index.add(order, np.stack([ready[r][1] for r in order]))
            for r in order:
                self._indexed_key[r] = ready[r][0]
        self._pending.clear()
        self._sync_rev_after_own_write()

    def _sync_rev_after_own_write(self) -> None:
        # our own embed_key updates bumped rev; re-read them (idempotent) so nothing is missed
        self._sync()
        self._pending -= {r for r, k in self._indexed_key.items() if k}

    def flush(self) -> int:
        """Index the queued items' text and embed the queued warm items now (one batch each);
        return how many rows the vector index holds. Call it when idle to spare the next search.

        Raises:
            EmbeddingUnavailableError: no embedding model can run.
        """
        with self._lock:
            self._sync()
            self._index_pending_text()
            self._embed_pending()
            return len(self._index) if self._index is not None else 0

    # -- search ---------------------------------------------------------------------------------

    def _query_vector(self, query: str) -> np.ndarray | None:
        try:
            vectors, _ = self.embedder.embed([query])
        except EmbeddingUnavailableError as exc:
            self.last_warning = f"recall used keywords only: {exc}"
            return None
        return vectors[0]

    def _index_pending_text(self) -> None:
        """Put the queued searchable rows into FTS5 (their text, and tags / targets / kind as
        ``meta``), in one transaction; rows another process indexed meanwhile are skipped."""
        catalog = self._catalog
        assert catalog is not None
        if not catalog.text_pending:
            return
        pending = sorted(catalog.text_pending)
        with self.store.transaction() as conn:
            rows = sql.unindexed_text(conn, pending)
            entries = [
                (
                    r["row"],
                    r["content"]
                    if r["zcontent"] is None
                    else decompress(r["zcontent"], r["sha256"], r["item_id"]),
                    _meta_text(json.loads(r["tags"]), json.loads(r["targets"]), r["kind"]),
                )
                for r in rows
            ]
            sql.add_text_entries(conn, entries)
        for row in pending:
            catalog.rows[row].fts = True
        catalog.text_pending.clear()

    def _prepare(self) -> None:
        self._sync()
        self._index_pending_text()
        try:
            self._embed_pending()
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
        ``[(item_id, cosine)]``. Queued items are embedded first."""
        with self._lock:
            self._prepare()
            if self._index is None or not len(self._index):
                return []
            catalog = self._catalog
            assert catalog is not None
            allowed = None
            if session_id is not None or tags:
                allowed = catalog.allowed(session_id, tags)[self._index.keys]
            rows, cosines = self._index.search(vector, k, allowed)
            return [
                (catalog.rows[int(r)].item_id, float(c)) for r, c in zip(rows, cosines, strict=True)
            ]

    def keyword_search(
        self,
        query: str,
        k: int = fusion.KEYWORD_DEPTH,
        *,
        session_id: str | None = None,
        tags: list[str] | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 over warm and cold items (FTS5, :mod:`veil.core.keyword` rewriting), best
        first, as ``[(item_id, bm25)]`` with bm25 > 0."""
        with self._lock:
            self._sync()
            self._index_pending_text()
            rows, scores = self._keyword_rows(query, k, session_id, tags)
            catalog = self._catalog
            assert catalog is not None
            return [
                (catalog.rows[int(r)].item_id, float(s)) for r, s in zip(rows, scores, strict=True)
            ]

    def _keyword_rows(
        self, query: str, k: int, session_id: str | None, tags: list[str] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        match = fts_match(query_terms(query))
        catalog = self._catalog
        if match is None or catalog is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        found = sql.keyword_rows(self.store.conn, match, k, META_WEIGHT, session_id, tags)
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
        keyword candidates merged by :mod:`veil.core.fusion` (relative scores, neighbour
        expansion), best first.

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
        with self._lock:
            self._prepare()
            catalog = self._catalog
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
            if self._index is not None and len(self._index):
                qvec = self._query_vector(query)
                if qvec is not None and qvec.shape[0] == self._index.dim:
                    vector_rows = self._index.keys.copy()
                    cosines = self._index.similarities(qvec)
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
            index = self._index
            bm_of = dict(zip(keyword_rows.tolist(), bm25.tolist(), strict=True))

            def cos_of(row: int) -> float | None:
                slot = index.slot(row) if index is not None and len(vector_rows) else None
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
        catalog = self._catalog
        assert catalog is not None
        if not picks:
            return []
        conn = self.store.conn
        ids = [catalog.rows[r].item_id for r, *_ in picks]
        rows = sql.item_summaries(conn, ids)
        hits = []
        for (row, score, cosine, bm), item_id in zip(picks, ids, strict=True):
            stored = rows.get(item_id)
            if stored is None:  # deleted with its session since the index was read
                continue
            state = catalog.rows[row]
            text = self._cold_text(conn, item_id) if state.tier == "cold" else None
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
        with self._lock:
            self._prepare()
            blob = np.asarray(vector, dtype=np.float32).tobytes()
            return sql.nearest_warm(self.store.conn, blob, self.embedder.name, k)

    # -- helpers for benchmarks and tests ----------------------------------------------------------

    def store_items(self, items: Sequence[ContextItem], tier: str = "warm") -> None:
        """Insert ``items`` into the store and move them to ``tier`` at once (items that never
        were live: benchmarks, imports). Each item's ``session_id`` must name a stored session.
        """
        for item in items:
            item.tier = tier
        self.store.add_items(list(items))
        self.on_moved(items, tier)
