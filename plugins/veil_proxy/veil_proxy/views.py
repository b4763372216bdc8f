"""What the native API routes share: a client's request seen as veil's OpenAI chat history, with
where each message came from, so the fitted prompt can be sent back in the client's own shape.

The proxy's context management works on OpenAI chat messages (:mod:`veil_proxy.conversations`).
An Anthropic Messages or OpenAI Responses request is read into a :class:`View` (its messages and,
for each, the :class:`Origin` in the request: which message or item, which blocks); veil captures
and fits the view's messages; the fitted prompt is then written back in the client's shape
(:mod:`veil_proxy.anthropic_view`, :mod:`veil_proxy.responses_view`): a message veil sends as the
client sent it goes in the client's own form (its blocks, ``cache_control`` markers, thinking
blocks and their signatures, reasoning items, ids), and one veil changed (a pointer stub, a
redacted credential) in the same form with veil's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veil import content_text


@dataclass(frozen=True)
class Origin:
    """Where a view message came from in the client's request.

    Attributes:
        index: the request's message (Anthropic) or input item (Responses) it came from.
        parts: the block indices inside that message (Anthropic) or the item indices
            (Responses) it was read from.
        extras: item indices carried with it and sent before it unchanged: Responses reasoning
            items and items veil does not read (Anthropic: empty).
    """

    index: int
    parts: tuple[int, ...]
    extras: tuple[int, ...] = ()


@dataclass
class View:
    """A client's request as veil's chat history.

    Attributes:
        messages: OpenAI chat messages: the leading ``system`` ones hold the client's system
            prompt, then its history.
        origins: one :class:`Origin` per message of ``messages``.
        system_text: the client's system prompt as veil reads it (the leading system messages'
            texts joined by a blank line: :func:`veil_proxy.conversations.split_system`).
        trailing: item indices after the last message that veil does not read, sent last.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    origins: list[Origin] = field(default_factory=list)
    system_text: str = ""
    trailing: tuple[int, ...] = ()

    @property
    def system_count(self) -> int:
        """How many leading messages are system messages."""
        count = 0
        for message in self.messages:
            if message.get("role") not in ("system", "developer"):
                break
            count += 1
        return count

    kept: list[str] = field(default_factory=list)
    """The text of what is sent as the client wrote it but is not in ``messages`` (Anthropic
    thinking text, Responses reasoning summaries and items veil does not read), one entry per
    block or item: it takes room in the window beside veil's messages."""

    def add(self, message: dict[str, Any], origin: Origin) -> None:
        """Append a message with its origin."""
        self.messages.append(message)
        self.origins.append(origin)


def veil_system_part(fitted_system: str, client_system: str) -> str | None:
    """What veil added to the client's system prompt in the system message it fitted (its
    sections: the manifest, memory files), or None when that message does not start with the
    client's prompt (the client's blocks cannot then be kept as they were)."""
    if not client_system.strip():
        return fitted_system.strip()
    if not fitted_system.startswith(client_system):
        return None
    return fitted_system[len(client_system) :].strip("\n")


def same_text(fitted: dict[str, Any], original: dict[str, Any]) -> bool:
    """Whether veil sends ``original``'s text unchanged in ``fitted`` (no stub, no redaction)."""
    return content_text(fitted.get("content")) == content_text(original.get("content"))


def same_arguments(fitted_call: dict[str, Any], original_call: dict[str, Any]) -> bool:
    """Whether a fitted tool call carries the original call's arguments unchanged."""
    return (fitted_call.get("function") or {}).get("arguments") == (
        original_call.get("function") or {}
    ).get("arguments")


def originals(
    view: View, fitted: list[dict[str, Any]], positions: list[int | None]
) -> list[int | None]:
    """For each fitted message, the index in ``view.messages`` of the client message it shows,
    else None. ``positions`` are positions in the client's history (after its system messages,
    :meth:`veil_proxy.conversations.Conversation.positions`); a message whose position is not
    known is matched by its tool call ids (an assistant message, a tool result)."""
    offset = view.system_count
    by_call: dict[str, int] = {}
    by_result: dict[str, int] = {}
    for k, message in enumerate(view.messages):
        for call in message.get("tool_calls") or []:
            by_call.setdefault(str(call.get("id")), k)
        if message.get("role") == "tool":
            by_result[str(message.get("tool_call_id"))] = k
    out: list[int | None] = []
    for message, position in zip(fitted, positions, strict=True):
        k = position + offset if position is not None else None
        if k is not None and not (0 <= k < len(view.messages)):
            k = None
        if k is not None and view.messages[k].get("role") != _view_role(message, view, k):
            k = None
        if k is None:
            calls = message.get("tool_calls") or []
            if message.get("role") == "assistant" and calls:
                k = by_call.get(str(calls[0].get("id")))
            elif message.get("role") == "tool":
                k = by_result.get(str(message.get("tool_call_id")))
        out.append(k)
    return out


def _view_role(fitted: dict[str, Any], view: View, k: int) -> str | None:
    """The role the view message ``k`` has when ``fitted`` shows it: a client's mid-history
    system message is stored (and fitted) as a user message."""
    role = fitted.get("role")
    if role == "user" and view.messages[k].get("role") in ("system", "developer"):
        return view.messages[k].get("role")
    return role
