"""Assembling the prompt sent to the model before every model call.

Order inside every loop iteration (DESIGN.md "Thresholds, in order"): score and evict live items
under pressure -> observation masking -> full compaction if the prompt still exceeds
``compaction.threshold`` x the context window -> system prompt (base + plugin sections) +
defaultCompaction summary + the kept messages (from ``compact_size`` on, evicted content replaced
by pointer stubs). Nothing here changes the stored history.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veil.core.elision import elide_repeats
from veil.core.types import CompactRequest, ContextItem, LazyScores, Message, PromptSection

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

BASE_PROMPT = """You are veil, a coding agent working in the project at {cwd}.
Use the tools to read, search, edit and run code; do not guess file contents. Keep answers short.
When you are done, answer the user plainly. Today is {date}."""

SUMMARY_PREFIX = "Summary of the earlier part of this conversation (compacted):\n"


@dataclass
class Prompt:
    """What one model call receives.

    Attributes:
        messages: system message, optional summary message, then the kept messages.
        tokens: estimated prompt tokens of ``messages`` (the model's tokenizer).
        sections: the system-prompt sections used.
        notes: what was done to fit (evictions, masking, compaction), for front ends.
    """

    messages: list[Message]
    tokens: int
    sections: list[PromptSection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def stub_handle(item: ContextItem) -> str:
    """The handle a warm stub gives for ``item``: ``#<message index>`` (2 tokens; the message
    it stands for, unique in its session, which :func:`veil.core.context_ops.find_item`
    resolves), or the item id (7-8 tokens) for an item without a message."""
    return f"#{item.message_index}" if item.message_index is not None else item.id


def pointer_stub(item: ContextItem, preview_chars: int = 48) -> str:
    """The short stub that stands for an evicted item in the prompt (7-9 tokens in cl100k_base;
    the manifest says once how to follow one: ``veil_hydrate("#17")``).

    A tool result's call stays visible next to it, so its stub holds only the size and the
    handle of its message (:func:`stub_handle`): ``[evicted 812 tokens #17]``; an evicted turn:
    ``[evicted turn #16]``. An item in cold storage keeps its item id and a preview of
    ``preview_chars`` characters (issue 3: the cold tier hands back an id and a preview):
    ``[cold "I will patch parse()…" item_ab12cd34ef56]``. Stubs cost prompt tokens on every
    step (replay: about 20 stubs per step at an 8k budget), which is why they are this short:
    an item id costs 5 tokens more than a message handle.
    """
    if item.tier == "cold":
        preview = " ".join(item.content.split())[:preview_chars]
        more = "…" if len(item.content) > preview_chars else ""
        return f'[cold "{preview}{more}" {item.id}]'
    if item.source == "tool_result":
        return f"[evicted {item.tokens} tokens {stub_handle(item)}]"
    return f"[evicted turn {stub_handle(item)}]"


def system_sections(session: Session) -> list[PromptSection]:
    """The base prompt plus every plugin's ``system_prompt_sections``, sorted by ``order``."""
    loop = session.config.settings.loop
    base = session.snapshot.get("systemPrompt") or loop.system_prompt or BASE_PROMPT
    date = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    # plain replacement, not str.format: a user's prompt may hold braces of its own
    text = base.replace("{cwd}", str(session.cwd)).replace("{date}", date)
    sections = [PromptSection("base", text, order=0)]
    for result in session.veil.pm.hook.system_prompt_sections(session=session):
        if result is None:
            continue
        for section in result if isinstance(result, list) else [result]:
            if section is not None and section.text.strip():
                sections.append(section)
    sections.sort(key=lambda s: s.order)
    return sections


def kept_messages(session: Session) -> list[Message]:
    """Messages from ``compact_size`` on, with evicted items' content replaced by stubs.

    A tool message whose result item was evicted keeps its ``tool_call_id`` (the call and its
    result stay paired); only its content becomes the pointer stub.
    """
    return repair_pairing(_stubbed(session)[1])


def _stubbed(session: Session) -> tuple[list[int], list[Message]]:
    stubs = session.stubs
    idxs = list(range(session.compact_size, len(session.messages)))
    msgs = [
        _with_stub(session.messages[i], stubs[i]) if i in stubs else session.messages[i]
        for i in idxs
    ]
    return idxs, msgs


def _with_stub(message: Message, stub: str) -> Message:
    """``message`` with its content replaced by ``stub``. An evicted assistant turn's item holds
    its tool calls' arguments too (:func:`veil.core.capture.assistant_text`), so those leave
    with it: each call keeps its id and name (its result stays paired) and its arguments become
    ``{"evicted": "<the stub's handle>"}``, valid JSON for every provider."""
    out = {**message, "content": stub}
    calls = message.get("tool_calls")
    if calls and message.get("role") == "assistant":
        marker = json.dumps({"evicted": stub.rstrip("]").rsplit(" ", 1)[-1]})
        out["tool_calls"] = [
            {**tc, "function": {**tc.get("function", {}), "arguments": marker}} for tc in calls
        ]
    return out


def repair_pairing(messages: list[Message]) -> list[Message]:
    """Make tool calls and results pair up in what is sent (providers reject orphans).

    A tool result whose call is not directly before it (cut off by compaction) is dropped from
    what is sent (it stays in the store and in the summary); a call without a result (an
    interrupted turn) gets a result saying so; results are put in the order of their calls.
    Well-formed input comes back equal (as a new list).
    """
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if msg.get("role") == "tool":
            continue  # orphan result: its call is not in what is sent
        out.append(msg)
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        ids = [tc.get("id") for tc in calls]
        results: dict[str, Message] = {}
        while i < n and messages[i].get("role") == "tool":
            tid = messages[i].get("tool_call_id")
            if tid in ids and tid not in results:
                results[tid] = messages[i]
            i += 1
        for tid in ids:
            out.append(
                results.get(tid)
                or {"role": "tool", "tool_call_id": tid, "content": "[no result: interrupted]"}
            )
    return out


def pairing_problems(messages: list[Message]) -> list[str]:
    """Describe every unpaired tool call or result in ``messages`` (empty list = well paired).

    A call must be answered by tool messages directly after its assistant message.
    """
    problems: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.get("role") == "tool":
            problems.append(f"message {i}: tool result {msg.get('tool_call_id')} without its call")
            i += 1
            continue
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            ids = [tc.get("id") for tc in msg["tool_calls"]]
            j = i + 1
            seen = []
            while j < len(messages) and messages[j].get("role") == "tool":
                seen.append(messages[j].get("tool_call_id"))
                j += 1
            for tid in ids:
                if tid not in seen:
                    problems.append(f"message {i}: tool call {tid} without its result")
            for tid in seen:
                if tid not in ids:
                    problems.append(f"message {i}: tool result {tid} without its call")
            i = j
            continue
        i += 1
    return problems


def _message_tokens(session: Session, messages: list[Message]) -> int:
    return session.count_tokens(messages)


MASK_TEXT = "[observation masked]"
MAX_EVICTION_ROUNDS = 5


def _elided(session: Session, messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """``messages`` with repeated lines elided (:mod:`veil.core.elision`) when they exceed
    ``budget`` and ``context.elideRepeats`` is on, and the tokens that saved (else 0)."""
    if not session.config.settings.context.elide_repeats:
        return messages, 0
    whole = _message_tokens(session, messages)
    if whole <= budget:
        return messages, 0
    elided, lines = elide_repeats(messages)
    if not lines:
        return messages, 0
    return elided, max(0, whole - _message_tokens(session, elided))


def _masked(session: Session) -> list[Message]:
    """Kept messages after the ``compact`` hook's observation masking. Items whose tool result
    the masking hides leave the live set for the warm tier (reason ``masked``): what the model
    sees of them is the mask, so eviction must not count them again."""
    idxs, msgs = _stubbed(session)
    result = session.veil.pm.hook.compact(
        session=session, request=CompactRequest("masking", list(msgs))
    )
    if result is None or result.messages is None or len(result.messages) != len(msgs):
        return repair_pairing(msgs)
    masked = result.messages
    hidden = {
        idx
        for idx, before, after in zip(idxs, msgs, masked, strict=True)
        if after.get("content") == MASK_TEXT and before.get("content") != MASK_TEXT
    }
    if hidden:
        session.mask_items(hidden)
    return repair_pairing(_collapse(session, idxs, masked))


def _collapse(session: Session, idxs: list[int], messages: list[Message]) -> list[Message]:
    """Drop whole steps that left the prompt: an assistant turn that was evicted together with
    every result of its tool calls (evicted or masked) is not sent at all, call and results
    alike, so stubs do not pile up (each would cost ~15 tokens forever). The manifest counts
    them; ``veil_recall`` / ``veil_history`` find them; nothing leaves the store."""
    stubs = session.stubs
    out: list[Message] = []
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
            and all(
                idxs[k] in stubs or messages[k].get("content") == MASK_TEXT for k in range(i + 1, j)
            )
        ):
            collapsed += 1
        else:
            out.extend(messages[i:j])
        i = j
    session.collapsed_steps = collapsed
    return out


def manage_pressure(session: Session, budget_tokens: int, used_tokens: int) -> list[str]:
    """Score live items and apply the eviction plan (``score`` then ``evict`` hooks).

    Does nothing when the context layer is off (no scorer or no eviction policy loaded).
    Returns notes for front ends.
    """
    veil = session.veil
    if not veil.context_layer_on or not session.live_items:
        return []
    now = session.clock()
    items = session.live_items
    # Scored when the policy first reads them: an idle pass (no pressure) costs no scoring.
    scores = LazyScores(
        lambda: veil.pm.hook.score(
            session=session, items=items, task_tags=session.task_tags, now=now
        ),
        len(items),
    )
    plan = veil.pm.hook.evict(
        session=session,
        items=session.live_items,
        scores=scores,
        budget_tokens=budget_tokens,
        used_tokens=used_tokens,
    )
    if plan is None or not (plan.to_warm or plan.to_cold or plan.to_live):
        return list(plan.report) if plan else []
    return session.apply_eviction(plan)


def _fit(
    session: Session, budget: int, notes: list[str], *, page_in: bool
) -> tuple[list[Message], int, bool]:
    """Masking, elision and eviction rounds until the kept messages fit ``budget`` tokens (or
    the policy finds nothing more to move). Returns ``(messages, tokens elision saved, whether
    any item moved)``; appends the policy's notes to ``notes``."""
    full = _masked(session)
    messages, saved = _elided(session, full, budget)
    moved_any = False
    for round_number in range(MAX_EVICTION_ROUNDS):
        # Eviction counts in whole items (their own token counts): what elision saved is
        # room it may use, so an elided prompt is not evicted as if it were whole. Evicting
        # the newer copy of a repeat brings the older one back, so the saving can shrink; the
        # last rounds grant none, and a prompt that fits whole fits elided.
        allowance = saved if round_number < MAX_EVICTION_ROUNDS - 2 else 0
        used = _message_tokens(session, full)
        # Page-in (the policy re-selecting the working set) only in the first round: later
        # rounds only correct a plan's estimate downwards, so the rounds cannot oscillate.
        session.page_in_open = page_in and round_number == 0
        try:
            moved = manage_pressure(session, budget + allowance, used)
        finally:
            session.page_in_open = False
        notes += moved
        if not any(n.startswith(("evicted", "paged in")) for n in moved):
            break
        moved_any = True
        full = _masked(session)
        messages, saved = _elided(session, full, budget)
        if _message_tokens(session, messages) <= budget:
            break
    return messages, saved, moved_any


def build_prompt(session: Session) -> Prompt:
    """Run the per-iteration context management and return the prompt to send.

    Order (DESIGN.md): observation masking; when the kept messages exceed the budget, the
    lossless elision of repeated lines (:mod:`veil.core.elision`); then eviction under pressure
    (repeated, at most :data:`MAX_EVICTION_ROUNDS` times, while the messages still exceed the
    budget and the policy still finds something to move), then full compaction if the prompt
    exceeds ``compaction.threshold`` x the window.
    """
    veil = session.veil
    settings = session.config.settings
    window = session.context_window
    notes: list[str] = []

    sections = system_sections(session)
    system_text = "\n\n".join(s.text for s in sections)
    system_msg: Message = {"role": "system", "content": system_text}
    summary_msgs: list[Message] = []
    if session.compact_summary:
        summary_msgs = [{"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}]
    fixed_tokens = _message_tokens(session, [system_msg, *summary_msgs])
    # Eviction keeps the prompt under the full-compaction trigger (compaction.threshold x the
    # window): eviction is the first line, full compaction the fallback when it cannot keep up.
    room = min(window - settings.loop.completion_reserve, settings.compaction.threshold * window)
    budget = max(256, int(room) - fixed_tokens)
    if settings.context.budget_tokens:
        budget = min(budget, settings.context.budget_tokens)

    messages, saved, moved_any = _fit(session, budget, notes, page_in=True)
    if moved_any:
        # The manifest counts what is loaded: build it again after the pass. When it grew
        # (the first eviction adds the line on how to follow stubs), the messages fit the
        # smaller room left, without page-in.
        sections = system_sections(session)
        system_msg = {"role": "system", "content": "\n\n".join(s.text for s in sections)}
        grown = _message_tokens(session, [system_msg, *summary_msgs]) - fixed_tokens
        if grown > 0 and _message_tokens(session, messages) > budget - grown:
            messages, saved, _ = _fit(session, max(1, budget - grown), notes, page_in=False)
        fixed_tokens += grown
    if saved:
        notes.append(f"elided repeated lines: {saved} tokens")

    total = fixed_tokens + _message_tokens(session, messages)
    if total > settings.compaction.threshold * window and not session.state.get("_just_compacted"):
        result = veil.pm.hook.compact(session=session, request=CompactRequest("full", messages))
        if result is not None and result.messages is not None:
            messages = result.messages
            session.state["_just_compacted"] = True  # never compact twice in a row
            notes.append(f"compacted: {result.tokens_before} -> {result.tokens_after} tokens")
            if session.compact_summary:
                summary_msgs = [
                    {"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}
                ]
    else:
        session.state.pop("_just_compacted", None)

    final = [system_msg, *summary_msgs, *repair_pairing(messages)]
    return Prompt(final, _message_tokens(session, final), sections, notes)


def context_report(session: Session) -> dict[str, Any]:
    """Counts for front ends: live / warm / cold items and the tokens of the last prompt."""
    counts = session.veil.store.tier_counts(session.id)
    return {"tiers": counts, "lastPromptTokens": session.last_prompt_tokens}
