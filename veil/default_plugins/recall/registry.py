"""One :class:`~veil.default_plugins.recall.search.Recall` per open
:class:`~veil.core.app.Veil`: the recall plugin's per-project state.

Why a registry keyed weakly by the Veil rather than an attribute on it: the core must not know
that a search plugin exists (issue 20: the core holds mechanism; ``veil.recall`` can be blocked
on its own), so the plugin keeps its state itself. A :class:`weakref.WeakKeyDictionary` frees a
project's catalog and vector matrix with its Veil, needs no Veil API and no hook to tear down,
and is safe for the threads of one process (HTTP requests, the REPL's background work) under
one lock. The search holds the tiers, which hold the store and the config but not the Veil, so
an entry does not keep its own key alive. A Veil whose tiers were replaced (tests and benchmarks
swap in ``Tiers(veil, embedder=...)`` with a model of their own) gets a fresh index over them.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from veil.default_plugins.recall.search import Recall

if TYPE_CHECKING:  # pragma: no cover
    from veil import Veil

_by_veil: weakref.WeakKeyDictionary[Veil, Recall] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def recall_for(veil: Veil) -> Recall:
    """The search over ``veil``'s warm and cold items (created on first use; no model is loaded
    until a search needs one).

    Args:
        veil: an open :class:`~veil.core.app.Veil`.

    Returns:
        The same :class:`Recall` for the same Veil while its ``tiers`` stay the same object.
    """
    tiers = veil.tiers
    with _lock:
        found = _by_veil.get(veil)
        if found is None or found.tiers is not tiers:
            found = Recall(tiers)
            _by_veil[veil] = found
        return found
