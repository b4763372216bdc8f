"""Observation masking (seed 000 "Context Compaction", step 1): the cheapest compression.

Tool results older than ``compaction.observationMaskingTurns`` steps are sent as
``[observation masked]``; the tool call itself stays, so the model still sees what it did and can
run it again. Only the copy that is sent changes: the stored history is never touched.
"""

from __future__ import annotations

from veil.core.types import Message

MASK = "[observation masked]"
"""The text a masked tool result is sent as (seed 000, verbatim)."""


def mask_observations(messages: list[Message], keep_steps: int) -> list[Message]:
    """Return ``messages`` with the tool results of all but the ``keep_steps`` newest steps masked.

    Args:
        messages: OpenAI chat messages (no system prompt), oldest first; not modified.
        keep_steps: steps whose tool results stay visible, counted from the end (a step is an
            assistant message with its tool results, DESIGN.md "Turn and step"); 0 turns masking
            off (seed 000: ``observationMaskingTurns``, default 10).

    Returns:
        A new list of the same length; masked results are new dicts with ``content`` set to
        :data:`MASK` (``tool_call_id`` and every other field kept), the other messages are the
        same objects. A tool result before any assistant message counts as part of a step older
        than all of them.
    """
    out = list(messages)
    if keep_steps <= 0:
        return out
    newer_steps = 0  # assistant messages after the current position
    for idx in range(len(messages) - 1, -1, -1):
        msg = messages[idx]
        role = msg.get("role")
        if role == "assistant":
            newer_steps += 1
        elif role == "tool" and newer_steps >= keep_steps and msg.get("content") != MASK:
            out[idx] = {**msg, "content": MASK}
    return out
