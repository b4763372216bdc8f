"""Assembling the prompt sent to the model before every model call.

Order inside every loop iteration (DESIGN.md "Thresholds, in order"): score and evict live items
under pressure -> observation masking -> full compaction if the prompt still exceeds
``compaction.threshold`` x the context window -> system prompt (base + plugin sections) +
defaultCompaction summary + the kept messages (from ``compact_size`` on, evicted content replaced
by pointer stubs) + the context note. Nothing here changes the stored history.

The prompt's prefix stays put (DESIGN.md invariant; issue 18). Providers bill cached input at
about 0.1x and llama.cpp reuses its KV cache only for an unchanged prefix, so between two
eviction passes (or masking blocks, or compactions) nothing already sent changes:

* the system message holds only stable sections (:attr:`PromptSection.volatile` false), and
  the date in the base prompt is the session's start date (``session.created_at``, stored);
* what changes from call to call (volatile sections) goes into short *context notes*, ``user``
  messages (valid after tool results for every provider: litellm merges them into the
  tool-result turn for Anthropic), never stored in the history: the manifest's counts
  (anchored sections) are placed last at a change moment and then left where they are until
  the next one, so they are cached too ("updated only when a pass runs", issue 18);
  convergence warnings and belief conflicts are sent last at every call while they hold;
* the elision of repeated lines is computed at change moments only (an eviction pass, a
  masking block, a compaction, anything that rewrites a message already sent) and reused
  unchanged in between, new messages appended as they are.

The budget a prompt is fitted into is what the provider counts: the context window less the
tool schemas offered and the completion tokens reserved (``max_tokens`` of the model's options,
else ``loop.completionReserve``).
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
NOTE_PREFIX = "[veil context note, not from the user]\n"
"""First line of the context note (:func:`build_prompt`): the model must not take it for the
user's words."""


@dataclass
class Prompt:
    """What one model call receives.

    Attributes:
        messages: system message, optional summary message, then the kept messages.
        tokens: estimated prompt tokens of ``messages`` (the model's tokenizer).
        sections: the system-prompt sections used (stable and volatile).
        notes: what was done to fit (evictions, masking, compaction), for front ends.
        note: the trailing context note (volatile sections but the anchored ones),
            ``messages[-1]`` when present.
        anchored_note: the anchored context note (the manifest's counts as of the last change
            moment), where it stands in ``messages``, or None.
        budget: tokens the kept messages were fitted into.
        tools_tokens: tokens of the tool schemas the budget left room for.
        reserve_tokens: completion tokens the budget left room for.
    """

    messages: list[Message]
    tokens: int
    sections: list[PromptSection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    note: Message | None = None
    anchored_note: Message | None = None
    budget: int = 0
    tools_tokens: int = 0
    reserve_tokens: int = 0


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


def session_date(session: Session) -> str:
    """The date the base prompt shows: the UTC date the session started (ISO ``YYYY-MM-DD``).
    Fixed for the session's life, resumed or not, so the system message never changes at
    midnight (a changed system message breaks every provider's prompt cache)."""
    return _dt.datetime.fromtimestamp(session.created_at, _dt.timezone.utc).date().isoformat()


def base_prompt(session: Session) -> tuple[str, PromptSection | None]:
    """The system message's first text and, when the project's own prompt is not approved by
    the user, the section quoting it (:mod:`veil.core.prompt_trust`).

    Returns:
        ``(text, None)`` with the project's prompt when approved (or the prompt the user's
        client sent through ``veil proxy``, or the user's ``VEIL_LOOP__SYSTEM_PROMPT``, or
        veil's base prompt when nobody sets one);
        ``(BASE_PROMPT, section)`` when a project's prompt is not approved: the section (order
        1, stable) holds it quoted under a heading naming its file.
    """
    from veil.core.prompt_trust import (
        project_prompt,
        project_prompt_approved,
        quoted_project_prompt,
    )

    found = project_prompt(session.config, session.agent, session.snapshot)
    if found is None:
        own = session.snapshot.get("systemPrompt") or session.config.settings.loop.system_prompt
        return own or BASE_PROMPT, None
    text, origin = found
    if project_prompt_approved(session.config.project_dir, text):
        return text, None
    quoted = quoted_project_prompt(text, origin)
    return BASE_PROMPT, PromptSection("project-prompt", quoted, order=1)


def system_sections(session: Session) -> list[PromptSection]:
    """The base prompt plus every plugin's ``system_prompt_sections``, sorted by ``order``
    (stable and volatile ones; :func:`build_prompt` puts the volatile ones in the context
    note)."""
    base, unapproved = base_prompt(session)
    date = session_date(session)
    # plain replacement, not str.format: a user's prompt may hold braces of its own
    text = base.replace("{cwd}", str(session.cwd)).replace("{date}", date)
    sections = [PromptSection("base", text, order=0)]
    if unapproved is not None:
        sections.append(unapproved)
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
    its tool calls' arguments too (the capture plugin's
    :func:`veil.default_plugins.capture.rules.assistant_text`), so those leave with it: each call
    keeps its id and name (its result stays paired) and its arguments become
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
        session=session,
        request=CompactRequest("masking", list(msgs), first_index=session.compact_size),
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


@dataclass
class _Frozen:
    """What the last change moment sent of the kept messages: ``sources`` the contents of the
    view (masked, stubbed, collapsed) it was computed from, ``sent`` what went out for them
    (elided where elision applied)."""

    sources: list[Any]
    sent: list[Message]


def _view(session: Session, budget: int) -> tuple[list[Message], list[Message], int, bool]:
    """``(whole, messages, saved, reused)``: the kept messages after masking, stubs and
    collapse (``whole``), what is sent of them (``messages``: with repeated lines elided), the
    tokens elision saved, and whether the messages sent last time were reused (False: a change
    moment).

    Elision runs only at a change moment: when a message that was already sent now reads
    differently (an eviction pass, a masking block, a compaction, a hydrated item), or when
    what would be sent exceeds ``budget``. Otherwise the messages sent last time are sent
    again as they were and the new ones are appended whole, so the prompt's prefix stays put
    (:func:`build_prompt`)."""
    whole = _masked(session)
    frozen: _Frozen | None = getattr(session, "_frozen_view", None)
    n = len(frozen.sources) if frozen is not None else 0
    if (
        frozen is not None
        and len(whole) >= n
        and all(whole[i].get("content") == frozen.sources[i] for i in range(n))
    ):
        messages = [*frozen.sent, *whole[n:]]
        sent_tokens = _message_tokens(session, messages)
        if sent_tokens <= budget:
            return whole, messages, max(0, _message_tokens(session, whole) - sent_tokens), True
        # over the budget: a change moment (without an eviction policy, elision is all that
        # keeps the prompt in its budget, so it runs again over the new messages too)
    messages, saved = _elided(session, whole, budget)
    session._frozen_view = _Frozen([m.get("content") for m in whole], messages)
    return whole, messages, saved, False


def _fit(
    session: Session, budget: int, notes: list[str], *, page_in: bool
) -> tuple[list[Message], int, bool, bool]:
    """Masking, elision and eviction rounds until the kept messages fit ``budget`` tokens (or
    the policy finds nothing more to move). Returns ``(messages, tokens elision saved, whether
    any item moved, whether this is a change moment)``; appends the policy's notes to
    ``notes``.

    The policy decides when a pass runs (veil_fsrs: once the prompt passes its pressure
    threshold, and then it frees room down to its low-water mark); between passes nothing
    moves and the messages sent before are sent again unchanged (:func:`_view`)."""
    full, messages, saved, reused = _view(session, budget)
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
        full, messages, saved, _ = _view(session, budget)
        if _message_tokens(session, messages) <= budget:
            break
    return messages, saved, moved_any, moved_any or not reused


def completion_reserve(session: Session) -> int:
    """Completion tokens the prompt leaves room for: ``max_tokens`` (or
    ``max_completion_tokens``) of the main model's options when set, else
    ``loop.completionReserve`` (1,024). Providers count the completion inside the window."""
    model = session.veil.llm.model_for("main", session.model)
    options = getattr(model, "options", None) or {}
    for key in ("max_tokens", "max_completion_tokens"):
        value = options.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return session.config.settings.loop.completion_reserve


def tool_schema_tokens(session: Session, tools: list[dict[str, Any]] | None) -> int:
    """Tokens the provider counts for the tool schemas ``tools`` (OpenAI ``tools`` entries),
    with the main model's tokenizer (:func:`veil.core.tokens.count_message_tokens`: exact
    for OpenAI models, an over-estimate otherwise); 0 for none."""
    if not tools:
        return 0
    from veil.core.tokens import count_message_tokens

    model = session.veil.llm.model_for("main", session.model)
    name = getattr(model, "litellm_model", None) or getattr(model, "name", None)
    counted = getattr(model, "count_tool_tokens", None)
    if callable(counted):
        return int(counted(tools))
    return max(0, count_message_tokens([], name, tools=tools) - count_message_tokens([], name))


def _note_message(volatile: list[PromptSection]) -> Message | None:
    if not volatile:
        return None
    return {
        "role": "user",
        "content": NOTE_PREFIX + "\n\n".join(s.text for s in volatile),
    }


def _split(sections: list[PromptSection]) -> tuple[Message, Message | None, Message | None]:
    """The system message (stable sections), the anchored note (volatile, anchored sections:
    the manifest's counts) and the trailing note (the other volatile ones); a note is None
    when it has no section."""
    system: Message = {
        "role": "system",
        "content": "\n\n".join(s.text for s in sections if not s.volatile),
    }
    anchored = _note_message([s for s in sections if s.volatile and s.anchored])
    return system, anchored, _note_message([s for s in sections if s.volatile and not s.anchored])


@dataclass
class _Anchor:
    """Where the anchored note sits: before ``messages[index]`` of the kept messages (their
    end when it was placed), with the text it had then."""

    index: int
    message: Message


def _place_anchored(
    session: Session, kept: list[Message], note: Message | None, changed: bool
) -> tuple[list[Message], Message | None]:
    """``kept`` with the anchored note in place, and the note sent. At a change moment (or
    the first time) the note is the current one, at the end; otherwise the note of the last
    change moment stays where it was, so everything up to the newest messages is unchanged."""
    if note is None:
        session._note_anchor = None
        return kept, None
    anchor: _Anchor | None = session._note_anchor
    if changed or anchor is None or anchor.index > len(kept):
        anchor = _Anchor(len(kept), note)
        session._note_anchor = anchor
    return [*kept[: anchor.index], anchor.message, *kept[anchor.index :]], anchor.message


def _notes_sent(session: Session, anchored: Message | None, note: Message | None) -> list[Message]:
    """The notes whose tokens the budget leaves room for: the trailing note, and the larger of
    the current anchored note and the one in place (either may be sent)."""
    out = [note] if note else []
    if anchored is None:
        return out
    anchor: _Anchor | None = session._note_anchor
    if anchor is not None and _message_tokens(session, [anchor.message]) > _message_tokens(
        session, [anchored]
    ):
        return [anchor.message, *out]
    return [anchored, *out]


def build_prompt(
    session: Session,
    *,
    tools: list[dict[str, Any]] | None = None,
    reserve: int | None = None,
) -> Prompt:
    """Run the per-iteration context management and return the prompt to send.

    Order (DESIGN.md): observation masking; when the kept messages exceed the budget, the
    lossless elision of repeated lines (:mod:`veil.core.elision`); then eviction under pressure
    (repeated, at most :data:`MAX_EVICTION_ROUNDS` times, while the messages still exceed the
    budget and the policy still finds something to move), then full compaction if the prompt
    exceeds ``compaction.threshold`` x the window.

    Args:
        session: the session.
        tools: the tool schemas that will be offered with this prompt (their tokens count
            against the window, as the provider counts them).
        reserve: completion tokens to leave room for (default :func:`completion_reserve`).

    Returns:
        The :class:`Prompt`: the system message (stable: byte-identical from call to call),
        any compaction summary, the kept messages, then the context note when a volatile
        section has something to say. Between two change moments (an eviction pass, a masking
        block, a compaction, an item hydrated) each prompt starts with the whole previous one
        but its note.
    """
    veil = session.veil
    settings = session.config.settings
    window = session.context_window
    notes: list[str] = []
    tools_tokens = tool_schema_tokens(session, tools)
    reserve_tokens = completion_reserve(session) if reserve is None else max(0, int(reserve))

    sections = system_sections(session)
    system_msg, anchored, note = _split(sections)
    summary_msgs: list[Message] = []
    if session.compact_summary:
        summary_msgs = [{"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}]
    extra = _notes_sent(session, anchored, note)
    fixed_tokens = _message_tokens(session, [system_msg, *summary_msgs, *extra])
    # Eviction keeps the prompt under the full-compaction trigger (compaction.threshold x the
    # window): eviction is the first line, full compaction the fallback when it cannot keep up.
    # The provider counts the tool schemas and the completion inside the window too.
    trigger = settings.compaction.trigger(veil.context_layer_on) * window
    room = min(window - reserve_tokens - tools_tokens, trigger - tools_tokens)
    budget = max(256, int(room) - fixed_tokens)
    if settings.context.budget_tokens:
        budget = min(budget, settings.context.budget_tokens)

    messages, saved, moved_any, changed = _fit(session, budget, notes, page_in=True)
    if moved_any:
        # The manifest counts what is loaded: build the note again after the pass. When it
        # grew, the messages fit the smaller room left, without page-in.
        sections = system_sections(session)
        system_msg, anchored, note = _split(sections)
        extra = _notes_sent(session, anchored, note)
        grown = _message_tokens(session, [system_msg, *summary_msgs, *extra]) - fixed_tokens
        if grown > 0 and _message_tokens(session, messages) > budget - grown:
            messages, saved, _, _ = _fit(session, max(1, budget - grown), notes, page_in=False)
        fixed_tokens += grown
    if saved:
        notes.append(f"elided repeated lines: {saved} tokens")

    total = fixed_tokens + _message_tokens(session, messages)
    if total + tools_tokens > trigger and not session.state.get("_just_compacted"):
        result = veil.pm.hook.compact(session=session, request=CompactRequest("full", messages))
        if result is not None and result.messages is not None:
            messages = result.messages
            changed = True
            session.state["_just_compacted"] = True  # never compact twice in a row
            notes.append(f"compacted: {result.tokens_before} -> {result.tokens_after} tokens")
            if session.compact_summary:
                summary_msgs = [
                    {"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}
                ]
    else:
        session.state.pop("_just_compacted", None)

    body, anchored_sent = _place_anchored(session, repair_pairing(messages), anchored, changed)
    final = [system_msg, *summary_msgs, *body, *([note] if note else [])]
    return Prompt(
        final,
        _message_tokens(session, final),
        sections,
        notes,
        note=note,
        anchored_note=anchored_sent,
        budget=budget,
        tools_tokens=tools_tokens,
        reserve_tokens=reserve_tokens,
    )


def context_report(session: Session) -> dict[str, Any]:
    """Counts for front ends: live / warm / cold items and the tokens of the last prompt."""
    counts = session.veil.store.tier_counts(session.id)
    return {"tiers": counts, "lastPromptTokens": session.last_prompt_tokens}
