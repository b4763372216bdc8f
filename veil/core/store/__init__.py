"""The storage layer of veil: every SQL statement veil runs, on ``.veil/context.db`` (SQLite,
the default) or on a project's schema of a PostgreSQL + pgvector database (``store.url``).

Two engines, one set of statements. Each statement is written once, in the SQL both engines
run (``?`` placeholders; the PostgreSQL connection turns them into psycopg's), and the few
pieces that cannot be shared (SQLite's checks of damaged columns, ``INSERT OR REPLACE``, FTS5
and sqlite-vec against PostgreSQL's full text and pgvector's HNSW, begin statements, the recall
index's writer lock) are methods of one :class:`~veil.core.store.dialect.Dialect` per engine.
Why not a store interface with two implementations: every behaviour (the compare-and-swap, the
damaged-row rules, the recall index's numbering) would be written twice and drift. Why not
SQLAlchemy Core: the statements are already plain SQL in one package, the engine-specific parts
(FTS5, sqlite-vec, tsvector, pgvector) would still be raw SQL, and SQLite's hot path (an eviction
pass's writes behind the call path) would pay for statement compilation. Tenancy is a schema per
project (:mod:`~veil.core.store.postgres`), so the shared statements need no project column to
stay inside their project.

Callers above this package (sessions, tiers, the embedding cache, ``veil doctor``) keep their
logic and call the functions and methods here; none of them writes SQL on the core's tables. A
plugin's own tables are its own: it declares them (``register_migrations``) and runs its
statements on them through the store's connections.

Modules:

* :mod:`~veil.core.store.connection`: opening a SQLite connection (sqlean or sqlite3, WAL, busy
  timeout), applying migrations, loading sqlite-vec.
* :mod:`~veil.core.store.dialect`: what differs between the engines.
* :mod:`~veil.core.store.postgres`: the PostgreSQL engine (pool, schema per project,
  migrations, the connection the statement functions receive, advisory locks).
* :mod:`~veil.core.store.schema`: the migrations that build the schema.
* :mod:`~veil.core.store.context_db`: :class:`Store` (sessions, messages, items, the event log,
  usage; transactions) and the statements other layers run inside its transactions.
* :mod:`~veil.core.store.write_behind`: the thread that applies queued writes off the call path.
* :mod:`~veil.core.store.row_codec`: JSON columns written, and damaged rows recognised on read.
* :mod:`~veil.core.store.recall_tables`: the warm and cold tiers' tables (``recall_index``,
  ``recall_fts``, ``cold_content``) and the embedding cache (``embeddings``).
* :mod:`~veil.core.store.plugin_tables`: tables that plugins own (the beliefs' view, ``veil
  doctor``'s quarantine): their :class:`~veil.core.store.plugin_tables.Migration` declarations
  (the ``register_migrations`` hook), applied at open and recorded per plugin in
  ``plugin_migrations``; the plugins keep their DDL and statements.
* :mod:`~veil.core.store.memory_tables`: memory files and their provenance tags in a PostgreSQL
  store (:mod:`veil.core.shared_files` is their public face).
* :mod:`~veil.core.store.raw_rows`: ``veil doctor``'s reads of rows as stored and its repairs
  of them.
"""

from veil.core.store.context_db import ITEM_COLUMNS, Store, StoredSession

__all__ = ["ITEM_COLUMNS", "Store", "StoredSession"]
