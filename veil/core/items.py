"""Columnar views of context items, so scorers work on numpy arrays instead of Python loops."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


class ItemBatch(list):
    """A list of :class:`~veil.core.types.ContextItem` with cached numpy columns.

    ``columns()`` returns ``{field: ndarray}`` for :data:`NUMERIC_FIELDS` (float64),
    :data:`FLAG_FIELDS` (bool), ``kind`` (object array of str), ``has_targets`` (bool) and
    ``tags`` (list of frozensets). The cache is dropped whenever the list is changed through its
    own methods; callers that mutate an item in place call :meth:`invalidate`.
    """

    def __init__(self, items: Iterable[ContextItem] = ()) -> None:
        super().__init__(items)
        self._cols: dict[str, Any] | None = None

    def invalidate(self) -> None:
        """Forget cached columns (after changing an item's fields in place)."""
        self._cols = None

    def columns(self) -> dict[str, Any]:
        """Return the cached columns, building them once (O(n) Python, then reused)."""
        if self._cols is None:
            n = len(self)
            cols: dict[str, Any] = {}
            for name in NUMERIC_FIELDS:
                cols[name] = np.fromiter((getattr(i, name) for i in self), dtype=np.float64, count=n)
            for name in FLAG_FIELDS:
                cols[name] = np.fromiter((bool(getattr(i, name)) for i in self), dtype=bool, count=n)
            cols["kind"] = np.array([i.kind for i in self], dtype=object)
            cols["has_targets"] = np.fromiter((bool(i.targets) for i in self), dtype=bool, count=n)
            cols["tags"] = [frozenset(i.tags) for i in self]
            self._cols = cols
        return self._cols

    # Any mutation through list methods drops the cache.
    def _mutated(name: str):  # noqa: N805 - a decorator factory used at class creation
        def method(self: ItemBatch, *args: Any, **kwargs: Any) -> Any:
            self._cols = None
            return getattr(list, name)(self, *args, **kwargs)

        method.__name__ = name
        return method

    for _name in (
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
    ):
        locals()[_name] = _mutated(_name)
    del _name, _mutated
