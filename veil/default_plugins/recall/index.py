"""The search index of one project: the in-memory state recall reads (catalog and vector index),
kept in step with ``recall_index`` in ``.veil/context.db`` (DESIGN.md "Vectors"; issue 3).

The core's :class:`~veil.core.tiers.Tiers` writes ``recall_index`` on every move, hydrate and
forget and bumps ``rev``; this index reads the rows changed since the revision it last saw
(:meth:`RecallIndex.sync`), so a change by this process or another one writing the same
database is seen at the next search, and no hook is needed. The work a move queues is done
lazily, in one batch, by the next search or :meth:`RecallIndex.flush`, never inside capture /
score / evict:

* text: searchable rows go into the contentless FTS5 table ``recall_fts`` over ``(content,
  meta)``, where meta = tags, targets and kind (cold text is decompressed for it, not stored in
  clear twice);
* vectors: warm rows get an embedding from the durable cache by their recorded key when it is
  there for the current model, else from one batched encode (stored in the cache, its key
  written back to ``recall_index``), and enter the
  :class:`~veil.default_plugins.recall.vector_index.VectorIndex`. Cold rows leave it: they stay
  findable by keyword and by id.

On a PostgreSQL store (``store.url``) no vector is held in memory: an embedded warm row is
searched where it is stored, by pgvector's HNSW index
(:func:`veil.core.store.recall_tables.nearest_warm`), so a process's memory does not grow with
the project and every process sees the same vectors. :attr:`RecallIndex.in_database` says
which.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

import numpy as np

from veil import SEARCHABLE_TIERS, decompress
from veil import recall_tables as sql
from veil.default_plugins.recall.catalog import Catalog, RowState
from veil.default_plugins.recall.vector_index import VectorIndex

if TYPE_CHECKING:  # pragma: no cover
    from veil import CachedEmbedder, Tiers


def _meta_text(tags: list[str], targets: list[str], kind: str) -> str:
    return " ".join([*tags, *targets, kind])


class RecallIndex:
    """Catalog and vector index of one project's warm and cold items.

    Args:
        tiers: the project's tiers (its store, and its embedder for vectors).

    Attributes:
        lock: held around every read or change of the in-memory state (searches are
            serialised; moves never take it, they only write the database).
        catalog: the :class:`~veil.default_plugins.recall.catalog.Catalog`, None before the
            first :meth:`sync`.
        vectors: the vector index of warm rows (keyed by catalog row), None until one row
            has been embedded; always None when :attr:`in_database`.
        in_database: vectors are searched in the store (PostgreSQL with pgvector), not held
            here.
    """

    def __init__(self, tiers: Tiers) -> None:
        self.tiers = tiers
        self.store = tiers.store
        self.lock = threading.RLock()
        self.catalog: Catalog | None = None
        self.vectors: VectorIndex | None = None
        self._indexed_key: dict[int, str] = {}
        self._pending: set[int] = set()
        self._seen_rev = -1
        self.in_database = self.store.engine == "postgresql"

    @property
    def embedder(self) -> CachedEmbedder:
        """The project's embedder (:attr:`veil.core.tiers.Tiers.embedder`)."""
        return self.tiers.embedder

    @property
    def pending(self) -> int:
        """Warm rows not embedded yet, as of the last :meth:`sync`."""
        return len(self._pending)

    def sync(self) -> None:
        """Apply ``recall_index`` rows changed since the last look to the catalog and index.
        Call it with :attr:`lock` held."""
        conn = self.store.conn
        if self.catalog is None:
            self.catalog = Catalog()
            self._seen_rev = -1
        changes, position = sql.index_changes(conn, self._seen_rev)
        catalog = self.catalog
        for r in changes:
            searchable = r["tier"] in SEARCHABLE_TIERS and not r["forgotten"]
            state = RowState(
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
                if self.vectors is not None and row in self.vectors:
                    self.vectors.remove([row])
                self._indexed_key.pop(row, None)
        self._seen_rev = position

    def embed_pending(self) -> None:
        """Give every queued warm row a vector: from the cache by its recorded key when it is
        there for the current model, else by one batched encode (stored in the cache).
        Call it with :attr:`lock` held.

        Raises:
            EmbeddingUnavailableError: no embedding model can run (the rows stay queued).
        """
        if not self._pending:
            return
        catalog = self.catalog
        assert catalog is not None
        cache = self.embedder
        rows = sorted(self._pending)
        known = {r: catalog.rows[r].embed_key for r in rows if catalog.rows[r].embed_key}
        if self.in_database:
            self._embed_in_database(rows, known)
            return
        found = cache.lookup(list(known.values())) if known else {}
        ready = {r: (k, found[k]) for r, k in known.items() if k in found}
        missing = [r for r in rows if r not in ready]
        if missing:
            ids = [catalog.rows[r].item_id for r in missing]
            texts = sql.item_contents(self.store.conn, ids)
            present = [r for r in missing if catalog.rows[r].item_id in texts]
            vectors, keys = cache.embed([texts[catalog.rows[r].item_id] for r in present])
            with self.store.transaction() as conn:
                sql.lock_index(conn)
                rev = sql.next_rev(conn)
                sql.set_embed_keys(
                    conn, [(key, rev, r) for r, key in zip(present, keys, strict=True)]
                )
            for n, r in enumerate(present):
                ready[r] = (keys[n], vectors[n])
                catalog.rows[r].embed_key = keys[n]
        if ready:
            dim = int(next(iter(ready.values()))[1].shape[0])
            if self.vectors is None or self.vectors.dim != dim:
                self.vectors = VectorIndex(dim)
                self._indexed_key.clear()
            order = sorted(ready)
            self.vectors.add(order, np.stack([ready[r][1] for r in order]))
            for r in order:
                self._indexed_key[r] = ready[r][0]
        self._pending.clear()
        self._sync_rev_after_own_write()

    def _embed_in_database(self, rows: list[int], known: dict[int, str]) -> None:
        """:meth:`embed_pending` on a PostgreSQL store: a row whose recorded key is stored for
        the current model is searchable as it is; the others are encoded in one batch and
        stored (with their pgvector column), and their keys recorded. No vector is read back."""
        catalog = self.catalog
        assert catalog is not None
        cache = self.embedder
        stored = sql.embedding_keys(self.store.conn, cache.name, list(known.values()))
        ready = {r: k for r, k in known.items() if k in stored}
        missing = [r for r in rows if r not in ready]
        if missing:
            ids = [catalog.rows[r].item_id for r in missing]
            texts = sql.item_contents(self.store.conn, ids)
            present = [r for r in missing if catalog.rows[r].item_id in texts]
            _, keys = cache.embed([texts[catalog.rows[r].item_id] for r in present])
            with self.store.transaction() as conn:
                sql.lock_index(conn)
                rev = sql.next_rev(conn)
                sql.set_embed_keys(
                    conn, [(key, rev, r) for r, key in zip(present, keys, strict=True)]
                )
            for r, key in zip(present, keys, strict=True):
                ready[r] = key
                catalog.rows[r].embed_key = key
        self._indexed_key.update(ready)
        self._pending.clear()
        self._sync_rev_after_own_write()

    @property
    def vector_count(self) -> int:
        """Warm rows searchable by vector: in :attr:`vectors`, or (:attr:`in_database`) with a
        stored embedding."""
        if self.in_database:
            return len(self._indexed_key)
        return len(self.vectors) if self.vectors is not None else 0

    def _sync_rev_after_own_write(self) -> None:
        # our own embed_key updates bumped rev; re-read them (idempotent) so nothing is missed
        self.sync()
        self._pending -= {r for r, k in self._indexed_key.items() if k}

    def index_pending_text(self) -> None:
        """Put the queued searchable rows into FTS5 (their text, and tags / targets / kind as
        ``meta``), in one transaction; rows another process indexed meanwhile are skipped.
        Call it with :attr:`lock` held."""
        catalog = self.catalog
        assert catalog is not None
        if not catalog.text_pending:
            return
        pending = sorted(catalog.text_pending)
        with self.store.transaction() as conn:
            sql.lock_index(conn)  # another process may be indexing the same rows
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

    def flush(self) -> int:
        """Index the queued items' text and embed the queued warm items now (one batch each);
        return how many rows the vector index holds. Call it when idle to spare the next search.

        Raises:
            EmbeddingUnavailableError: no embedding model can run.
        """
        with self.lock:
            self.sync()
            self.index_pending_text()
            self.embed_pending()
            return self.vector_count
