"""Warm and cold tiers of the context layer: where items go when they leave the prompt, and how
they come back (seed 002; DESIGN.md "Context layer"; issue 3 "Tiers and recall").

Items that leave the prompt are kept in ``.veil/context.db``; nothing is ever lost:

* **warm**: the item's content stays in ``items.content``.
* **cold**: the content is compressed with zlib into ``cold_content`` (with its sha256, checked on
  the way back), and ``items.content`` keeps a one-line preview for pointer stubs. Hydrating,
  promoting, pinning or demoting it to warm writes the whole content back.
* **forgotten**: the whole content is back in ``items.content`` and the item is marked never to
  be searched again (until it is hydrated).

Durable state (migration 2 in :data:`veil.core.store.schema.MIGRATIONS`; every statement in
:mod:`veil.core.store.recall_tables`):

* ``recall_index``: one row per item that ever left the prompt (its ``row`` is the FTS5 rowid),
  with session, capture order (``seq`` = the item's rowid), tier, tags, the key of its
  embedding, a forgotten flag and ``rev``, a revision number bumped by every change. The core
  writes it on every move, hydrate and forget, so whoever searches (the default plugin
  ``veil.recall``, :mod:`veil.default_plugins.recall`) sees every change by ``rev``, from this
  process or another one, without a hook.
* ``embeddings``: vectors by content hash (:class:`~veil.core.models.embedder.CachedEmbedder`),
  stored as float32 little-endian BLOBs (sqlite-vec's vector format).
* ``recall_fts``: the keyword index, filled by the search plugin; the core only takes hydrated
  and forgotten items out of it, so a blocked or later search never finds them.

What stays here is mechanism: moves, their writes (run behind the call path by the eviction
pass), hydrating, forgetting, reading an item's whole content, counting, and the project's
embedder (shared by recall and the eviction policy's rescue of old turns). Searching, and the
in-memory state it needs, is the policy of ``veil.recall``. :meth:`Tiers.on_moved` only writes
rows (and compresses cold content): neither embedding nor text indexing runs inside capture /
score / evict.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from veil.core.errors import VeilError
from veil.core.models.embedder import CachedEmbedder, Embedder, make_embedder
from veil.core.store import recall_tables as sql
from veil.core.types import ContextItem

SEARCHABLE_TIERS = ("warm", "cold")
"""The tiers an item that left the prompt can be in (and be searched in, unless forgotten)."""
COLD_PREVIEW_CHARS = 240
"""Characters (whitespace collapsed) a cold item keeps in ``items.content``: longer than the
preview in :func:`veil.core.prompt.assemble.pointer_stub`, so a stub rebuilt from the store when a
session is resumed reads the same."""
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


def cold_text(conn: Any, item_id: str) -> str | None:
    """The whole content of a cold item, decompressed and checked, or None when it is not cold.

    Raises:
        ColdContentError: the stored blob is damaged (names the item).
    """
    found = sql.cold_blob(conn, item_id)
    return None if found is None else decompress(found[0], found[1], item_id)


def _write_cold(conn: Any, item_id: str, content: str) -> None:
    blob, digest = compress(content)
    sql.write_cold(conn, item_id, blob, digest, len(content), cold_preview(content))


class Tiers:
    """Warm and cold storage of one :class:`~veil.core.app.Veil`, and its embedder.

    Args:
        veil: the app; only ``veil.store`` and ``veil.config.settings.embeddings`` are used.
        embedder: a model to use instead of the configured one (tests, benchmarks).

    Thread-safe: moves write only the database (in one transaction each, under the store's
    write lock), so evicting never waits for a search that is embedding.
    """

    def __init__(self, veil: Any, *, embedder: Embedder | None = None) -> None:
        # the store and the config, not the Veil: whoever keeps per-Veil state holding the tiers
        # (the recall plugin's registry, weakly keyed by the Veil) must not keep the Veil alive
        self.store = veil.store
        self._config = veil.config
        self._embedder = embedder
        self._cached: CachedEmbedder | None = None
        self._lock = threading.Lock()

    # -- embedding ----------------------------------------------------------------------------

    @property
    def embedder(self) -> CachedEmbedder:
        """The configured embedder behind the content-hash cache (created without loading any
        model; :class:`~veil.core.models.embedder.LocalEmbedder` loads on its first encode).
        Recall (``veil.recall``) and the eviction policy's rescue of old turns share it, so
        each text is embedded once for both."""
        with self._lock:
            if self._cached is None:
                model = self._embedder or make_embedder(self._config.settings.embeddings)
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
        sql.lock_index(conn)  # before any read: what it reads decides the rows written
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
        fresh = iter(sql.new_index_rows(conn, sum(1 for i in ids if i not in known)))
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
                row = next(fresh)
                inserts.append((row, item_id, *values))
            else:
                updates.append((*values, row))
            known[item_id] = (row, tier, False)  # an item listed twice is indexed once
        sql.insert_index_rows(conn, inserts)
        sql.update_index_rows(conn, updates)
        for item_id, content in to_cold:
            _write_cold(conn, item_id, content)
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
        sql.lock_index(conn)
        full = cold_text(conn, item_id)
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
            sql.lock_index(conn)
            item_row = sql.item_place(conn, item_id)
            if item_row is None:
                raise KeyError(f"item {item_id} is not in the store")
            full = cold_text(conn, item_id)
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
        cold = cold_text(conn, item_id)
        if cold is not None:
            return cold
        return sql.item_content(conn, item_id)

    def counts(self) -> dict[str, int]:
        """``{"warm", "cold", "forgotten"}``: searchable rows per tier in the store and forgotten
        rows. (Warm rows not embedded yet are the search index's:
        :attr:`veil.default_plugins.recall.index.RecallIndex.pending`.)"""
        out = {"warm": 0, "cold": 0, "forgotten": 0}
        for tier, n in sql.index_counts(self.store.conn).items():
            if tier in out:
                out[tier] = n
        return out

    # -- helpers for benchmarks and tests ----------------------------------------------------------

    def store_items(self, items: Sequence[ContextItem], tier: str = "warm") -> None:
        """Insert ``items`` into the store and move them to ``tier`` at once (items that never
        were live: benchmarks, imports). Each item's ``session_id`` must name a stored session.
        """
        for item in items:
            item.tier = tier
        self.store.add_items(list(items))
        self.on_moved(items, tier)
