"""The hook this plugin fires: ``register_routes`` (declared here, not in the core: only the HTTP
server asks for routes; :func:`veil_http.register_hookspecs` hands this module to the core).

A plugin that contributes routes implements it with ``@hookimpl(optionalhook=True)``, so it still
loads where ``veil_http`` is not installed or is blocked (then nothing asks for its routes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookspec

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginVeil, Route


@hookspec
def register_routes(veil: PluginVeil) -> list[Route] | None:
    """Return the HTTP routes this plugin contributes (collected).

    Fired by ``veil_http`` each time it builds its application (``veil serve``,
    :func:`veil_http.create_app`), once per implementation; the routes are mounted beside
    veil's own and described in ``/openapi.json`` from their declared schemas. Without
    ``veil_http`` nothing fires it.

    :param veil: the application being served.
    :return: a list of :class:`veil.Route` (their ``plugin`` is filled in by the caller), or
        None for none. A route whose method and path another route has is refused when the
        application is built, naming both plugins.
    """
