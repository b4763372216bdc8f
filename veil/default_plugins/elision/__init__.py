"""Default plugin ``veil.elision``: repeated-line elision
(:mod:`veil.default_plugins.elision.repeats`), the lossless first step when the kept messages
exceed the prompt's budget and ``context.elideRepeats`` is on (off by default since issue 29).
Blocked, nothing is elided, whatever the setting says.

The core fires ``elide_messages`` at change moments only (an eviction pass, a masking block, a
compaction, a message already sent that now reads differently, a prompt over its budget) and
sends what it returned unchanged until the next one, so the prompt's prefix stays put."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from veil import Message, PluginSession


@hookimpl
def elide_messages(
    session: PluginSession, messages: list[Message], budget_tokens: int
) -> list[Message] | None:
    """``messages`` with runs of lines a newer message repeats replaced by one marker each
    (:func:`veil.default_plugins.elision.repeats.elide_repeats`), when ``context.elideRepeats``
    is on and they exceed ``budget_tokens`` (the session's tokenizer); None otherwise, or when
    no line repeats."""
    if not session.config.settings.context.elide_repeats:
        return None
    if session.count_tokens(messages) <= budget_tokens:
        return None
    from veil.default_plugins.elision.repeats import elide_repeats

    elided, lines = elide_repeats(messages)
    return elided if lines else None
