"""A griffe extension for the API reference (mkdocs.yml): Sphinx cross-reference roles in veil's
docstrings (``:class:`~veil.core.types.Tool```) are shown as the code they name (``Tool``)
instead of the raw role, which Markdown would print as it is.

The roles stay plain code rather than links: a link to an object the reference does not render
(most of ``veil.core`` is not public API) would be a broken reference, which the strict build
refuses.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj|const|type):`(~?)([^`]+)`")
"""A Sphinx Python-domain role; group 1 is ``~`` (show the last name only), group 2 the target."""


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by its target as inline code.

    Args:
        text: a docstring.

    Returns:
        The docstring, ``:class:`~a.b.C``` written ```C``` and ``:mod:`a.b``` written ```a.b```.
    """

    def code(match: re.Match[str]) -> str:
        target = match.group(2).strip()
        return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"

    return ROLE.sub(code, text)


class SphinxRolesAsCode(griffe.Extension):
    """Rewrites each object's docstring with :func:`plain` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
