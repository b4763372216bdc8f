"""Building the prompt sent to the model before every model call: :func:`build_prompt` runs the
steps in order, each in its own module, read top down: assembling the parts
(:mod:`veil.core.prompt.assemble`), fitting the kept messages into the budget
(:mod:`veil.core.prompt.fit`), full compaction (:mod:`veil.core.prompt.compaction`) and the last
resort (:mod:`veil.core.prompt.squeeze`); what must stay put between prompts is the session's
:class:`~veil.core.prompt.state.PromptState`.

Order inside every loop iteration (DESIGN.md "Thresholds, in order"; :func:`build_prompt`):
the ``fit_prompt`` hook (observation masking) -> the ``elide_messages`` hook (default plugin
``veil.elision``: over the budget, elision of repeated lines) ->
score and evict live items under pressure -> full compaction if the prompt still exceeds
``compaction.threshold`` x the context window -> system prompt (base + plugin sections) +
defaultCompaction summary + the user messages of the exchange in progress that a compaction
summarised (sent verbatim all the same) + the kept messages (from ``compact_size`` on, evicted
content replaced by pointer stubs) + the context note. Nothing here changes the stored history.

Always sent (issue 19): the newest step (the model's last tool calls and their results: eviction
may not take them) and the current request. The hard budget still wins (DESIGN.md "Protection
vs budget"): a user message over :data:`~veil.core.prompt.assemble.OVERSIZED_SHARE` of the budget,
or newest results that would overflow it, are sent as head and tail around a pointer
``veil_hydrate("#N")`` follows.

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
* the ``elide_messages`` answer (repeated lines elided) is computed at change moments only (an
  eviction pass, a masking block, a compaction, anything that rewrites a message already sent) and
  reused unchanged in between, new messages appended as they are.

The budget a prompt is fitted into is what the provider counts: the context window less the
tool schemas offered and the completion tokens reserved (``max_tokens`` of the model's options,
else ``loop.completionReserve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veil.core.prompt import compaction
from veil.core.prompt.assemble import (
    MIN_SHOWN_TOKENS,
    OVERSIZED_SHARE,
    completion_reserve,
    message_tokens,
    notes_sent,
    place_anchored_note,
    repair_indexed,
    split_sections,
    summary_part,
    system_sections,
    tool_schema_tokens,
    unsqueezed,
)
from veil.core.prompt.fit import fit_kept
from veil.core.prompt.squeeze import squeeze
from veil.core.types import Message, PromptSection

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


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
        indices: for each of ``messages``, the index in ``session.messages`` of the stored
            message it shows (as it is or as a stub), None for what veil wrote (the system
            message, a summary, the notes, a result made up for an interrupted call) and for
            every message of a prompt built at the moment a compaction ran. Front ends that
            keep their own form of each message (``veil proxy``) use it to send that form.
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
    indices: list[int | None] = field(default_factory=list)


def build_prompt(
    session: Session,
    *,
    tools: list[dict[str, Any]] | None = None,
    reserve: int | None = None,
) -> Prompt:
    """Run the per-iteration context management and return the prompt to send.

    Order (DESIGN.md): observation masking; when the kept messages exceed the budget, the
    lossless elision of repeated lines (the ``elide_messages`` hook, default plugin
    ``veil.elision``); then eviction under pressure
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
        any compaction summary, the current request's user messages a compaction summarised,
        the kept messages, then the context note when a volatile
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
    system_msg, anchored, note = split_sections(sections)
    extra = notes_sent(session, anchored, note)
    # Eviction keeps the prompt under the full-compaction trigger (compaction.threshold x the
    # window): eviction is the first line, full compaction the fallback when it cannot keep up.
    # The provider counts the tool schemas and the completion inside the window too.
    trigger = settings.compaction.trigger(veil.context_layer_on) * window
    room = min(window - reserve_tokens - tools_tokens, trigger - tools_tokens)
    # the summary and the current request it holds verbatim are fixed parts of the prompt;
    # a pasted request larger than its share of the room is cut around a pointer first
    summary_msgs = summary_part(session, max(MIN_SHOWN_TOKENS, int(room * OVERSIZED_SHARE)))
    fixed_tokens = message_tokens(session, [system_msg, *summary_msgs, *extra])
    budget = max(256, int(room) - fixed_tokens)
    if settings.context.budget_tokens:
        budget = min(budget, settings.context.budget_tokens)

    messages, saved, moved_any, changed, idxs = fit_kept(session, budget, notes, page_in=True)
    room_left = budget  # what the kept messages may take once the notes are rebuilt
    if moved_any:
        # The manifest counts what is loaded: build the note again after the pass. When it
        # grew, the messages fit the smaller room left, without page-in.
        sections = system_sections(session)
        system_msg, anchored, note = split_sections(sections)
        extra = notes_sent(session, anchored, note)
        grown = message_tokens(session, [system_msg, *summary_msgs, *extra]) - fixed_tokens
        if grown > 0 and message_tokens(session, messages) > budget - grown:
            messages, saved, _, _, idxs = fit_kept(
                session, max(1, budget - grown), notes, page_in=False
            )
        fixed_tokens += grown
        room_left = max(1, budget - max(0, grown))
    if saved:
        notes.append(f"elided repeated lines: {saved} tokens")

    total = fixed_tokens + message_tokens(session, messages)
    if not compaction.just_compacted(session):  # plan_compaction decides when (the threshold)
        result = compaction.run_full(
            session,
            unsqueezed(session, messages, idxs),
            list(idxs),
            kind="prompt",
            prompt_tokens=total + tools_tokens,
        )
        if result is not None and result.messages is not None:
            messages = result.messages
            idxs = []  # unknown for the compacted messages: the last resort views them again
            changed = True
            compaction.set_just_compacted(session, True)  # never twice in a row
            notes.append(f"compacted: {result.tokens_before} -> {result.tokens_after} tokens")
            summary_msgs = summary_part(session, max(MIN_SHOWN_TOKENS, int(room * OVERSIZED_SHARE)))
    else:
        compaction.set_just_compacted(session, False)
    fixed_tokens = message_tokens(session, [system_msg, *summary_msgs, *extra])
    hard = window - reserve_tokens - tools_tokens - fixed_tokens
    squeezed = squeeze(session, messages, list(idxs), room_left, hard)
    if squeezed is not None:
        (messages, idxs), changed = squeezed, True

    known = list(idxs) if len(idxs) == len(messages) else [None] * len(messages)
    repaired, kept_idx = repair_indexed(messages, known)
    body, anchored_sent = place_anchored_note(session, repaired, anchored, changed)
    if anchored_sent is not None:
        at = next(k for k, m in enumerate(body) if m is anchored_sent)
        kept_idx = [*kept_idx[:at], None, *kept_idx[at:]]
    final = [system_msg, *summary_msgs, *body, *([note] if note else [])]
    indices = [None] * (1 + len(summary_msgs)) + kept_idx + ([None] if note else [])
    return Prompt(
        final,
        message_tokens(session, final),
        sections,
        notes,
        note=note,
        anchored_note=anchored_sent,
        budget=budget,
        tools_tokens=tools_tokens,
        reserve_tokens=reserve_tokens,
        indices=indices,
    )
