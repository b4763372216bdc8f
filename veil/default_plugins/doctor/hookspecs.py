"""The hook ``veil doctor`` fires: ``rebuild_derived`` (declared here, not in the core: only the
doctor's repair needs it; :func:`veil.default_plugins.doctor.register_hookspecs` hands this module
to the core).

A plugin that keeps a view derived from the store implements it with
``@hookimpl(optionalhook=True)``, so it still loads when ``veil.doctor`` is blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookspec

if TYPE_CHECKING:  # pragma: no cover
    from veil import Store


@hookspec
def rebuild_derived(store: Store) -> list[str] | None:
    """Rebuild every view this plugin derives from the store's rows (collected), so that none
    still reflects rows that were moved aside.

    Fired once by ``veil doctor --repair`` after a repair that changed rows. A plugin blocked at
    that moment is not called, so its view may still show what the moved rows held until a
    later repair that changes rows runs with it loaded (the doctor's report notes a blocked
    default plugin that implements this hook).

    :param store: the project's repaired :class:`veil.Store`.
    :return: the names of the views rebuilt (``["beliefs"]`` for the ``veil.beliefs`` plugin),
        reported in the doctor's ``rebuilt``; None or ``[]`` for none.
    """
