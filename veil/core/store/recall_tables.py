"""The tables of the warm and cold tiers and of the embedding cache (migration 2 in
:data:`veil.core.store.schema.MIGRATIONS`): every statement :mod:`veil.core.tiers`,
:class:`~veil.core.models.embedder.CachedEmbedder` and the search of the default plugin
``veil.recall`` (:mod:`veil.default_plugins.recall`) run.

* ``recall_index``: one row per item that ever left the prompt; ``row`` is the FTS5 rowid,
  ``seq`` the item's rowid in ``items``, ``rev`` a revision number bumped by every change.
* ``recall_fts``: contentless FTS5 over ``(content, meta)``.
* ``cold_content``: a cold item's zlib-compressed content with the sha256 of its UTF-8 bytes.
* ``embeddings``: float32 little-endian vectors by content-hash key and model.

Every function takes the connection to run on (``Store.conn`` for a read, the connection of an
open ``Store.transaction()`` or write-behind job for a write) and never opens a transaction of
its own, so the caller decides what lands together. Id lists of any length are read in chunks
of 500 (SQLite's variable limit).

On PostgreSQL (:mod:`veil.core.store.postgres`) the same functions run on the same tables, with
the engine's own full-text search (a ``tsvector`` per entry, ``ts_rank``) and vector search
(pgvector's HNSW index) in place of FTS5 and sqlite-vec (:class:`~veil.core.store.dialect.Dialect`).
Writers of ``recall_index`` call :func:`lock_index` first in their transaction (SQLite's
``BEGIN IMMEDIATE`` serialises them anyway; PostgreSQL needs no lock: rows come from a sequence
and readers follow transaction ids, see :func:`index_changes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from veil.core.store.dialect import dialect_of

CHUNK = 500
"""Ids per ``IN (...)`` list: below SQLite's default limit of 999 variables per statement."""


def _rows_for(conn: Any, select: str, column: str, keys: Sequence[Any]) -> list[Any]:
    """``select`` + ``[WHERE] column IN (keys)``, in chunks of :data:`CHUNK`; a ``select``
    ending in ``AND`` or ``WHERE`` continues its own clause."""
    out: list[Any] = []
    unique = list(dict.fromkeys(keys))
    glue = " " if select.rstrip().endswith(("AND", "WHERE")) else " WHERE "
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        out.extend(conn.execute(f"{select}{glue}{column} IN ({marks})", chunk).fetchall())
    return out


# -- items ---------------------------------------------------------------------------------------


def item_rowids(conn: Any, item_ids: Sequence[str]) -> dict[str, int]:
    """``{item id: rowid in items}`` for the ids that are in ``items`` (the capture order)."""
    return {r[0]: int(r[1]) for r in _rows_for(conn, "SELECT id, rowid FROM items", "id", item_ids)}


def item_contents(conn: Any, item_ids: list[str]) -> dict[str, str]:
    """``{item id: items.content}`` for the ids that are in ``items`` (a cold item's preview)."""
    out: dict[str, str] = {}
    for start in range(0, len(item_ids), CHUNK):
        chunk = item_ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT id, content FROM items WHERE id IN ({marks})", chunk):
            out[row[0]] = row[1]
    return out


def item_content(conn: Any, item_id: str) -> str | None:
    """``items.content`` of one item, or None when there is no such item."""
    row = conn.execute("SELECT content FROM items WHERE id = ?", (item_id,)).fetchone()
    return None if row is None else row[0]


def item_place(conn: Any, item_id: str) -> Any:
    """One item's ``rowid``, ``session_id``, ``tier`` and ``content`` (a row read by name), or
    None when there is no such item."""
    return conn.execute(
        "SELECT rowid, session_id, tier, content FROM items WHERE id = ?", (item_id,)
    ).fetchone()


def item_summaries(conn: Any, item_ids: list[str]) -> dict[str, Any]:
    """``{item id: row}`` with ``id, session_id, kind, tags`` (JSON text) ``, tokens, tier,
    content`` for the ids that are in ``items`` (one statement: a recall's hits, at most a
    few dozen)."""
    marks = ",".join("?" * len(item_ids))
    return {
        r["id"]: r
        for r in conn.execute(
            f"SELECT id, session_id, kind, tags, tokens, tier, content FROM items"
            f" WHERE id IN ({marks})",
            item_ids,
        )
    }


# -- cold content --------------------------------------------------------------------------------


def cold_blobs(conn: Any, item_ids: Sequence[str]) -> list[tuple[str, bytes, str]]:
    """``[(item id, zlib blob, sha256 hex)]`` of the ids that have cold content."""
    return [
        (r[0], r[1], r[2])
        for r in _rows_for(
            conn, "SELECT item_id, zcontent, sha256 FROM cold_content", "item_id", item_ids
        )
    ]


def cold_blob(conn: Any, item_id: str) -> tuple[bytes, str] | None:
    """``(zlib blob, sha256 hex)`` of one item's cold content, or None when it has none."""
    row = conn.execute(
        "SELECT zcontent, sha256 FROM cold_content WHERE item_id = ?", (item_id,)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def write_cold(conn: Any, item_id: str, blob: bytes, sha256: str, chars: int, preview: str) -> None:
    """Store an item's cold content (replacing any) and put ``preview`` in ``items.content``.

    Args:
        blob: the zlib-compressed UTF-8 content; sha256: hex digest of the UTF-8 bytes;
        chars: the content's length in characters.
    """
    conn.execute(
        "INSERT INTO cold_content (item_id, zcontent, sha256, chars) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (item_id) DO UPDATE SET zcontent = excluded.zcontent,"
        " sha256 = excluded.sha256, chars = excluded.chars",
        (item_id, blob, sha256, chars),
    )
    conn.execute("UPDATE items SET content = ? WHERE id = ?", (preview, item_id))


def restore_contents(conn: Any, restored: list[tuple[str, str]]) -> None:
    """Content back from cold: ``items.content`` set whole and the cold copies deleted, for
    ``[(whole content, item id)]`` (all updates first, then all deletes)."""
    conn.executemany("UPDATE items SET content = ? WHERE id = ?", restored)
    conn.executemany("DELETE FROM cold_content WHERE item_id = ?", [(i,) for _, i in restored])


def restore_content(conn: Any, item_id: str, content: str) -> None:
    """One item's content back from cold: ``items.content`` set whole, its cold copy deleted."""
    conn.execute("UPDATE items SET content = ? WHERE id = ?", (content, item_id))
    conn.execute("DELETE FROM cold_content WHERE item_id = ?", (item_id,))


# -- recall_index --------------------------------------------------------------------------------


def lock_index(conn: Any) -> None:
    """Serialise the writers of ``recall_index`` until the caller's transaction ends where the
    engine needs it (:meth:`veil.core.store.dialect.Dialect.lock_recall_index`: SQLite's
    ``BEGIN IMMEDIATE`` already does; PostgreSQL needs none)."""
    dialect_of(conn).lock_recall_index(conn)


def next_rev(conn: Any) -> int:
    """The revision number the next change of ``recall_index`` gets (max + 1; 1 when empty)."""
    return int(conn.execute("SELECT coalesce(max(rev), 0) + 1 FROM recall_index").fetchone()[0])


def new_index_rows(conn: Any, count: int) -> list[int]:
    """``count`` unused ``row`` numbers for new ``recall_index`` entries, ascending (SQLite:
    ``max + 1`` on, under the transaction's write lock; PostgreSQL: from a sequence, so
    concurrent writers never take the same one)."""
    return dialect_of(conn).new_index_rows(conn, count)


def index_states(conn: Any, item_ids: Sequence[str]) -> dict[str, tuple[int, str, bool]]:
    """``{item id: (row, tier, forgotten)}`` for the ids that have a ``recall_index`` entry."""
    return {
        r[0]: (int(r[1]), r[2], bool(r[3]))
        for r in _rows_for(
            conn, "SELECT item_id, row, tier, forgotten FROM recall_index", "item_id", item_ids
        )
    }


def index_entry(conn: Any, item_id: str) -> Any:
    """One item's ``recall_index`` ``row`` and ``fts`` flag (a row read by name), or None."""
    return conn.execute(
        "SELECT row, fts FROM recall_index WHERE item_id = ?", (item_id,)
    ).fetchone()


def insert_index_rows(conn: Any, rows: list[tuple]) -> None:
    """New ``recall_index`` entries: ``(row, item id, session id, seq, tier, tags JSON, rev)``
    each."""
    conn.executemany(
        "INSERT INTO recall_index (row, item_id, session_id, seq, tier, tags, rev)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def update_index_rows(conn: Any, rows: list[tuple]) -> None:
    """Changed ``recall_index`` entries: ``(session id, seq, tier, tags JSON, rev, row)`` each."""
    conn.executemany(
        "UPDATE recall_index SET session_id = ?, seq = ?, tier = ?, tags = ?, rev = ?"
        " WHERE row = ?",
        rows,
    )


def insert_forgotten(
    conn: Any, item_id: str, session_id: str | None, seq: int, tier: str, rev: int
) -> None:
    """A ``recall_index`` entry for an item forgotten before it ever left the prompt (its
    ``row`` from :func:`new_index_rows`)."""
    (row,) = new_index_rows(conn, 1)
    conn.execute(
        "INSERT INTO recall_index (row, item_id, session_id, seq, tier, forgotten, rev)"
        " VALUES (?, ?, ?, ?, ?, 1, ?)",
        (row, item_id, session_id, seq, tier, rev),
    )


def mark_live(conn: Any, row: int, rev: int) -> None:
    """Entry ``row`` is live again: tier ``live``, not forgotten, out of FTS5, revision ``rev``."""
    conn.execute(
        "UPDATE recall_index SET tier = 'live', forgotten = 0, fts = 0, rev = ? WHERE row = ?",
        (rev, row),
    )


def mark_forgotten(conn: Any, row: int, rev: int) -> None:
    """Entry ``row`` is forgotten: out of every index for good, revision ``rev``."""
    conn.execute(
        "UPDATE recall_index SET forgotten = 1, fts = 0, rev = ? WHERE row = ?", (rev, row)
    )


def set_embed_keys(conn: Any, keys: list[tuple[str, int, int]]) -> None:
    """Record embedding keys: ``(key, rev, row)`` each, applied only while the entry is warm."""
    conn.executemany(
        "UPDATE recall_index SET embed_key = ?, rev = ? WHERE row = ? AND tier = 'warm'", keys
    )


def index_changes(conn: Any, since: int) -> tuple[list[Any], int]:
    """``recall_index`` entries changed after position ``since`` (-1: every entry), and the
    position to read from next time: ``(rows, position)``, rows read by name with ``row,
    item_id, session_id, seq, tier, tags`` (JSON text or null) ``, embed_key, forgotten, fts``.
    An entry may come back again later (apply them idempotently); none is ever missed.

    Positions: SQLite's is the highest revision number ``rev``; PostgreSQL's is the oldest
    transaction id still running when read (entries are stamped with their writer's
    transaction id, so a writer that committed after a later one is still read)."""
    return dialect_of(conn).index_changes(conn, since)


def index_counts(conn: Any) -> dict[str, int]:
    """Entries of ``recall_index`` per tier (``live``, ``warm``, ``cold``) with forgotten ones
    counted apart under ``forgotten``; tiers without entries are absent."""
    return {
        row["t"]: int(row["n"])
        for row in conn.execute(
            "SELECT CASE WHEN forgotten <> 0 THEN 'forgotten' ELSE tier END AS t,"
            " COUNT(*) AS n FROM recall_index GROUP BY t"
        )
    }


# -- recall_fts ----------------------------------------------------------------------------------


def unindexed_text(conn: Any, rows: Sequence[int]) -> list[Any]:
    """Of the ``recall_index`` entries ``rows``, those searchable (warm or cold, not forgotten)
    and not yet in FTS5: rows read by name with ``row, item_id, content`` (the preview when
    cold) ``, tags, targets`` (JSON text) ``, kind, zcontent, sha256`` (null unless cold)."""
    return _rows_for(
        conn,
        "SELECT r.row, r.item_id, i.content, i.tags, i.targets, i.kind, c.zcontent,"
        " c.sha256 FROM recall_index r JOIN items i ON i.id = r.item_id"
        " LEFT JOIN cold_content c ON c.item_id = r.item_id"
        " WHERE r.fts = 0 AND r.forgotten = 0 AND r.tier IN ('warm', 'cold') AND",
        "r.row",
        rows,
    )


def add_text_entries(conn: Any, entries: list[tuple[int, str, str]]) -> None:
    """Put ``(row, content, meta)`` entries into the full-text index and flag their
    ``recall_index`` rows."""
    dialect_of(conn).add_text_entries(conn, entries)
    conn.executemany("UPDATE recall_index SET fts = 1 WHERE row = ?", [(e[0],) for e in entries])


def delete_text_entry(conn: Any, row: int) -> None:
    """Take entry ``row`` out of the full-text index (FTS5: contentless_delete)."""
    dialect_of(conn).delete_text_entry(conn, row)


def keyword_rows(
    conn: Any,
    terms: list[str],
    k: int,
    meta_weight: float,
    session_id: str | None = None,
    tags: list[str] | None = None,
) -> list[tuple[int, float]]:
    """The ``k`` best full-text matches of any of ``terms`` (each a phrase), best first, as
    ``[(row, score)]``, score higher is better: SQLite's -bm25 of FTS5, PostgreSQL's
    ``ts_rank``, the ``meta`` column weighted ``meta_weight`` against 1.0 for the content;
    restricted to a session and to entries carrying any of ``tags`` (compared lowercase) when
    given. No terms: ``[]``.
    """
    dialect = dialect_of(conn)
    found = dialect.keyword_query(terms, meta_weight)
    if found is None:
        return []
    score, condition, args = found
    row = dialect.fts_row()
    sql = f"SELECT {row}, {score} AS s FROM recall_fts WHERE {condition}"
    if session_id is not None:
        sql += f" AND {row} IN (SELECT row FROM recall_index WHERE session_id = ?)"
        args.append(session_id)
    if tags:
        each, holds = dialect.tags_contain("r.tags", len(tags))
        sql += f" AND {row} IN (SELECT r.row FROM recall_index r{each} WHERE {holds})"
        args.extend(t.lower() for t in tags)
    sql += " ORDER BY s DESC LIMIT ?"
    args.append(k)
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, args).fetchall()]


# -- embeddings ----------------------------------------------------------------------------------


def embedding_blobs(conn: Any, model: str, keys: Sequence[str]) -> dict[str, bytes]:
    """``{key: float32 little-endian vector bytes}`` of ``model`` for the ``keys`` stored."""
    found: dict[str, bytes] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})",
            (model, *chunk),
        ):
            found[row[0]] = row[1]
    return found


def embedding_keys(conn: Any, model: str, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` stored for ``model`` (their vectors are not read)."""
    found: set[str] = set()
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT key FROM embeddings WHERE model = ? AND key IN ({marks})", (model, *chunk)
        ):
            found.add(row[0])
    return found


def add_embeddings(conn: Any, rows: list[tuple[str, str, int, bytes]]) -> None:
    """Store ``(key, model, dim, float32 vector bytes)`` rows; a key already stored is kept
    (PostgreSQL also stores each as a pgvector ``vector`` for its HNSW index)."""
    if rows:
        dialect_of(conn).add_embeddings(conn, rows)


def nearest_warm(
    conn: Any,
    vector: bytes,
    model: str,
    k: int,
    *,
    session_id: str | None = None,
    tags: Sequence[str] | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` warm, unforgotten items whose stored ``model`` embedding is nearest to
    ``vector`` (float32 bytes): ``[(item id, cosine)]``, best first (ties by entry row),
    restricted to one session and to entries carrying any of ``tags`` (compared lowercase)
    when given. SQLite: exact, by sqlite-vec's ``vec_distance_cosine``; PostgreSQL: pgvector's
    HNSW index (approximate: recall@10 measured in bench/bench_store.py).

    Raises:
        VeilError: sqlite-vec cannot be loaded into this connection.
    """
    dialect = dialect_of(conn)
    where, args = "", []
    if session_id is not None:
        where += " AND r.session_id = ?"
        args.append(session_id)
    if tags:
        where += f" AND {dialect.tags_exist('r.tags', len(tags))}"
        args.extend(t.lower() for t in tags)
    found = dialect.nearest_warm(conn, vector, model, k, where, args)
    return [(r[0], float(r[1])) for r in found]
