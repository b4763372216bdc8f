"""The storage layer of veil: every SQL statement veil runs on ``.veil/context.db``.

Callers above this package (sessions, tiers, the embedding cache, ``veil doctor``, the beliefs)
keep their logic and call the functions and methods here; none of them writes SQL.

Modules:

* :mod:`~veil.core.store.connection`: opening a connection (sqlean or sqlite3, WAL, busy
  timeout), applying migrations, loading sqlite-vec.
* :mod:`~veil.core.store.schema`: the migrations that build the schema.
* :mod:`~veil.core.store.context_db`: :class:`Store` (sessions, messages, items, the event log,
  usage; transactions) and the statements other layers run inside its transactions.
* :mod:`~veil.core.store.write_behind`: the thread that applies queued writes off the call path.
* :mod:`~veil.core.store.row_codec`: JSON columns written, and damaged rows recognised on read.
* :mod:`~veil.core.store.recall_tables`: the warm and cold tiers' tables (``recall_index``,
  ``recall_fts``, ``cold_content``) and the embedding cache (``embeddings``).
* :mod:`~veil.core.store.belief_tables`: the beliefs default plugin's view tables.
* :mod:`~veil.core.store.raw_rows`: ``veil doctor``'s reads of rows as stored and its
  quarantine writes.
"""

from veil.core.store.context_db import ITEM_COLUMNS, Store, StoredSession

__all__ = ["ITEM_COLUMNS", "Store", "StoredSession"]
