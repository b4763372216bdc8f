"""The last resort, when the kept messages still exceed the budget after eviction and full
compaction (DESIGN.md "Protection vs budget": the hard budget wins): the newest step's results
share what is left behind pointers, then answered requests and other messages eviction could not
move go behind pointers, oldest first (:func:`squeeze`); a prompt that cannot fit even then is
refused before it is sent (:class:`~veil.core.errors.PromptTooLarge`), and fixed parts that alone
fill the window are reported. Its cuts stay (the session's
:class:`~veil.core.prompt.state.PromptState`), and :mod:`veil.core.prompt.assemble` applies them
to every later prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.core.errors import PromptTooLarge
from veil.core.prompt.assemble import (
    MIN_SHOWN_TOKENS,
    NO_HYDRATE_NOTE,
    can_hydrate,
    current_request,
    is_tool,
    is_user,
    message_tokens,
    newest_step,
    protected_indices,
    squeezed_messages,
)
from veil.core.prompt.fit import sent_view
from veil.core.prompt.state import prompt_state
from veil.core.types import Message

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


SQUEEZED_TOKENS = MIN_SHOWN_TOKENS
"""Tokens of an answered request (or other message eviction may not take) the last resort
leaves around its pointer (:func:`squeeze`): enough for the head of what was asked and the
end of it, a few lines."""
BARE_POINTER_TOKENS = 40
"""About what :data:`~veil.core.prompt.assemble.BARE_POINTER` costs in the prompt, with the
message's framing."""
SQUEEZE_NOTE_TOKENS = 60
"""Tokens a pointer cut costs beyond its cap (the note and the message's framing), used to
estimate what putting one more message behind a pointer saves before measuring again."""


def squeeze(
    session: Session, messages: list[Message], idxs: list[int | None], budget: int, hard: int
) -> tuple[list[Message], list[int | None]] | None:
    """The last resort when ``messages`` (stored indices ``idxs``; empty when unknown) still
    exceed ``budget`` tokens (the room under the compaction trigger) after eviction and full
    compaction, or with compaction refused or stopped (DESIGN.md "Protection vs budget": the
    hard budget wins; issue 19). ``hard``: what the messages may take of the context window
    (the window less the system prompt, summary, notes, tool schemas and completion reserve).

    First the newest step's results share the room left under ``budget``, behind pointers
    (:func:`~veil.core.prompt.assemble.stubbed_messages`). Then, only while the messages exceed
    ``hard`` (the provider would refuse them): the user messages of exchanges already answered go
    behind pointers, oldest first; then any other message eviction could not move, oldest first;
    then the same two again with the pointer alone
    (:data:`~veil.core.prompt.assemble.BARE_POINTER`). The current exchange's user messages and the
    newest step are never cut here. A first cut leaves :data:`SQUEEZED_TOKENS` tokens (head and
    tail) around a pointer ``veil_hydrate("#N")`` follows. Every cut stays from then on
    (:func:`~veil.core.prompt.assemble.squeezed_messages`), so the prompt changes only at the
    moments this runs (over the budget, when eviction runs too), never from call to call. The cuts
    are reported once per session (a warning).

    Returns ``(messages, indices)`` to send, or None when the messages already fit.

    When ``hard`` is not positive (the fixed parts alone fill the window) nothing is cut or
    raised: a warning says the settings are wrong.

    Raises:
        PromptTooLarge: even the current request and the newest step, with everything else
            cut, exceed ``hard`` (raised before any request is sent). Not with
            ``session.refuse_oversized_prompt`` off (replay, which sends nothing): the messages
            cut as far as they go are returned, over ``hard``.
    """
    total = message_tokens(session, messages)
    if total <= min(budget, hard):
        return None
    changed = False
    if len(idxs) != len(messages):  # compacted just now: the view says what each one is
        _, messages, _, _, idxs = sent_view(session, budget)
        total, changed = message_tokens(session, messages), True
    step = newest_step(session.messages)
    calls = (
        {tc.get("id") for tc in (session.messages[step[0]].get("tool_calls") or [])}
        if step
        else set()
    )
    results = [m for m in messages if is_tool(m) and m.get("tool_call_id") in calls]
    if total > min(budget, hard) and results:
        # the hard budget can be the smaller (a note grew, a compaction's summary came in)
        share_of = min(budget, hard) if hard > 0 else budget
        others = total - message_tokens(session, results)
        _, messages, _, _, idxs = sent_view(session, share_of, others)
        total, changed = message_tokens(session, messages), True
    if total <= hard:  # over the compaction trigger at most: the provider takes it
        return (messages, idxs) if changed else None
    if hard <= 0:
        # the system prompt, tool schemas and completion reserve alone fill the window: no
        # cut of the messages can help; the setting is wrong, not this session (reported)
        _report_fixed_overflow(session, hard)
        return (messages, idxs) if changed else None
    budget = hard
    protected = protected_indices(session)
    squeezed = squeezed_messages(session)
    cut: list[int] = []
    # a head and a tail first (answered requests, then the rest), then the pointer alone
    for cap, users in ((SQUEEZED_TOKENS, True), (SQUEEZED_TOKENS, False), (0, True), (0, False)):
        if total <= budget:
            break
        bare = cap == 0
        for i, message in list(zip(idxs, messages, strict=True)):
            if total <= budget:
                break
            if i is None or i in protected or is_user(message) != users:
                continue
            if i in squeezed and (squeezed[i] == 0 or not bare):
                continue
            content = message.get("content")
            size = message_tokens(session, [message])
            if not isinstance(content, str) or size <= (cap or BARE_POINTER_TOKENS) + 8:
                continue
            squeezed[i] = cap
            if i not in cut:
                cut.append(i)
            total -= size - (cap + SQUEEZE_NOTE_TOKENS if cap else BARE_POINTER_TOKENS)
            if total <= budget:  # the estimate says it fits: measure
                _, messages, _, _, idxs = sent_view(session, budget)
                total = message_tokens(session, messages)
        if cut:
            _, messages, _, _, idxs = sent_view(session, budget)
            total = message_tokens(session, messages)
    if cut:
        _report_squeeze(session, cut)
    target = budget
    for _ in range(3):  # the results' shares are estimates: tighten them by what is left over
        now = [m for m in messages if is_tool(m) and m.get("tool_call_id") in calls]
        if total <= budget or not now:
            break
        target -= total - budget + 8
        others = total - message_tokens(session, now)
        _, messages, _, _, idxs = sent_view(session, target, others)
        total = message_tokens(session, messages)
    if total > budget and session.refuse_oversized_prompt:
        raise PromptTooLarge(_too_large_text(session, messages, idxs, total, budget))
    return messages, idxs


def _report_fixed_overflow(session: Session, hard: int) -> None:
    """Warn, once per session, that the fixed parts of the prompt fill the context window."""
    state = prompt_state(session)
    if state.fixed_overflow_reported:
        return
    state.fixed_overflow_reported = True
    session.emit(
        "warning",
        text=(
            f"the system prompt, tool schemas and completion reserve alone exceed the context "
            f"window ({session.context_window} tokens) by {-hard} tokens: the provider may "
            f"refuse every prompt. Check models.main.contextWindow and lower "
            f"models.main.options.max_tokens (or loop.completionReserve)"
        ),
    )


def _report_squeeze(session: Session, cut: list[int]) -> None:
    """Warn, once per session, that the last resort put messages behind pointers."""
    state = prompt_state(session)
    if state.squeeze_reported:
        return
    state.squeeze_reported = True
    users = [i for i in cut if is_user(session.messages[i])]
    shown = ", ".join(f"#{i}" for i in cut[:8]) + (" ..." if len(cut) > 8 else "")
    session.emit(
        "warning",
        text=(
            f"the prompt was over its budget with nothing left to evict or compact: "
            f"{len(users)} answered request(s) and {len(cut) - len(users)} other message(s) "
            f"({shown}) are sent as a head, a tail and a pointer "
            + (
                '(veil_hydrate("#N") returns one whole)'
                if can_hydrate(session)
                else NO_HYDRATE_NOTE
            )
            + "; later ones will be too when needed, without a new warning. A good /compact "
            "frees the room for good"
        ),
    )


def _too_large_text(
    session: Session, messages: list[Message], idxs: list[int | None], total: int, budget: int
) -> str:
    """The :class:`PromptTooLarge` message: sizes and what the user can do."""
    protected = protected_indices(session)
    request = [
        m for i, m in zip(idxs, messages, strict=True) if i in current_request(session.messages)
    ]
    kept = [m for i, m in zip(idxs, messages, strict=True) if i in protected]
    return (
        f"the prompt cannot fit the context window ({session.context_window} tokens): its "
        f"messages need {total} tokens, the budget leaves {budget} (the window less the "
        f"system prompt, summary, tool schemas and completion reserve), and the current "
        f"request ({message_tokens(session, request)} tokens) with the newest step "
        f"({message_tokens(session, kept) - message_tokens(session, request)} tokens) "
        f"cannot be cut further. Nothing was sent. Use a model with a larger window "
        f"(models.main.contextWindow), lower models.main.options.max_tokens, offer fewer "
        f"tools, or start a new session (or /compact) with a shorter request"
    )
