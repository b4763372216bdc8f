"""Columnar views of context items, so scorers work on numpy arrays instead of Python loops.

The columns are maintained incrementally: the live set changes a little on every tool call (one
item appended, a few evicted), and rebuilding every column in Python each time cost 20-60 ms at
10k items. An :class:`ItemBatch` builds its columns once, then appends write new rows into
preallocated arrays (capacity doubling), :meth:`ItemBatch.remove_rows` (and
:meth:`ItemBatch.remove_ids`, which finds the rows first) compacts every column with one gather,
and :meth:`ItemBatch.refresh` / :meth:`ItemBatch.refresh_rows` rewrite the rows of items changed
in place.

Consumers that derive state of their own from a batch (a scorer's per-batch index) follow the
same changes through :attr:`ItemBatch.version` and :meth:`ItemBatch.changes_since`, which replays
a bounded log of :class:`BatchChange` records, and keep that state in :attr:`ItemBatch.derived`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any, Literal

import numpy as np

from veil.core.types import ContextItem

NUMERIC_FIELDS = (
    "tokens",
    "access_count",
    "stability",
    "difficulty",
    "created_at",
    "last_access",
    "cognitive_weight",
    "step",
)
FLAG_FIELDS = ("pinned", "loaded_by_hand")
OBJECT_FIELDS = ("kind", "id")
"""Fields kept as object arrays of str (few: compacting an object array costs ~10x a float one)."""

LOG_LIMIT = 256
"""Changes kept for :meth:`ItemBatch.changes_since`; a consumer further behind rebuilds
(consumers catch up on every score, so they are rarely more than a few changes behind)."""
_MIN_CAPACITY = 16


def _capacity_after_removal(kept: int) -> int:
    """Room for a few appends after a removal (small: filling object arrays costs)."""
    return kept + max(_MIN_CAPACITY, kept // 8)


@dataclass(frozen=True)
class BatchChange:
    """One change of an :class:`ItemBatch`, as replayed by :meth:`ItemBatch.changes_since`.

    Positions are those of the batch just before the change, so replaying the changes in order
    keeps derived arrays aligned with the batch.

    Attributes:
        version: the batch's :attr:`~ItemBatch.version` right after this change.
        kind: ``"append"``: ``items`` were appended at positions ``start .. start+len(items)-1``;
            ``"remove"``: the rows ``rows`` (int64, ascending) were removed from a batch of
            ``size`` items (``items`` are the removed ones, in batch order; :attr:`keep` is the
            mask of the rows left); ``"refresh"``: the items at positions ``rows`` (int64,
            ascending) changed in place (``items`` are those items, aligned with ``rows``).
    """

    version: int
    kind: Literal["append", "remove", "refresh"]
    items: tuple[ContextItem, ...]
    start: int = 0
    rows: np.ndarray | None = None
    size: int = 0

    @property
    def keep(self) -> np.ndarray:
        """For a removal: bool mask over the ``size`` rows before it, True for rows left."""
        keep = np.ones(self.size, dtype=bool)
        if self.rows is not None:
            keep[self.rows] = False
        return keep


@dataclass
class _Columns:
    """Preallocated column storage: every array has ``capacity`` rows, the first ``n`` valid."""

    arrays: dict[str, np.ndarray]
    n: int
    seq_of: dict[str, int] = field(default_factory=dict)  # item id -> its append number
    next_seq: int = 0

    @property
    def capacity(self) -> int:
        return len(self.arrays["seq"])


def _empty_arrays(capacity: int) -> dict[str, np.ndarray]:
    arrays = {name: np.empty(capacity, dtype=np.float64) for name in NUMERIC_FIELDS}
    for name in FLAG_FIELDS:
        arrays[name] = np.empty(capacity, dtype=bool)
    arrays["has_targets"] = np.empty(capacity, dtype=bool)
    for name in OBJECT_FIELDS:
        arrays[name] = np.empty(capacity, dtype=object)
    arrays["tags"] = np.empty(capacity, dtype=object)
    # Append number of each row: strictly increasing along the batch (appends go to the end and
    # removal keeps the order), so an id's row is a binary search away.
    arrays["seq"] = np.empty(capacity, dtype=np.int64)
    return arrays


def _write_rows(
    arrays: dict[str, np.ndarray], start: int | np.ndarray, items: Sequence[ContextItem]
) -> None:
    """Write the columns of ``items`` into rows ``start .. start+len(items)-1``, or into the
    rows ``start`` when it is an array of positions (aligned with ``items``)."""
    count = len(items)
    if isinstance(start, np.ndarray):
        where: slice | np.ndarray = start
        positions = start.tolist()
    else:
        where = slice(start, start + count)
        positions = range(start, start + count)
    if count == 1:  # the common case (one captured item): scalar writes beat fromiter
        row = positions[0]
        item = items[0]
        for name in NUMERIC_FIELDS:
            arrays[name][row] = getattr(item, name)
        for name in FLAG_FIELDS:
            arrays[name][row] = bool(getattr(item, name))
        arrays["has_targets"][row] = bool(item.targets)
        for name in OBJECT_FIELDS:
            arrays[name][row] = getattr(item, name)
        arrays["tags"][row] = frozenset(item.tags)
        return
    for name in NUMERIC_FIELDS:
        arrays[name][where] = np.fromiter(
            (getattr(i, name) for i in items), dtype=np.float64, count=count
        )
    for name in FLAG_FIELDS:
        arrays[name][where] = np.fromiter(
            (bool(getattr(i, name)) for i in items), dtype=bool, count=count
        )
    arrays["has_targets"][where] = np.fromiter(
        (bool(i.targets) for i in items), dtype=bool, count=count
    )
    for name in OBJECT_FIELDS:
        column = arrays[name]
        for pos, item in zip(positions, items, strict=True):
            column[pos] = getattr(item, name)
    tags = arrays["tags"]
    for pos, item in zip(positions, items, strict=True):
        tags[pos] = frozenset(item.tags)


class ItemBatch(list):
    """A list of :class:`~veil.core.types.ContextItem` with incrementally maintained numpy columns.

    ``columns()`` returns ``{field: ndarray}`` of length ``len(batch)``: :data:`NUMERIC_FIELDS`
    (float64), :data:`FLAG_FIELDS` and ``has_targets`` (bool), :data:`OBJECT_FIELDS` (object
    arrays of str: ``kind``, ``id``) and ``tags`` (object array of frozensets). The arrays are views of preallocated storage: treat them as read-only. A dict
    returned earlier stays a valid snapshot after appends and removals (new rows are written
    past its end; removal builds new arrays); :meth:`refresh` rewrites rows in place.

    Cost: the first ``columns()`` builds everything (O(n) Python); after that ``append`` /
    ``extend`` cost O(new items), :meth:`remove_rows` / :meth:`remove_ids` O(n) numpy plus
    O(removed) Python, and :meth:`refresh` / :meth:`refresh_rows` O(refreshed). Every other list
    mutation (``insert``, ``pop``, ``remove``, ``sort``, item assignment, ``del``...) and
    :meth:`invalidate` drop the columns; the next ``columns()`` rebuilds them.

    Callers that change an item's fields in place call :meth:`refresh` (or :meth:`refresh_rows`;
    :meth:`invalidate` also works, at the price of a rebuild).

    Consumers with derived per-batch state (see :mod:`veil_fsrs.batch_index`) compare
    :attr:`version` with the version they last saw and replay :meth:`changes_since`; they may
    keep that state in :attr:`derived` (a dict keyed by consumer name, dropped with the batch).

    Item ids are expected to be unique within a batch (the core never holds an item twice);
    with duplicates, :meth:`remove_ids` removes every copy and :meth:`row_of` finds the last.
    Not safe against concurrent mutation from several threads (like ``list``).
    """

    def __init__(self, items: Iterable[ContextItem] = ()) -> None:
        super().__init__(items)
        self.version: int = 0
        """Incremented by every change (append, removal, refresh, any other mutation)."""
        self.derived: dict[str, Any] = {}
        """Scratch space for consumers' incremental state, keyed by consumer name."""
        self._store: _Columns | None = None
        self._cols: dict[str, Any] | None = None  # views of the current version
        self._log: deque[BatchChange] = deque(maxlen=LOG_LIMIT)
        self._reset_version = 0  # changes before this version cannot be replayed

    def __reduce__(self) -> tuple[Any, ...]:
        # copy / pickle / deepcopy give a fresh batch (never shared column storage)
        return (type(self), (list(self),))

    # -- columns ----------------------------------------------------------------------------

    def columns(self) -> dict[str, Any]:
        """The columns of the current version (see the class docstring); the same dict object
        until the batch changes. The first call builds them (O(n) Python)."""
        if self._cols is None:
            store = self._ensure_store()
            n = store.n
            self._cols = {name: array[:n] for name, array in store.arrays.items() if name != "seq"}
        return self._cols

    def _ensure_store(self) -> _Columns:
        store = self._store
        if store is None or store.n != len(self):
            store = self._build_store()
        return store

    def _build_store(self) -> _Columns:
        n = len(self)
        arrays = _empty_arrays(max(_MIN_CAPACITY, 2 * n))
        _write_rows(arrays, 0, self)
        arrays["seq"][:n] = np.arange(n)
        store = _Columns(arrays=arrays, n=n, next_seq=n)
        store.seq_of = {item.id: pos for pos, item in enumerate(self)}
        self._store = store
        self._cols = None
        return store

    def _grow(self, store: _Columns, needed: int) -> None:
        capacity = max(needed, 2 * store.capacity)
        for name, old in store.arrays.items():
            grown = np.empty(capacity, dtype=old.dtype)
            grown[: store.n] = old[: store.n]
            store.arrays[name] = grown

    # -- the change log ---------------------------------------------------------------------

    def _record(self, kind: str, items: tuple[ContextItem, ...], **fields: Any) -> None:
        self.version += 1
        self._cols = None
        self._log.append(BatchChange(self.version, kind, items, **fields))  # type: ignore[arg-type]

    def _reset(self) -> None:
        """A change the columns cannot follow: drop them and the log."""
        self.version += 1
        self._store = None
        self._cols = None
        self._log.clear()
        self._reset_version = self.version

    def changes_since(self, version: int) -> list[BatchChange] | None:
        """The changes after ``version``, oldest first (empty when ``version`` is current).

        Returns None when they cannot be replayed (a mutation other than append / extend /
        :meth:`remove_rows` / refresh happened since, the log of :data:`LOG_LIMIT` changes no
        longer reaches back, or ``version`` is not one of this batch's): rebuild from scratch.
        """
        if version == self.version:
            return []
        if version > self.version or version < self._reset_version:
            return None
        if not self._log or self._log[0].version > version + 1:
            return None
        return [change for change in self._log if change.version > version]

    def invalidate(self) -> None:
        """Forget the columns (after changing items' fields in place without saying which);
        the next :meth:`columns` rebuilds them, and consumers rebuild their derived state.
        Prefer :meth:`refresh` / :meth:`refresh_rows`, which cost O(changed items)."""
        self._reset()

    # -- incremental changes ----------------------------------------------------------------

    def append(self, item: ContextItem) -> None:
        """Append one item (O(1) amortised for the columns)."""
        start = len(self)
        list.append(self, item)
        self._appended(start, (item,))

    def extend(self, items: Iterable[ContextItem]) -> None:
        """Append items (O(len(items)) for the columns)."""
        start = len(self)
        list.extend(self, items)
        if len(self) > start:
            self._appended(start, tuple(self[start:]))

    def __iadd__(self, items: Iterable[ContextItem]) -> ItemBatch:  # type: ignore[override]
        self.extend(items)
        return self

    def _appended(self, start: int, items: tuple[ContextItem, ...]) -> None:
        store = self._store
        if store is not None:
            if store.n != start:  # defensive: the store fell behind; rebuild lazily
                self._store = None
            else:
                stop = start + len(items)
                if stop > store.capacity:
                    self._grow(store, stop)
                _write_rows(store.arrays, start, items)
                seq = store.next_seq
                if len(items) == 1:  # the common case (one captured item): a scalar write
                    store.arrays["seq"][start] = seq
                    store.seq_of[items[0].id] = seq
                else:
                    store.arrays["seq"][start:stop] = np.arange(seq, seq + len(items))
                    for offset, item in enumerate(items):
                        store.seq_of[item.id] = seq + offset
                store.next_seq = seq + len(items)
                store.n = stop
        self._record("append", items, start=start)

    def remove_ids(self, ids: Iterable[str]) -> list[ContextItem]:
        """Remove the items whose id is in ``ids`` (ids not in the batch are ignored).

        The rows are found as :meth:`rows_of` finds them (O(k log n) with unique ids), then
        removed as :meth:`remove_rows` removes them. With duplicate ids every copy goes.
        Returns the removed items, in batch order.
        """
        wanted = ids if isinstance(ids, (set, frozenset)) else set(ids)
        if not wanted or not len(self):
            return []
        if self.ids_unique:
            rows = self.rows_of(list(wanted))
            return self.remove_rows(rows[rows >= 0])
        n = len(self)
        gone = np.fromiter(
            map(wanted.__contains__, self._ensure_store().arrays["id"][:n].tolist()),
            dtype=bool,
            count=n,
        )
        return self.remove_rows(np.flatnonzero(gone))

    @property
    def ids_unique(self) -> bool:
        """Whether no two items of the batch share an id (O(1) once the columns exist)."""
        store = self._ensure_store()
        return len(store.seq_of) == store.n

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Positions of the items with ids ``ids``, aligned with ``ids`` (int64, -1 for an id
        not in the batch): O(k) dict look-ups and one binary search, O(k log n) for k ids.
        With duplicate ids, the position is the one :meth:`row_of` finds."""
        store = self._ensure_store()
        n = store.n
        if not len(ids):
            return np.zeros(0, dtype=np.int64)
        if len(store.seq_of) != n:  # duplicate ids: the last copy's row, as row_of finds it
            last = {item_id: row for row, item_id in enumerate(store.arrays["id"][:n].tolist())}
            return np.fromiter((last.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
        # the look-ups run in C; -1 (no append number) for ids not in the batch
        seqs = np.fromiter(map(store.seq_of.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
        batch_seqs = store.arrays["seq"][:n]
        rows = np.minimum(np.searchsorted(batch_seqs, seqs), max(n - 1, 0))
        # an append number not in the batch (an id changed in place without refresh) gives -1
        return np.where((seqs >= 0) & (batch_seqs[rows] == seqs), rows, -1) if n else rows - 1

    def remove_rows(self, rows: Iterable[int] | np.ndarray) -> list[ContextItem]:
        """Remove the items at positions ``rows`` (repeats allowed); returns them in batch order.

        Every column is compacted with one numpy gather of the rows left (new arrays: earlier
        ``columns()`` dicts stay valid snapshots): O(n) numpy plus O(removed) Python.

        Raises:
            IndexError: a position outside the batch (nothing is removed).
        """
        gone_rows = np.unique(np.asarray(rows, dtype=np.int64).reshape(-1))
        n = len(self)
        if not len(gone_rows):
            return []
        if gone_rows[0] < 0 or gone_rows[-1] >= n:
            raise IndexError(f"rows: positions must be in 0..{n - 1}, got {gone_rows.tolist()}")
        store = self._ensure_store()
        removed = list(map(self.__getitem__, gone_rows.tolist()))  # the reads run in C
        keep = np.ones(n, dtype=bool)
        keep[gone_rows] = False
        # compress over Python bools: iterating numpy scalars is slow
        list.__setitem__(self, slice(None), list(compress(self, keep.tolist())))
        kept = len(self)
        rows_kept = np.flatnonzero(keep)
        capacity = _capacity_after_removal(kept)
        unique_ids = len(store.seq_of) == n
        for name, old in store.arrays.items():
            fresh = np.empty(capacity, dtype=old.dtype)
            np.take(old[:n], rows_kept, out=fresh[:kept])
            store.arrays[name] = fresh
        store.n = kept
        if unique_ids:
            # pop with a default: an id changed in place without refresh is tolerated; the
            # pops run in C (deque of length 0 drains the map)
            deque(map(store.seq_of.pop, [item.id for item in removed], repeat(None)), maxlen=0)
        else:  # duplicate ids: rebuild the id -> append number map from what is left
            seqs = store.arrays["seq"][:kept].tolist()
            store.seq_of = dict(zip(store.arrays["id"][:kept].tolist(), seqs, strict=True))
        self._record("remove", tuple(removed), rows=gone_rows, size=n)
        return removed

    def row_of(self, item_id: str) -> int | None:
        """Position of the item with id ``item_id`` in the batch, or None (O(log n))."""
        store = self._ensure_store()
        seq = store.seq_of.get(item_id)
        if seq is None:
            return None
        seqs = store.arrays["seq"][: store.n]
        row = int(np.searchsorted(seqs, seq))
        return row if row < store.n and seqs[row] == seq else None

    def lookup(self, ids: Iterable[str]) -> dict[str, ContextItem]:
        """``{id: item}`` for the ids in ``ids`` that are in the batch (others are left out):
        found by :meth:`rows_of`, O(k log n) for k ids, where a dict of the whole batch would
        cost O(n)."""
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)
        rows = self.rows_of(ids)
        if (rows < 0).any():
            found = rows >= 0
            ids = list(compress(ids, found.tolist()))
            rows = rows[found]
        return dict(zip(ids, map(self.__getitem__, rows.tolist()), strict=True))

    def has_id(self, item_id: str) -> bool:
        """Whether an item with id ``item_id`` is in the batch (O(log n))."""
        return self.row_of(item_id) is not None

    def refresh(self, item: ContextItem) -> bool:
        """Rewrite the columns of ``item`` after its fields changed in place.

        Returns False (and changes nothing) when ``item`` itself is not in the batch.
        """
        row = self.row_of(item.id)
        if row is None or self[row] is not item:
            return False
        self.refresh_rows([row])
        return True

    def refresh_rows(self, rows: Iterable[int]) -> None:
        """Rewrite the columns of the items at positions ``rows`` (changed in place).

        Raises:
            IndexError: a position outside the batch.
        """
        positions = np.unique(np.asarray(list(rows), dtype=np.int64))
        if not len(positions):
            return
        n = len(self)
        if positions[0] < 0 or positions[-1] >= n:
            raise IndexError(f"rows: positions must be in 0..{n - 1}, got {positions.tolist()}")
        items = tuple(self[p] for p in positions.tolist())
        store = self._store
        if store is not None and store.n == n:
            ids, seqs = store.arrays["id"], store.arrays["seq"]
            for pos, item in zip(positions.tolist(), items, strict=True):
                if ids[pos] != item.id:  # an id changed: keep the id -> row map right
                    if store.seq_of.get(ids[pos]) == seqs[pos]:
                        del store.seq_of[ids[pos]]
                    store.seq_of[item.id] = int(seqs[pos])
            _write_rows(store.arrays, positions, items)
        self._record("refresh", items, rows=positions)

    # -- every other list mutation drops the columns ----------------------------------------

    def _resetting(name: str):  # noqa: N805 - a decorator factory used at class creation
        def method(self: ItemBatch, *args: Any, **kwargs: Any) -> Any:
            result = getattr(list, name)(self, *args, **kwargs)
            self._reset()
            return result

        method.__name__ = name
        method.__doc__ = f"``list.{name}``; drops the columns (rebuilt on the next use)."
        return method

    for _name in (
        "insert",
        "pop",
        "remove",
        "clear",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__imul__",
    ):
        locals()[_name] = _resetting(_name)
    del _name, _resetting
