"""What the prompt path keeps for one session between two prompts: one :class:`PromptState`,
kept where plugin state is kept (``session.plugin_state``, under :data:`STATE_KEY`), for this
process only.

Between two change moments nothing already sent may change (DESIGN.md "The prompt's prefix
stays put"), so the fitting remembers what it sent (the elided view, the anchored note's place),
and the last resort what it cut (pointer texts, squeezed messages) and which warnings it gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session
    from veil.core.types import Message


@dataclass
class FrozenView:
    """What the last change moment sent of the kept messages: ``sources`` the contents of the
    view (masked, stubbed, collapsed) it was computed from, ``sent`` what went out for them
    (elided where an ``elide_messages`` answer applied)."""

    sources: list[Any]
    sent: list[Message]


@dataclass
class NoteAnchor:
    """Where the anchored note sits: before ``messages[index]`` of the kept messages (their
    end when it was placed), with the text it had then."""

    index: int
    message: Message


@dataclass
class PromptState:
    """The prompt path's memory of one session (:func:`prompt_state`).

    Attributes:
        frozen: what the last change moment sent (:func:`veil.core.prompt.fit.sent_view`
            reuses it until a message already sent reads differently); None before the first
            prompt in this process.
        anchor: where the anchored context note sits since the last change moment
            (:func:`veil.core.prompt.assemble.place_anchored_note`); None until placed (or
            read back from ``session.state``).
        pointers: stored message index -> ``(tokens, text)`` of the head-and-tail cut sent for
            it, reused while it fits its cap (:func:`veil.core.prompt.assemble.pointer_text`).
        squeezed: stored message index -> the token cap the last resort put it behind (0: the
            pointer alone; :func:`veil.core.prompt.squeeze.squeeze`); they stay cut.
        fixed_overflow_reported: the warning that the fixed parts fill the window was given.
        squeeze_reported: the warning that the last resort cut messages was given.
    """

    frozen: FrozenView | None = None
    anchor: NoteAnchor | None = None
    pointers: dict[int, tuple[int, str]] = field(default_factory=dict)
    squeezed: dict[int, int] = field(default_factory=dict)
    fixed_overflow_reported: bool = False
    squeeze_reported: bool = False


STATE_KEY = "veil.core.prompt"
"""The name the prompt state is kept under in ``session.plugin_state``: the core's own package,
not a plugin's name."""


def prompt_state(session: Session) -> PromptState:
    """The session's :class:`PromptState`, made empty on first use."""
    return session.plugin_state(STATE_KEY, PromptState)
