"""Fitting the kept messages into the budget: the ``fit_prompt`` hook (observation masking),
the collapse of steps that left the prompt whole, the ``elide_messages`` hook (default plugin
``veil.elision``) at change moments only (:func:`sent_view`), and the eviction rounds
(:func:`fit_kept`, ``score`` and ``evict`` through :func:`manage_pressure`).

Between two change moments the messages sent last time are sent again unchanged and new ones
appended (DESIGN.md "The prompt's prefix stays put"); what was sent is kept in the session's
:class:`~veil.core.prompt.state.PromptState`. The parts this fits come from
:mod:`veil.core.prompt.assemble`; :func:`veil.core.prompt.context.build_prompt` calls it first,
full compaction and the last resort (:mod:`veil.core.prompt.squeeze`) after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.core.errors import PluginResultInvalid
from veil.core.plugins import (
    answering_plugins,
    checked_list,
    checked_scores,
    first_answer,
    results_by_plugin,
)
from veil.core.prompt.assemble import (
    message_tokens,
    newest_step,
    protected_indices,
    repair_indexed,
    stubbed_messages,
)
from veil.core.prompt.items import ItemBatch
from veil.core.prompt.state import FrozenView, prompt_state
from veil.core.types import EvictionOutcome, EvictionPlan, LazyScores, Message

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


MAX_EVICTION_ROUNDS = 5


def _masked(
    session: Session, budget: int | None = None, others: int | None = None
) -> tuple[list[int | None], list[Message]]:
    """Kept messages after the ``fit_prompt`` hook (observation masking), with the stored index
    of each (None for a result made up to repair pairing). Items whose tool result the masking
    hides leave the live set for the warm tier (reason ``masked``): what the model sees of them
    is the mask, so eviction must not count them again. ``budget``: see
    :func:`~veil.core.prompt.assemble.stubbed_messages`."""
    idxs, msgs = stubbed_messages(session, budget, others)
    fitted = _fit_prompt_hook(session, msgs, session.compact_size)
    if fitted is None:
        out, out_idx = repair_indexed(msgs, list(idxs))
        return out_idx, out
    masked, positions = fitted
    hidden = {idxs[k] for k in positions}
    if hidden:
        session.mask_items(hidden)
    kept_idx, kept = _collapse(session, idxs, masked, {idxs[k] for k in positions})
    out, out_idx = repair_indexed(kept, kept_idx)
    return out_idx, out


def fitted_messages(
    session: Session, messages: list[Message], first_index: int | None
) -> list[Message] | None:
    """``messages`` as the ``fit_prompt`` implementations leave them, or None when none is
    loaded (or one broke the rule: see below).

    The core passes a copy; each implementation replaces entries in place, in pluggy's call
    order, never adding, removing or reordering one (the position is the message's index in
    the history). When the length changed, every change is dropped with a ``warning`` event.

    Args:
        messages: what is about to be sent after the summary (no system prompt).
        first_index: index in ``session.messages`` of ``messages[0]``; None when the messages
            are not the session's history.

    Raises:
        PluginResultInvalid: an implementation returned something other than a list of
            positions in ``messages`` (see :func:`_fit_prompt_hook`).
    """
    fitted = _fit_prompt_hook(session, messages, first_index)
    return None if fitted is None else fitted[0]


_POSITIONS = "a list of positions in messages (int) or None"


def _fit_prompt_hook(
    session: Session, messages: list[Message], first_index: int | None
) -> tuple[list[Message], set[int]] | None:
    """:func:`fitted_messages`, with the positions the implementations report as masked: tool
    results replaced so that the model sees nothing of them (each implementation returns its
    own; their union). None as :func:`fitted_messages`.

    Raises:
        PluginResultInvalid: an answer is not a list of ints in ``range(len(messages))``.
    """
    pm = session.veil.pm
    if not pm.hook.fit_prompt.get_hookimpls():
        return None
    out = list(messages)
    masked: set[int] = set()
    for plugin, answer in results_by_plugin(
        pm, "fit_prompt", session=session, messages=out, first_index=first_index
    ):
        positions = checked_list(plugin, "fit_prompt", answer, int, _POSITIONS)
        wrong = [k for k in positions if isinstance(k, bool) or not 0 <= k < len(messages)]
        if wrong:
            raise PluginResultInvalid(
                plugin, "fit_prompt", f"a list holding {wrong[0]!r}", _POSITIONS
            )
        masked.update(positions)
    if len(out) != len(messages):
        session.emit(
            "warning",
            text=(
                f"a fit_prompt implementation changed the number of messages ({len(messages)} "
                f"-> {len(out)}); its changes were dropped"
            ),
        )
        return None
    return out, masked


def prompt_view(session: Session) -> tuple[list[int | None], list[Message]]:
    """What the prompt holds of the history from ``compact_size`` on, as compaction must
    summarise it (issue 19: stubs stay stubs, an evicted 2 MB result is not read again):
    masked, evicted contents stubbed, collapsed steps left out, pairing repaired. Returns
    ``(indices, messages)``, ``indices[k]`` the stored index of ``messages[k]`` (None for a
    result made up to repair pairing)."""
    return _masked(session)


def _collapse(
    session: Session, idxs: list[int], messages: list[Message], masked: set[int] = frozenset()
) -> tuple[list[int], list[Message]]:
    """Drop whole steps that left the prompt: an assistant turn that was evicted together with
    every result of its tool calls (evicted or masked) is not sent at all, call and results
    alike, so stubs do not pile up (each would cost ~15 tokens forever). The manifest counts
    them; ``veil_recall`` / ``veil_history`` find them; nothing leaves the store. ``masked``:
    the stored indices of the results a ``fit_prompt`` implementation masked. Returns the
    stored indices of what is kept, and the messages."""
    # an excerpt still shows lines of its message: only plain stubs collapse
    excerpted = session.excerpt_indices()
    stubs = {i: s for i, s in session.stubs.items() if i not in excerpted}
    out: list[Message] = []
    out_idx: list[int] = []
    collapsed = 0
    i, n = 0, len(messages)
    while i < n:
        msg, idx = messages[i], idxs[i]
        j = i + 1
        while j < n and messages[j].get("role") == "tool":
            j += 1
        if (
            msg.get("role") == "assistant"
            and idx in stubs
            and all(idxs[k] in stubs or idxs[k] in masked for k in range(i + 1, j))
        ):
            collapsed += 1
        else:
            out.extend(messages[i:j])
            out_idx.extend(idxs[i:j])
        i = j
    session.collapsed_steps = collapsed
    return out_idx, out


def _elided(session: Session, messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """``messages`` as the ``elide_messages`` hook rewrites them (default plugin
    ``veil.elision``: repeated lines, over ``budget`` with ``context.elideRepeats`` on), and
    the tokens that saved; ``(messages, 0)`` itself when no implementation answers.

    Raises:
        PluginResultInvalid: the answer is not a list of as many messages (dicts).
        PluginHookFailed: an implementation raised.
    """
    pm = session.veil.pm
    if not pm.hook.elide_messages.get_hookimpls():
        return messages, 0
    plugin, answer = first_answer(
        pm, "elide_messages", session=session, messages=messages, budget_tokens=budget
    )
    if answer is None:
        return messages, 0
    elided = checked_list(plugin, "elide_messages", answer, dict, _ELIDED)
    if len(elided) != len(messages):
        raise PluginResultInvalid(
            plugin, "elide_messages", f"{len(elided)} messages for {len(messages)}", _ELIDED
        )
    whole = message_tokens(session, messages)
    return elided, max(0, whole - message_tokens(session, elided))


_ELIDED = "a list of as many messages (dicts) as it was given, or None"


def sent_view(
    session: Session, budget: int, others: int | None = None
) -> tuple[list[Message], list[Message], int, bool, list[int | None]]:
    """``(whole, messages, saved, reused, indices)``: the kept messages after masking, stubs and
    collapse (``whole``), what is sent of them (``messages``: with repeated lines elided), the
    tokens elision saved, and whether the messages sent last time were reused (False: a change
    moment).

    Elision runs only at a change moment: when a message that was already sent now reads
    differently (an eviction pass, a masking block, a compaction, a hydrated item), or when
    what would be sent exceeds ``budget``. Otherwise the messages sent last time are sent
    again as they were and the new ones are appended whole, so the prompt's prefix stays put
    (:func:`~veil.core.prompt.context.build_prompt`). ``indices``: the stored index of each message
    (None for a result made up to repair pairing); oversized protected messages are behind a pointer
    (:func:`~veil.core.prompt.assemble.stubbed_messages`)."""
    idxs, whole = _masked(session, budget, others)
    state = prompt_state(session)
    frozen = state.frozen
    n = len(frozen.sources) if frozen is not None else 0
    if (
        frozen is not None
        and len(whole) >= n
        and all(whole[i].get("content") == frozen.sources[i] for i in range(n))
    ):
        messages = [*frozen.sent, *whole[n:]]
        sent_tokens = message_tokens(session, messages)
        if sent_tokens <= budget:
            saved = max(0, message_tokens(session, whole) - sent_tokens)
            return whole, messages, saved, True, idxs
        # over the budget: a change moment (without an eviction policy, elision is all that
        # keeps the prompt in its budget, so it runs again over the new messages too)
    messages, saved = _elided(session, whole, budget)
    state.frozen = FrozenView([m.get("content") for m in whole], messages)
    # a session's first prompt in this process (new, or loaded again for an HTTP turn or veil
    # -c) that elision leaves as it is sends what the stored session sent before: no change
    # moment (the anchored note stays where it stood, issue 29)
    first = frozen is None and messages is whole
    return whole, messages, saved, first, idxs


def fit_kept(
    session: Session, budget: int, notes: list[str], *, page_in: bool
) -> tuple[list[Message], int, bool, bool, list[int | None]]:
    """Masking, elision and eviction rounds until the kept messages fit ``budget`` tokens (or
    the policy finds nothing more to move). Returns ``(messages, tokens elision saved, whether
    any item moved, whether this is a change moment, the stored index of each message)``;
    appends the policy's notes to
    ``notes``.

    The policy decides when a pass runs (veil_fsrs: once the prompt passes its pressure
    threshold, and then it frees room down to its low-water mark); between passes nothing
    moves and the messages sent before are sent again unchanged (:func:`sent_view`)."""
    full, messages, saved, reused, idxs = sent_view(session, budget)
    moved_any = False
    for round_number in range(MAX_EVICTION_ROUNDS):
        # Eviction counts in whole items (their own token counts): what elision saved is
        # room it may use, so an elided prompt is not evicted as if it were whole. Evicting
        # the newer copy of a repeat brings the older one back, so the saving can shrink; the
        # last rounds grant none, and a prompt that fits whole fits elided.
        allowance = saved if round_number < MAX_EVICTION_ROUNDS - 2 else 0
        used = message_tokens(session, full)
        # Page-in (the policy re-selecting the working set) only in the first round: later
        # rounds only correct a plan's estimate downwards, so the rounds cannot oscillate.
        session.page_in_open = page_in and round_number == 0
        try:
            moved = manage_pressure(session, budget + allowance, used)
        finally:
            session.page_in_open = False
        notes += moved.notes
        if not moved.moved:  # nothing left or came back: another round would change nothing
            break
        moved_any = True
        full, messages, saved, _, idxs = sent_view(session, budget)
        if message_tokens(session, messages) <= budget:
            break
    return messages, saved, moved_any, moved_any or not reused, idxs


def manage_pressure(session: Session, budget_tokens: int, used_tokens: int) -> EvictionOutcome:
    """Score live items and apply the eviction plan (``score`` then ``evict`` hooks).

    Does nothing when the context layer is off (no scorer or no eviction policy loaded).
    Returns what moved, with the notes for front ends.

    Raises:
        PluginResultInvalid: the ``evict`` answer is not an
            :class:`~veil.core.types.EvictionPlan`, or the ``score`` answer, when the policy
            reads it, is not one number in [0, 1] per item
            (:func:`veil.core.plugins.checked_scores`); naming the plugin that implements it
            (``a or b`` when several could have answered).
        PluginHookFailed: a ``score`` or ``evict`` implementation raised.
    """
    veil = session.veil
    if not veil.context_layer_on or not session.live_items:
        return EvictionOutcome()
    now = session.clock()
    items = session.live_items

    # Scored when the policy first reads them: an idle pass (no pressure) costs no scoring.
    def scorer() -> str:
        return answering_plugins(veil.pm, "score")

    def scored(batch: Any) -> Any:
        raw = veil.pm.hook.score(session=session, items=batch, task_tags=session.task_tags, now=now)
        return None if raw is None else checked_scores(scorer, raw, len(batch))

    scores = LazyScores(lambda: scored(items), len(items))
    # The items earlier passes evicted that may come back, scored by the same scorer when the
    # policy first reads them: the policy gets what it needs instead of calling ``score``.
    candidates = session.page_in_candidates()
    paged_out = ItemBatch(candidates) if candidates else None
    paged_scores = (
        LazyScores(lambda: scored(paged_out), len(paged_out)) if paged_out is not None else None
    )
    plan = veil.pm.hook.evict(
        session=session,
        items=session.live_items,
        scores=scores,
        budget_tokens=budget_tokens,
        used_tokens=used_tokens,
        paged_out=paged_out,
        paged_scores=paged_scores,
    )
    if plan is not None and not isinstance(plan, EvictionPlan):
        raise PluginResultInvalid(
            answering_plugins(veil.pm, "evict"),
            "evict",
            type(plan).__name__,
            "a veil.core.types.EvictionPlan or None",
        )
    if plan is not None:
        _spare_protected(session, plan)
    if plan is None or not (plan.to_warm or plan.to_cold or plan.to_live):
        return EvictionOutcome(notes=tuple(plan.report) if plan else ())
    return session.apply_eviction_plan(plan)


def _spare_protected(session: Session, plan: Any) -> None:
    """Take the items of the newest step and of the current request out of ``plan``
    (:func:`~veil.core.prompt.assemble.protected_indices`), whatever the policy chose: the model
    always sees its own last tool call and result (issue 19). An oversized one goes behind a pointer
    instead (:func:`~veil.core.prompt.assemble.stubbed_messages`)."""
    protected = protected_indices(session)
    if not protected:
        return
    step = newest_step(session.messages)
    calls = {
        tc.get("id") for tc in (session.messages[step[0]].get("tool_calls") or [] if step else [])
    }
    moving = session.live_items.lookup([*plan.to_warm, *plan.to_cold])
    spared = {
        item_id
        for item_id, item in moving.items()
        if item.message_index in protected or (item.tool_call_id and item.tool_call_id in calls)
    }
    if spared:
        plan.to_warm = [i for i in plan.to_warm if i not in spared]
        plan.to_cold = [i for i in plan.to_cold if i not in spared]
