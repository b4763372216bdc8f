"""The hook ``veil replay`` fires: ``replay_report`` (declared here, not in the core: only the
replay asks for it; :func:`veil.default_plugins.replay.register_hookspecs` hands this module to
the core).

A plugin that reports on replayed sessions implements it with ``@hookimpl(optionalhook=True)``,
so it still loads when ``veil.replay`` is blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookspec

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession


@hookspec
def replay_report(session: PluginSession) -> dict[str, Any] | None:
    """Add keys to one recording's entry in ``veil replay``'s result (collected).

    Fired by ``veil replay`` once per recording, after veil's policy has replayed every step
    of it through a real session.

    :param session: the replayed session.
    :return: a dict whose keys are added to the recording's entry (``dict.update``, in call
        order), e.g. ``{"convergence": {"fingerprints": 3, "levels": [...]}}``, or None for
        nothing; anything else is refused with :class:`veil.PluginResultInvalid`.
    """
