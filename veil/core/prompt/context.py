"""Assembling the prompt sent to the model before every model call.

Order inside every loop iteration (DESIGN.md "Thresholds, in order"; :func:`build_prompt`):
the ``fit_prompt`` hook (observation masking) -> over the budget, elision of repeated lines ->
score and evict live items under pressure -> full compaction if the prompt still exceeds
``compaction.threshold`` x the context window -> system prompt (base + plugin sections) +
defaultCompaction summary + the user messages of the exchange in progress that a compaction
summarised (sent verbatim all the same) + the kept messages (from ``compact_size`` on, evicted
content replaced by pointer stubs) + the context note. Nothing here changes the stored history.

Always sent (issue 19): the newest step (the model's last tool calls and their results: eviction
may not take them) and the current request. The hard budget still wins (DESIGN.md "Protection
vs budget"): a user message over :data:`OVERSIZED_SHARE` of the budget, or newest results that
would overflow it, are sent as head and tail around a pointer ``veil_hydrate("#N")`` follows.

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

from veil.core.errors import PluginResultInvalid, PromptTooLarge
from veil.core.plugins import answering_plugins, checked_list, checked_scores, results_by_plugin
from veil.core.prompt import compaction
from veil.core.prompt.elision import elide_repeats
from veil.core.prompt.items import ItemBatch
from veil.core.types import (
    ContextItem,
    EvictionOutcome,
    EvictionPlan,
    LazyScores,
    Message,
    PromptSection,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

BASE_PROMPT = """You are veil, a coding agent working in the project at {cwd}.
Use the tools to read, search, edit and run code; do not guess file contents. Keep answers short.
When you are done, answer the user plainly. Today is {date}."""

SUMMARY_PREFIX = "Summary of the earlier part of this conversation (compacted):\n"
"""First line of the message that stands for the compacted part of the history (the
session's ``compact_summary`` follows it)."""
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


def excerpt_stub(item: ContextItem) -> str:
    """What stands for a warm item that keeps some lines in the prompt (``item.excerpt``): those
    lines verbatim and one elision marker per run of lines left out, each naming the handle
    ``veil_hydrate`` follows back (:func:`veil.core.prompt.excerpts.render_excerpt`)."""
    from veil.core.prompt.excerpts import render_excerpt

    return render_excerpt(item.content, item.excerpt or (), stub_handle(item))


def session_date(session: Session) -> str:
    """The date the base prompt shows: the UTC date the session started (ISO ``YYYY-MM-DD``).
    Fixed for the session's life, resumed or not, so the system message never changes at
    midnight (a changed system message breaks every provider's prompt cache)."""
    return _dt.datetime.fromtimestamp(session.created_at, _dt.timezone.utc).date().isoformat()


def base_prompt(session: Session) -> tuple[str, PromptSection | None]:
    """The system message's first text and, when the project's own prompt is not approved by
    the user, the section quoting it (:mod:`veil.core.safety.prompt_trust`).

    Returns:
        ``(text, None)`` with the project's prompt when approved (or the prompt the user's
        client sent through ``veil proxy``, or the user's ``VEIL_LOOP__SYSTEM_PROMPT``, or
        veil's base prompt when nobody sets one);
        ``(BASE_PROMPT, section)`` when a project's prompt is not approved: the section (order
        1, stable) holds it quoted under a heading naming its file.
    """
    from veil.core.safety.prompt_trust import (
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
    note).

    Raises:
        PluginResultInvalid: an implementation returned something other than a
            :class:`~veil.core.types.PromptSection`, a list of them or None (naming it).
        PluginHookFailed: an implementation raised.
    """
    base, unapproved = base_prompt(session)
    date = session_date(session)
    # plain replacement, not str.format: a user's prompt may hold braces of its own
    text = base.replace("{cwd}", str(session.cwd)).replace("{date}", date)
    sections = [PromptSection("base", text, order=0)]
    if unapproved is not None:
        sections.append(unapproved)
    answers = results_by_plugin(session.veil.pm, "system_prompt_sections", session=session)
    for plugin, result in answers:
        found = checked_list(
            plugin,
            "system_prompt_sections",
            [s for s in result if s is not None] if isinstance(result, list) else result,
            PromptSection,
            "a veil.core.types.PromptSection or a list of them",
            single=True,
        )
        sections.extend(s for s in found if s.text.strip())
    sections.sort(key=lambda s: s.order)
    return sections


def kept_messages(session: Session) -> list[Message]:
    """Messages from ``compact_size`` on, with evicted items' content replaced by stubs.

    A tool message whose result item was evicted keeps its ``tool_call_id`` (the call and its
    result stay paired); only its content becomes the pointer stub.
    """
    return repair_pairing(_stubbed(session)[1])


def current_request(messages: list[Message]) -> list[int]:
    """Indices of the user messages of the exchange still in progress (DESIGN.md "Turn and
    step": a user message starts a new exchange): the last run of consecutive user messages of
    ``messages``, unless a final answer (an assistant message without tool calls) came after
    it; empty otherwise. These are kept verbatim through every compaction (issue 19). Once
    answered, the exchange is history like any other: seed 000's "messages before compactSize
    are never sent again" holds between turns."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if _is_user(messages[i])), None)
    if last is None:
        return []
    if any(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages[last + 1 :]):
        return []
    first = last
    while first > 0 and _is_user(messages[first - 1]):
        first -= 1
    return list(range(first, last + 1))


def newest_step(messages: list[Message]) -> list[int]:
    """Indices of the newest step (DESIGN.md: one model call with its tool calls and their
    results): the last assistant message and the tool results after it; empty when there is no
    assistant message. Always in the prompt (issue 19: the model must see its own last call)."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if last is None:
        return []
    end = last + 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return list(range(last, end))


def _is_user(message: Message) -> bool:
    return message.get("role") == "user"


def _is_tool(message: Message) -> bool:
    return message.get("role") == "tool"


def protected_indices(session: Session) -> set[int]:
    """Message indices eviction may never take out of the prompt: the newest step and the
    user messages of the current exchange (:func:`newest_step`, :func:`current_request`).
    When they alone exceed the budget, their oversized contents go behind a pointer instead
    (:func:`pointer_text`; DESIGN.md "Protection vs budget": the hard budget wins)."""
    return {*newest_step(session.messages), *current_request(session.messages)}


OVERSIZED_SHARE = 0.5
"""Most of the prompt budget one user message may take (eviction never takes a request); a
longer one is sent as a head and a tail around a pointer (:func:`_protected_fit`). Half the
budget leaves the other half for the newest step and the messages kept around it, so a pasted
log can never crowd everything else out (issue 19)."""

MIN_SHOWN_TOKENS = 128
"""Fewest tokens of a protected message shown around its pointer, however small the room."""

POINTER_NOTE = (
    "[veil: {omitted} tokens of this message are not shown here (too large for the context "
    'window); veil_hydrate("#{index}") returns the whole message]'
)
"""The pointer put in place of the middle of an oversized protected message."""

POINTER_NOTE_NO_TOOL = (
    "[veil: {omitted} tokens of this message are not shown here (too large for the context window)]"
)
""":data:`POINTER_NOTE` for a model not offered ``veil_hydrate`` (``veil.memory_tools``
blocked, the bundled model): the prompt never names a tool the model was not offered."""

HYDRATE_TOOL = "veil_hydrate"
"""The tool that follows a pointer (default plugin ``veil.memory_tools``)."""


NO_HYDRATE_NOTE = "(the model is not offered veil_hydrate, so it cannot load the rest)"
"""What a warning to the user says of a pointer the model cannot follow."""


def _can_hydrate(session: Session) -> bool:
    """Whether the session's model is offered :data:`HYDRATE_TOOL` (a pointer names it only
    then)."""
    return HYDRATE_TOOL in session.offered_tools


def pointer_text(session: Session, text: str, index: int, limit: int) -> str:
    """``text`` cut to about ``limit`` tokens (the session's tokenizer): its head (two thirds)
    and its tail (one third) around :data:`POINTER_NOTE` naming message ``#index``, which
    ``veil_hydrate`` resolves to the whole message (:func:`veil.core.context_ops.find_item`).
    The head keeps what a request usually starts with, the tail where a log usually ends with
    its error. Unchanged when it already fits."""
    tokens = session.count_text(text)
    if tokens <= limit:
        return text
    chars_per_token = len(text) / max(1, tokens)
    keep = max(16, limit - 40)  # the note costs ~40 tokens
    while True:
        head_chars = int(keep * 2 / 3 * chars_per_token)
        tail_chars = int(keep / 3 * chars_per_token)
        if head_chars + tail_chars >= len(text):  # nothing would be left out
            return text
        head = text[:head_chars]
        tail = text[len(text) - tail_chars :]
        shown = session.count_text(head) + session.count_text(tail)
        note = (POINTER_NOTE if _can_hydrate(session) else POINTER_NOTE_NO_TOOL).format(
            omitted=max(0, tokens - shown), index=index
        )
        out = f"{head}\n{note}\n{tail}"
        if session.count_text(out) <= limit or keep <= 16:
            return out
        keep = int(keep * 0.85)


def _pointered(
    session: Session, idx: int, message: Message, cap: int, *, report: bool = True
) -> Message:
    """``message`` (stored index ``idx``) with its content behind a pointer when it exceeds
    ``cap`` tokens. The cut text is kept on the session and reused while it still fits, so
    the prompt's prefix does not change from call to call; the first cut is reported (unless
    ``report`` is False: :func:`_squeeze` reports its cuts together, once)."""
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= cap:  # a token holds >= 1 character
        return message
    done: dict[int, tuple[int, str]] | None = getattr(session, "_pointers", None)
    if done is None:
        done = {}
        session._pointers = done  # type: ignore[attr-defined]
    if idx in done and done[idx][0] <= cap:
        return {**message, "content": done[idx][1]}
    cut = pointer_text(session, content, idx, cap)
    if cut is content:
        return message
    tokens = session.count_text(cut)
    if idx not in done and report:
        whole = session.count_text(content)
        session.emit(
            "warning",
            text=(
                f"message #{idx} ({message.get('role')}, {whole} tokens) is larger than the "
                f"context window allows; the model sees {tokens} tokens of it and a pointer "
                + (
                    f'(veil_hydrate("#{idx}") returns it whole)'
                    if _can_hydrate(session)
                    else NO_HYDRATE_NOTE
                )
            ),
        )
    done[idx] = (tokens, cut)
    return {**message, "content": cut}


def _stubbed(
    session: Session, budget: int | None = None, others: int | None = None
) -> tuple[list[int], list[Message]]:
    """``(indices, messages)`` from ``compact_size`` on, evicted contents replaced by their
    stubs; with ``budget`` (building a prompt), the last resort's cuts
    (:func:`squeezed_messages`) and oversized protected messages behind a pointer
    (:func:`_protected_fit`)."""
    stubs = session.stubs
    idxs = list(range(session.compact_size, len(session.messages)))
    msgs = [
        _with_stub(session.messages[i], stubs[i], i) if i in stubs else session.messages[i]
        for i in idxs
    ]
    squeezed = squeezed_messages(session) if budget is not None else {}
    if squeezed:
        # the last resort's cuts (:func:`_squeeze`) stay once made: the prefix stays put.
        # Only in the prompt: compaction and memory extraction (:func:`prompt_view`) read
        # these messages whole, as they did before the cut.
        for pos, i in enumerate(idxs):
            if i in stubs:  # evicted since: its stub is shorter than any cut
                continue
            if i in squeezed and squeezed[i] == 0:
                tokens = session.count_text(str(msgs[pos].get("content") or ""))
                pointer = BARE_POINTER if _can_hydrate(session) else BARE_POINTER_NO_TOOL
                bare = pointer.format(index=i, tokens=tokens)
                msgs[pos] = {**msgs[pos], "content": bare}
            elif i in squeezed:
                msgs[pos] = _pointered(session, i, msgs[pos], squeezed[i], report=False)
    if budget is not None:
        _protected_fit(session, idxs, msgs, budget, others)
    return idxs, msgs


def squeezed_messages(session: Session) -> dict[int, int]:
    """Stored index -> token cap of the messages the last resort put behind a pointer
    (:func:`_squeeze`; 0: the pointer alone, :data:`BARE_POINTER`); they stay cut from then on
    (until a compaction moves past them)."""
    squeezed: dict[int, int] | None = getattr(session, "_squeezed", None)
    if squeezed is None:
        squeezed = {}
        session._squeezed = squeezed  # type: ignore[attr-defined]
    return squeezed


def _protected_fit(
    session: Session,
    idxs: list[int],
    msgs: list[Message],
    budget: int,
    others: int | None = None,
) -> None:
    """Put oversized protected messages of ``msgs`` behind a pointer, in place (DESIGN.md
    "Protection vs budget": the hard budget wins; eviction may not take these).

    A user message longer than :data:`OVERSIZED_SHARE` x ``budget`` tokens is cut to that,
    whichever exchange it belongs to (eviction never takes a request, so a pasted log would
    otherwise crowd out everything else for the rest of the session, issue 19). The newest
    step's tool results are cut only when, with the current request and the newest assistant
    message, they would exceed ``budget``: they then share what is left equally (at least
    :data:`MIN_SHOWN_TOKENS` each). ``others``: the tokens of everything else that eviction
    could not move (:func:`_fit`'s last resort), used instead of those protected messages."""
    first = session.compact_size
    user_cap = max(MIN_SHOWN_TOKENS, int(budget * OVERSIZED_SHARE))
    for pos, message in enumerate(msgs):
        if message.get("role") == "user":
            msgs[pos] = _pointered(session, idxs[pos], message, user_cap)
    used = 0
    results = []
    for i in sorted(protected_indices(session)):
        if i < first:
            continue
        if msgs[i - first].get("role") == "tool":
            results.append(i)
        else:
            used += session.count_tokens([msgs[i - first]])
    if not results:
        return
    if others is not None:
        used = others
    sizes = [session.count_tokens([msgs[i - first]]) for i in results]
    if used + sum(sizes) <= budget:
        return
    share = max(MIN_SHOWN_TOKENS, (budget - used) // len(results))
    for i in results:
        msgs[i - first] = _pointered(session, i, msgs[i - first], share)


def pinned_requests(session: Session, cap: int | None = None) -> list[Message]:
    """The current exchange's user messages that a compaction moved before ``compact_size``:
    the core sends them right after the summary, verbatim (behind a pointer only when longer
    than ``cap`` tokens), so the request being worked on never depends on how a model
    summarised it (issue 19)."""
    out = []
    for i in current_request(session.messages):
        if i < session.compact_size:
            message = session.messages[i]
            out.append(_pointered(session, i, message, cap) if cap is not None else message)
    return out


def _with_stub(message: Message, stub: str, index: int | None = None) -> Message:
    """``message`` with its content replaced by ``stub`` (a pointer stub or an excerpt). An
    evicted assistant turn's item holds its tool calls' arguments too (the capture plugin's
    :func:`veil.default_plugins.capture.rules.assistant_text`), so those leave with it: each call
    keeps its id and name (its result stays paired) and its arguments become
    ``{"evicted": "<the handle>"}``, valid JSON for every provider (a pointer stub's own handle,
    its last word; ``#<index>`` for an excerpt)."""
    out = {**message, "content": stub}
    calls = message.get("tool_calls")
    if calls and message.get("role") == "assistant":
        plain = index is None or stub.startswith(("[evicted ", "[cold "))
        handle = stub.rstrip("]").rsplit(" ", 1)[-1] if plain else f"#{index}"
        marker = json.dumps({"evicted": handle})
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
    return repair_indexed(messages, [None] * len(messages))[0]


def repair_indexed(
    messages: list[Message], indices: list[int | None]
) -> tuple[list[Message], list[int | None]]:
    """:func:`repair_pairing` that carries ``indices`` (the stored index of each message) along:
    returns the repaired messages and the index of each (None for a result made up here)."""
    out: list[Message] = []
    out_idx: list[int | None] = []
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if msg.get("role") == "tool":
            continue  # orphan result: its call is not in what is sent
        out.append(msg)
        out_idx.append(indices[i - 1])
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        ids = [tc.get("id") for tc in calls]
        results: dict[str, tuple[Message, int | None]] = {}
        while i < n and messages[i].get("role") == "tool":
            tid = messages[i].get("tool_call_id")
            if tid in ids and tid not in results:
                results[tid] = (messages[i], indices[i])
            i += 1
        for tid in ids:
            found = results.get(tid)
            if found is None:
                found = (
                    {"role": "tool", "tool_call_id": tid, "content": "[no result: interrupted]"},
                    None,
                )
            out.append(found[0])
            out_idx.append(found[1])
    return out, out_idx


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


MAX_EVICTION_ROUNDS = 5


def _elided(session: Session, messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """``messages`` with repeated lines elided (:mod:`veil.core.prompt.elision`) when they exceed
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


def _masked(
    session: Session, budget: int | None = None, others: int | None = None
) -> tuple[list[int | None], list[Message]]:
    """Kept messages after the ``fit_prompt`` hook (observation masking), with the stored index
    of each (None for a result made up to repair pairing). Items whose tool result the masking
    hides leave the live set for the warm tier (reason ``masked``): what the model sees of them
    is the mask, so eviction must not count them again. ``budget``: see :func:`_stubbed`."""
    idxs, msgs = _stubbed(session, budget, others)
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
    (:func:`protected_indices`), whatever the policy chose: the model always sees its own last
    tool call and result (issue 19). An oversized one goes behind a pointer instead
    (:func:`_stubbed`)."""
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


@dataclass
class _Frozen:
    """What the last change moment sent of the kept messages: ``sources`` the contents of the
    view (masked, stubbed, collapsed) it was computed from, ``sent`` what went out for them
    (elided where elision applied)."""

    sources: list[Any]
    sent: list[Message]


def _view(
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
    (:func:`build_prompt`). ``indices``: the stored index of each message (None for a result
    made up to repair pairing); oversized protected messages are behind a pointer
    (:func:`_protected_fit`)."""
    idxs, whole = _masked(session, budget, others)
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
            saved = max(0, _message_tokens(session, whole) - sent_tokens)
            return whole, messages, saved, True, idxs
        # over the budget: a change moment (without an eviction policy, elision is all that
        # keeps the prompt in its budget, so it runs again over the new messages too)
    messages, saved = _elided(session, whole, budget)
    session._frozen_view = _Frozen([m.get("content") for m in whole], messages)
    # a session's first prompt in this process (new, or loaded again for an HTTP turn or veil
    # -c) that elision leaves as it is sends what the stored session sent before: no change
    # moment (the anchored note stays where it stood, issue 29)
    first = frozen is None and messages is whole
    return whole, messages, saved, first, idxs


def _fit(
    session: Session, budget: int, notes: list[str], *, page_in: bool
) -> tuple[list[Message], int, bool, bool, list[int | None]]:
    """Masking, elision and eviction rounds until the kept messages fit ``budget`` tokens (or
    the policy finds nothing more to move). Returns ``(messages, tokens elision saved, whether
    any item moved, whether this is a change moment, the stored index of each message)``;
    appends the policy's notes to
    ``notes``.

    The policy decides when a pass runs (veil_fsrs: once the prompt passes its pressure
    threshold, and then it frees room down to its low-water mark); between passes nothing
    moves and the messages sent before are sent again unchanged (:func:`_view`)."""
    full, messages, saved, reused, idxs = _view(session, budget)
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
        notes += moved.notes
        if not moved.moved:  # nothing left or came back: another round would change nothing
            break
        moved_any = True
        full, messages, saved, _, idxs = _view(session, budget)
        if _message_tokens(session, messages) <= budget:
            break
    return messages, saved, moved_any, moved_any or not reused, idxs


SQUEEZED_TOKENS = MIN_SHOWN_TOKENS
"""Tokens of an answered request (or other message eviction may not take) the last resort
leaves around its pointer (:func:`_squeeze`): enough for the head of what was asked and the
end of it, a few lines."""

BARE_POINTER = (
    "[veil: message #{index} ({tokens} tokens) is not shown here (the prompt is over its "
    'budget); veil_hydrate("#{index}") returns it]'
)
"""What stands for a message when even its head and tail do not fit (:func:`_squeeze`)."""

BARE_POINTER_NO_TOOL = (
    "[veil: message #{index} ({tokens} tokens) is not shown here (the prompt is over its budget)]"
)
""":data:`BARE_POINTER` for a model not offered ``veil_hydrate``."""

BARE_POINTER_TOKENS = 40
"""About what :data:`BARE_POINTER` costs in the prompt, with the message's framing."""

SQUEEZE_NOTE_TOKENS = 60
"""Tokens a pointer cut costs beyond its cap (the note and the message's framing), used to
estimate what putting one more message behind a pointer saves before measuring again."""


def _squeeze(
    session: Session, messages: list[Message], idxs: list[int | None], budget: int, hard: int
) -> tuple[list[Message], list[int | None]] | None:
    """The last resort when ``messages`` (stored indices ``idxs``; empty when unknown) still
    exceed ``budget`` tokens (the room under the compaction trigger) after eviction and full
    compaction, or with compaction refused or stopped (DESIGN.md "Protection vs budget": the
    hard budget wins; issue 19). ``hard``: what the messages may take of the context window
    (the window less the system prompt, summary, notes, tool schemas and completion reserve).

    First the newest step's results share the room left under ``budget``, behind pointers
    (:func:`_protected_fit`). Then, only while the messages exceed ``hard`` (the provider
    would refuse them): the user messages of exchanges already answered go behind pointers,
    oldest first; then any other message eviction could not move, oldest first; then the
    same two again with the pointer alone (:data:`BARE_POINTER`). The current exchange's
    user messages and the newest step are never cut here. A first cut leaves
    :data:`SQUEEZED_TOKENS` tokens (head and tail) around a pointer ``veil_hydrate("#N")``
    follows. Every cut stays from then on (:func:`squeezed_messages`), so the prompt changes
    only at the moments this runs (over the budget, when eviction runs too), never from call
    to call. The cuts are reported once per session (a warning).

    Returns ``(messages, indices)`` to send, or None when the messages already fit.

    When ``hard`` is not positive (the fixed parts alone fill the window) nothing is cut or
    raised: a warning says the settings are wrong.

    Raises:
        PromptTooLarge: even the current request and the newest step, with everything else
            cut, exceed ``hard`` (raised before any request is sent). Not with
            ``session.refuse_oversized_prompt`` off (replay, which sends nothing): the messages
            cut as far as they go are returned, over ``hard``.
    """
    total = _message_tokens(session, messages)
    if total <= min(budget, hard):
        return None
    changed = False
    if len(idxs) != len(messages):  # compacted just now: the view says what each one is
        _, messages, _, _, idxs = _view(session, budget)
        total, changed = _message_tokens(session, messages), True
    step = newest_step(session.messages)
    calls = (
        {tc.get("id") for tc in (session.messages[step[0]].get("tool_calls") or [])}
        if step
        else set()
    )
    results = [m for m in messages if _is_tool(m) and m.get("tool_call_id") in calls]
    if total > min(budget, hard) and results:
        # the hard budget can be the smaller (a note grew, a compaction's summary came in)
        share_of = min(budget, hard) if hard > 0 else budget
        others = total - _message_tokens(session, results)
        _, messages, _, _, idxs = _view(session, share_of, others)
        total, changed = _message_tokens(session, messages), True
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
            if i is None or i in protected or _is_user(message) != users:
                continue
            if i in squeezed and (squeezed[i] == 0 or not bare):
                continue
            content = message.get("content")
            size = _message_tokens(session, [message])
            if not isinstance(content, str) or size <= (cap or BARE_POINTER_TOKENS) + 8:
                continue
            squeezed[i] = cap
            if i not in cut:
                cut.append(i)
            total -= size - (cap + SQUEEZE_NOTE_TOKENS if cap else BARE_POINTER_TOKENS)
            if total <= budget:  # the estimate says it fits: measure
                _, messages, _, _, idxs = _view(session, budget)
                total = _message_tokens(session, messages)
        if cut:
            _, messages, _, _, idxs = _view(session, budget)
            total = _message_tokens(session, messages)
    if cut:
        _report_squeeze(session, cut)
    target = budget
    for _ in range(3):  # the results' shares are estimates: tighten them by what is left over
        now = [m for m in messages if _is_tool(m) and m.get("tool_call_id") in calls]
        if total <= budget or not now:
            break
        target -= total - budget + 8
        others = total - _message_tokens(session, now)
        _, messages, _, _, idxs = _view(session, target, others)
        total = _message_tokens(session, messages)
    if total > budget and session.refuse_oversized_prompt:
        raise PromptTooLarge(_too_large_text(session, messages, idxs, total, budget))
    return messages, idxs


def _report_fixed_overflow(session: Session, hard: int) -> None:
    """Warn, once per session, that the fixed parts of the prompt fill the context window."""
    if getattr(session, "_fixed_overflow_reported", False):
        return
    session._fixed_overflow_reported = True  # type: ignore[attr-defined]
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
    if getattr(session, "_squeeze_reported", False):
        return
    session._squeeze_reported = True  # type: ignore[attr-defined]
    users = [i for i in cut if _is_user(session.messages[i])]
    shown = ", ".join(f"#{i}" for i in cut[:8]) + (" ..." if len(cut) > 8 else "")
    session.emit(
        "warning",
        text=(
            f"the prompt was over its budget with nothing left to evict or compact: "
            f"{len(users)} answered request(s) and {len(cut) - len(users)} other message(s) "
            f"({shown}) are sent as a head, a tail and a pointer "
            + (
                '(veil_hydrate("#N") returns one whole)'
                if _can_hydrate(session)
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
        f"request ({_message_tokens(session, request)} tokens) with the newest step "
        f"({_message_tokens(session, kept) - _message_tokens(session, request)} tokens) "
        f"cannot be cut further. Nothing was sent. Use a model with a larger window "
        f"(models.main.contextWindow), lower models.main.options.max_tokens, offer fewer "
        f"tools, or start a new session (or /compact) with a shorter request"
    )


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
    with the main model's tokenizer (:func:`veil.core.models.tokens.count_message_tokens`: exact
    for OpenAI models, an over-estimate otherwise); 0 for none."""
    if not tools:
        return 0
    from veil.core.models.tokens import count_message_tokens

    model = session.veil.llm.model_for("main", session.model)
    name = getattr(model, "litellm_model", None) or getattr(model, "name", None)
    counted = getattr(model, "count_tool_tokens", None)
    if callable(counted):
        return int(counted(tools))
    return max(0, count_message_tokens([], name, tools=tools) - count_message_tokens([], name))


def fixed_prompt_tokens(session: Session, tools: list[dict[str, Any]] | None) -> tuple[int, int]:
    """What a prompt of ``session`` takes before any message: the tokens of the system message
    veil sends (the base prompt and every section, with any compaction summary) and of the tool
    schemas ``tools`` (:func:`tool_schema_tokens`), both with the main model's tokenizer.

    A front end that may lower the completion tokens it asks for (``veil proxy``) sets them from
    these: the window less both is what the conversation and the answer share."""
    system_msg, anchored, note = _split(system_sections(session))
    summary = (
        [{"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}]
        if session.compact_summary
        else []
    )
    parts = [system_msg, *summary, *(m for m in (anchored, note) if m is not None)]
    return _message_tokens(session, parts), tool_schema_tokens(session, tools)


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


ANCHOR_STATE_KEY = "noteAnchor"
"""Key of ``Session.state`` under which the anchored note's place and text are stored
(``{"index": int, "content": str}``), so that a session loaded again (each HTTP turn, ``veil
-c``) sends the previous turn's note where it stood: the prompt's prefix, and what the model was
told, stay as they were (issue 29)."""


def _anchor(session: Session) -> _Anchor | None:
    """The anchored note's place: the session's, else the one stored in its state."""
    anchor: _Anchor | None = session._note_anchor
    if anchor is None:
        stored = session.state.get(ANCHOR_STATE_KEY)
        if (
            isinstance(stored, dict)
            and isinstance(stored.get("index"), int)
            and not isinstance(stored.get("index"), bool)
            and stored["index"] >= 0
            and isinstance(stored.get("content"), str)
        ):
            anchor = _Anchor(stored["index"], {"role": "user", "content": stored["content"]})
            session._note_anchor = anchor
    return anchor


def _set_anchor(session: Session, anchor: _Anchor | None) -> None:
    """Keep ``anchor`` on the session and in its state (saved with it)."""
    session._note_anchor = anchor
    if anchor is None:
        session.state.pop(ANCHOR_STATE_KEY, None)
    else:
        content = anchor.message.get("content")
        session.state[ANCHOR_STATE_KEY] = {"index": anchor.index, "content": content}


def _place_anchored(
    session: Session, kept: list[Message], note: Message | None, changed: bool
) -> tuple[list[Message], Message | None]:
    """``kept`` with the anchored note in place, and the note sent. At a change moment (or
    the first time) the note is the current one, at the end; otherwise the note of the last
    change moment stays where it was, so everything up to the newest messages is unchanged
    (also in a session loaded again: :data:`ANCHOR_STATE_KEY`)."""
    if note is None:
        _set_anchor(session, None)
        return kept, None
    anchor = _anchor(session)
    if changed or anchor is None or anchor.index > len(kept):
        anchor = _Anchor(len(kept), note)
        _set_anchor(session, anchor)
    return [*kept[: anchor.index], anchor.message, *kept[anchor.index :]], anchor.message


def _notes_sent(session: Session, anchored: Message | None, note: Message | None) -> list[Message]:
    """The notes whose tokens the budget leaves room for: the trailing note, and the larger of
    the current anchored note and the one in place (either may be sent)."""
    out = [note] if note else []
    if anchored is None:
        return out
    anchor = _anchor(session)
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
    lossless elision of repeated lines (:mod:`veil.core.prompt.elision`); then eviction under pressure
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
    system_msg, anchored, note = _split(sections)
    extra = _notes_sent(session, anchored, note)
    # Eviction keeps the prompt under the full-compaction trigger (compaction.threshold x the
    # window): eviction is the first line, full compaction the fallback when it cannot keep up.
    # The provider counts the tool schemas and the completion inside the window too.
    trigger = settings.compaction.trigger(veil.context_layer_on) * window
    room = min(window - reserve_tokens - tools_tokens, trigger - tools_tokens)
    # the summary and the current request it holds verbatim are fixed parts of the prompt;
    # a pasted request larger than its share of the room is cut around a pointer first
    summary_msgs = _summary_part(session, max(MIN_SHOWN_TOKENS, int(room * OVERSIZED_SHARE)))
    fixed_tokens = _message_tokens(session, [system_msg, *summary_msgs, *extra])
    budget = max(256, int(room) - fixed_tokens)
    if settings.context.budget_tokens:
        budget = min(budget, settings.context.budget_tokens)

    messages, saved, moved_any, changed, idxs = _fit(session, budget, notes, page_in=True)
    room_left = budget  # what the kept messages may take once the notes are rebuilt
    if moved_any:
        # The manifest counts what is loaded: build the note again after the pass. When it
        # grew, the messages fit the smaller room left, without page-in.
        sections = system_sections(session)
        system_msg, anchored, note = _split(sections)
        extra = _notes_sent(session, anchored, note)
        grown = _message_tokens(session, [system_msg, *summary_msgs, *extra]) - fixed_tokens
        if grown > 0 and _message_tokens(session, messages) > budget - grown:
            messages, saved, _, _, idxs = _fit(
                session, max(1, budget - grown), notes, page_in=False
            )
        fixed_tokens += grown
        room_left = max(1, budget - max(0, grown))
    if saved:
        notes.append(f"elided repeated lines: {saved} tokens")

    total = fixed_tokens + _message_tokens(session, messages)
    if not compaction.just_compacted(session):  # plan_compaction decides when (the threshold)
        result = compaction.run_full(
            session,
            _unsqueezed(session, messages, idxs),
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
            summary_msgs = _summary_part(
                session, max(MIN_SHOWN_TOKENS, int(room * OVERSIZED_SHARE))
            )
    else:
        compaction.set_just_compacted(session, False)
    fixed_tokens = _message_tokens(session, [system_msg, *summary_msgs, *extra])
    hard = window - reserve_tokens - tools_tokens - fixed_tokens
    squeezed = _squeeze(session, messages, list(idxs), room_left, hard)
    if squeezed is not None:
        (messages, idxs), changed = squeezed, True

    known = list(idxs) if len(idxs) == len(messages) else [None] * len(messages)
    repaired, kept_idx = repair_indexed(messages, known)
    body, anchored_sent = _place_anchored(session, repaired, anchored, changed)
    if anchored_sent is not None:
        at = next(k for k, m in enumerate(body) if m is anchored_sent)
        kept_idx = [*kept_idx[:at], None, *kept_idx[at:]]
    final = [system_msg, *summary_msgs, *body, *([note] if note else [])]
    indices = [None] * (1 + len(summary_msgs)) + kept_idx + ([None] if note else [])
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
        indices=indices,
    )


def _unsqueezed(session: Session, messages: list[Message], idxs: list[int | None]) -> list[Message]:
    """``messages`` with the last resort's cuts (:func:`squeezed_messages`) undone: a
    compaction summarises, and memory extraction reads, what was said, not its pointer."""
    squeezed = squeezed_messages(session)
    if not squeezed or len(idxs) != len(messages):
        return messages
    return [
        {**m, "content": session.messages[i]["content"]}
        if i is not None and i in squeezed and i not in session.stubs
        else m
        for i, m in zip(idxs, messages, strict=True)
    ]


def _summary_part(session: Session, cap: int) -> list[Message]:
    """What stands for the compacted history: the summary message (none without a summary),
    then the current request's user messages the compaction moved before ``compact_size``
    (:func:`pinned_requests`, behind a pointer beyond ``cap`` tokens)."""
    out: list[Message] = []
    if session.compact_summary:
        out.append({"role": "system", "content": SUMMARY_PREFIX + session.compact_summary})
    return [*out, *pinned_requests(session, cap)]


def context_report(session: Session) -> dict[str, Any]:
    """Counts for front ends: live / warm / cold items, the tokens of the last prompt, and the
    items the prompt shows as an excerpt (``excerpts``: ``[{"id", "messageIndex", "lines",
    "of"}]``, lines shown of the item's lines, in message order)."""
    counts = session.veil.store.tier_counts(session.id)
    excerpts = sorted(
        (
            {
                "id": item.id,
                "messageIndex": item.message_index,
                "lines": len(item.excerpt),
                "of": item.content.count("\n") + 1,
            }
            for item in session.paged_out.values()
            if item.excerpt and item.message_index is not None
        ),
        key=lambda e: e["messageIndex"],
    )
    return {
        "tiers": counts,
        "lastPromptTokens": session.last_prompt_tokens,
        "excerpts": excerpts,
    }
