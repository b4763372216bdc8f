"""Excerpts: the level between an item shown whole and a pointer stub.

An eviction policy may keep some lines of an item that leaves the prompt (``EvictionPlan.
excerpts``: 0-based line numbers of the item's content). The prompt then shows those lines
verbatim, in order, and one marker per elided run of lines, which names the message the item
came from so ``veil_hydrate("#N")`` brings the whole content back::

    [... 120 lines elided: #42 ...]
        def parse(self, text):
    [... 3 lines elided: #42 ...]
            raise ParseError(text)
    [... 40 lines elided: #42 ...]

Lines keep their own line numbers when the content has them (``cat -n``, ``nl``, veil's
``read``); the markers' counts say how far apart the kept lines are otherwise. An excerpt is
computed at an eviction pass and sent unchanged until the next pass changes that item's level,
so the prompt's prefix stays put in between (DESIGN.md invariant).

The markers are veil's own text: they never hold a reference in ``veil replay``'s measures
(:func:`shown_lines` gives the verbatim lines alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["MARKER", "is_marker", "normalised", "render_excerpt", "shown_lines"]

MARKER = "[... {count} lines elided: {handle} ...]"
"""One elided run of lines (issue 29's wording); ``handle`` is ``#<message index>`` or the item
id when the item has no message."""

_MARKER_HEAD = "[... "
_MARKER_TAIL = " ...]"


def is_marker(line: str) -> bool:
    """Whether ``line`` is an excerpt's elision marker (veil's text, not the item's)."""
    return (
        line.startswith(_MARKER_HEAD) and line.endswith(_MARKER_TAIL) and " lines elided: " in line
    )


def normalised(lines: Iterable[int], line_count: int) -> tuple[int, ...]:
    """``lines`` as an excerpt keeps them: distinct, ascending, within ``0..line_count-1``
    (others dropped)."""
    return tuple(sorted({i for i in lines if isinstance(i, int) and 0 <= i < line_count}))


def render_excerpt(content: str, lines: Sequence[int], handle: str) -> str:
    """The text that stands for ``content`` when only ``lines`` of it are shown.

    Args:
        content: the item's whole content.
        lines: 0-based line numbers to show (any order; duplicates and numbers past the last
            line are ignored).
        handle: what the markers name (``#17``: the message ``veil_hydrate`` follows back).

    Returns:
        The kept lines verbatim in order, each run of elided lines replaced by one
        :data:`MARKER` line (before the first kept line, between kept lines, after the last).
        With no line kept, a single marker for the whole content.
    """
    all_lines = content.split("\n")
    kept = normalised(lines, len(all_lines))
    out: list[str] = []
    previous = -1
    for i in kept:
        if i > previous + 1:
            out.append(MARKER.format(count=i - previous - 1, handle=handle))
        out.append(all_lines[i])
        previous = i
    if previous < len(all_lines) - 1:
        out.append(MARKER.format(count=len(all_lines) - previous - 1, handle=handle))
    return "\n".join(out)


def shown_lines(content: str, lines: Sequence[int]) -> list[str]:
    """The verbatim lines of ``content`` an excerpt of ``lines`` shows, in order (what a reader
    of the prompt gets of the item's own text; the markers are left out)."""
    all_lines = content.split("\n")
    return [all_lines[i] for i in normalised(lines, len(all_lines))]
