"""Assembling what one model call is sent, from parts that are already decided: the system
message (the base prompt and every plugin's sections, :func:`system_sections`), the summary part,
the kept messages from ``compact_size`` on with evicted contents replaced by stubs and oversized
messages behind pointers (:func:`stubbed_messages`), the context notes and the anchored note's
place (:func:`place_anchored_note`), and the pairing of tool calls and results
(:func:`repair_indexed`). Also what the budget is made of (:func:`completion_reserve`,
:func:`tool_schema_tokens`, :func:`fixed_prompt_tokens`).

Nothing here decides what leaves the prompt: fitting (:mod:`veil.core.prompt.fit`) and the last
resort (:mod:`veil.core.prompt.squeeze`) do, and :func:`veil.core.prompt.context.build_prompt`
runs them in order. What must stay put between prompts (pointer cuts, the anchored note) is kept
in the session's :class:`~veil.core.prompt.state.PromptState`.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import TYPE_CHECKING, Any

from veil.core.errors import PluginResultInvalid
from veil.core.plugins import checked_list, first_answer, results_by_plugin
from veil.core.prompt.state import NoteAnchor, prompt_state
from veil.core.types import ContextItem, Message, PromptSection

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


NEUTRAL_PROMPT = "The project is at {cwd}. Today is {date}."
"""The system message's opening text when nobody set one and no plugin answers
``base_prompt`` (default plugin ``veil.coding_tools`` blocked): facts the core knows,
no persona and no tool named (seed 000 specifies no wording)."""
SUMMARY_PREFIX = "Summary of the earlier part of this conversation (compacted):\n"
"""First line of the message that stands for the compacted part of the history (the
session's ``compact_summary`` follows it)."""
NOTE_PREFIX = "[veil context note, not from the user]\n"
"""First line of the context note (:func:`~veil.core.prompt.context.build_prompt`): the model
must not take it for the user's words."""


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


def opening_prompt(session: Session) -> tuple[str, PromptSection | None]:
    """The system message's first text and, when the project's own prompt is not approved by
    the user, the section quoting it (:mod:`veil.core.safety.prompt_trust`).

    Returns:
        ``(text, None)`` with the project's prompt when approved (or the prompt the user's
        client sent through ``veil proxy``, or the user's ``VEIL_LOOP__SYSTEM_PROMPT``, or
        the default when nobody sets one: :func:`default_prompt`);
        ``(default, section)`` when a project's prompt is not approved: the section (order
        1, stable) holds it quoted under a heading naming its file.

    Raises:
        PluginResultInvalid: a ``base_prompt`` answer is not a str.
        PluginHookFailed: a ``base_prompt`` implementation raised.
    """
    from veil.core.safety.prompt_trust import (
        project_prompt,
        project_prompt_approved,
        quoted_project_prompt,
    )

    found = project_prompt(session.config, session.agent, session.snapshot)
    if found is None:
        own = session.snapshot.get("systemPrompt") or session.config.settings.loop.system_prompt
        return own or default_prompt(session), None
    text, origin = found
    if project_prompt_approved(session.config.project_dir, text):
        return text, None
    quoted = quoted_project_prompt(text, origin)
    return default_prompt(session), PromptSection("project-prompt", quoted, order=1)


def default_prompt(session: Session) -> str:
    """The system message's opening text when nobody set one: the ``base_prompt``
    answer (default plugin ``veil.coding_tools``: veil's coding persona), else
    :data:`NEUTRAL_PROMPT`. ``{cwd}`` and ``{date}`` are still to be replaced.

    Raises:
        PluginResultInvalid: the answer is not a str.
        PluginHookFailed: an implementation raised.
    """
    pm = session.veil.pm
    if not pm.hook.base_prompt.get_hookimpls():
        return NEUTRAL_PROMPT
    plugin, answer = first_answer(pm, "base_prompt", session=session)
    if answer is None:
        return NEUTRAL_PROMPT
    if not isinstance(answer, str):
        raise PluginResultInvalid(plugin, "base_prompt", type(answer).__name__, "a str or None")
    return answer


def system_sections(session: Session) -> list[PromptSection]:
    """The base prompt plus every plugin's ``system_prompt_sections``, sorted by ``order``
    (stable and volatile ones; :func:`~veil.core.prompt.context.build_prompt` puts the volatile
    ones in the context note).

    Raises:
        PluginResultInvalid: an implementation returned something other than a
            :class:`~veil.core.types.PromptSection`, a list of them or None (naming it).
        PluginHookFailed: an implementation raised.
    """
    base, unapproved = opening_prompt(session)
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


def _note_message(volatile: list[PromptSection]) -> Message | None:
    if not volatile:
        return None
    return {
        "role": "user",
        "content": NOTE_PREFIX + "\n\n".join(s.text for s in volatile),
    }


def split_sections(sections: list[PromptSection]) -> tuple[Message, Message | None, Message | None]:
    """The system message (stable sections), the anchored note (volatile, anchored sections:
    the manifest's counts) and the trailing note (the other volatile ones); a note is None
    when it has no section."""
    system: Message = {
        "role": "system",
        "content": "\n\n".join(s.text for s in sections if not s.volatile),
    }
    anchored = _note_message([s for s in sections if s.volatile and s.anchored])
    return system, anchored, _note_message([s for s in sections if s.volatile and not s.anchored])


ANCHOR_STATE_KEY = "noteAnchor"
"""Key of ``Session.state`` under which the anchored note's place and text are stored
(``{"index": int, "content": str}``), so that a session loaded again (each HTTP turn, ``veil
-c``) sends the previous turn's note where it stood: the prompt's prefix, and what the model was
told, stay as they were (issue 29)."""


def _anchor(session: Session) -> NoteAnchor | None:
    """The anchored note's place: the session's, else the one stored in its state."""
    state = prompt_state(session)
    anchor = state.anchor
    if anchor is None:
        stored = session.state.get(ANCHOR_STATE_KEY)
        if (
            isinstance(stored, dict)
            and isinstance(stored.get("index"), int)
            and not isinstance(stored.get("index"), bool)
            and stored["index"] >= 0
            and isinstance(stored.get("content"), str)
        ):
            anchor = NoteAnchor(stored["index"], {"role": "user", "content": stored["content"]})
            state.anchor = anchor
    return anchor


def _set_anchor(session: Session, anchor: NoteAnchor | None) -> None:
    """Keep ``anchor`` on the session and in its state (saved with it)."""
    prompt_state(session).anchor = anchor
    if anchor is None:
        session.state.pop(ANCHOR_STATE_KEY, None)
    else:
        content = anchor.message.get("content")
        session.state[ANCHOR_STATE_KEY] = {"index": anchor.index, "content": content}


def place_anchored_note(
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
        anchor = NoteAnchor(len(kept), note)
        _set_anchor(session, anchor)
    return [*kept[: anchor.index], anchor.message, *kept[anchor.index :]], anchor.message


def notes_sent(session: Session, anchored: Message | None, note: Message | None) -> list[Message]:
    """The notes whose tokens the budget leaves room for: the trailing note, and the larger of
    the current anchored note and the one in place (either may be sent)."""
    out = [note] if note else []
    if anchored is None:
        return out
    anchor = _anchor(session)
    if anchor is not None and message_tokens(session, [anchor.message]) > message_tokens(
        session, [anchored]
    ):
        return [anchor.message, *out]
    return [anchored, *out]


def summary_part(session: Session, cap: int) -> list[Message]:
    """What stands for the compacted history: the summary message (none without a summary),
    then the current request's user messages the compaction moved before ``compact_size``
    (:func:`pinned_requests`, behind a pointer beyond ``cap`` tokens)."""
    out: list[Message] = []
    if session.compact_summary:
        out.append({"role": "system", "content": SUMMARY_PREFIX + session.compact_summary})
    return [*out, *pinned_requests(session, cap)]


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


def kept_messages(session: Session) -> list[Message]:
    """Messages from ``compact_size`` on, with evicted items' content replaced by stubs.

    A tool message whose result item was evicted keeps its ``tool_call_id`` (the call and its
    result stay paired); only its content becomes the pointer stub.
    """
    return repair_pairing(stubbed_messages(session)[1])


def current_request(messages: list[Message]) -> list[int]:
    """Indices of the user messages of the exchange still in progress (DESIGN.md "Turn and
    step": a user message starts a new exchange): the last run of consecutive user messages of
    ``messages``, unless a final answer (an assistant message without tool calls) came after
    it; empty otherwise. These are kept verbatim through every compaction (issue 19). Once
    answered, the exchange is history like any other: seed 000's "messages before compactSize
    are never sent again" holds between turns."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if is_user(messages[i])), None)
    if last is None:
        return []
    if any(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages[last + 1 :]):
        return []
    first = last
    while first > 0 and is_user(messages[first - 1]):
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


def is_user(message: Message) -> bool:
    """Whether ``message`` is a user message (role ``user``; context notes included)."""
    return message.get("role") == "user"


def is_tool(message: Message) -> bool:
    """Whether ``message`` is a tool result (role ``tool``)."""
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
BARE_POINTER = (
    "[veil: message #{index} ({tokens} tokens) is not shown here (the prompt is over its "
    'budget); veil_hydrate("#{index}") returns it]'
)
"""What stands for a message when even its head and tail do not fit
(:func:`~veil.core.prompt.squeeze.squeeze`)."""
BARE_POINTER_NO_TOOL = (
    "[veil: message #{index} ({tokens} tokens) is not shown here (the prompt is over its budget)]"
)
""":data:`BARE_POINTER` for a model not offered ``veil_hydrate``."""


def can_hydrate(session: Session) -> bool:
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
        note = (POINTER_NOTE if can_hydrate(session) else POINTER_NOTE_NO_TOOL).format(
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
    ``report`` is False: :func:`~veil.core.prompt.squeeze.squeeze` reports its cuts together,
    once)."""
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= cap:  # a token holds >= 1 character
        return message
    done = prompt_state(session).pointers
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
                    if can_hydrate(session)
                    else NO_HYDRATE_NOTE
                )
            ),
        )
    done[idx] = (tokens, cut)
    return {**message, "content": cut}


def stubbed_messages(
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
        # the last resort's cuts (veil.core.prompt.squeeze) stay once made: the prefix stays
        # put. Only in the prompt: compaction and memory extraction (fit.prompt_view) read
        # these messages whole, as they did before the cut.
        for pos, i in enumerate(idxs):
            if i in stubs:  # evicted since: its stub is shorter than any cut
                continue
            if i in squeezed and squeezed[i] == 0:
                tokens = session.count_text(str(msgs[pos].get("content") or ""))
                pointer = BARE_POINTER if can_hydrate(session) else BARE_POINTER_NO_TOOL
                bare = pointer.format(index=i, tokens=tokens)
                msgs[pos] = {**msgs[pos], "content": bare}
            elif i in squeezed:
                msgs[pos] = _pointered(session, i, msgs[pos], squeezed[i], report=False)
    if budget is not None:
        _protected_fit(session, idxs, msgs, budget, others)
    return idxs, msgs


def squeezed_messages(session: Session) -> dict[int, int]:
    """Stored index -> token cap of the messages the last resort put behind a pointer
    (:func:`~veil.core.prompt.squeeze.squeeze`; 0: the pointer alone, :data:`BARE_POINTER`);
    they stay cut from then on (until a compaction moves past them)."""
    return prompt_state(session).squeezed


def unsqueezed(session: Session, messages: list[Message], idxs: list[int | None]) -> list[Message]:
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
    could not move (the last resort, :func:`~veil.core.prompt.squeeze.squeeze`), used instead
    of those protected messages."""
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


def message_tokens(session: Session, messages: list[Message]) -> int:
    """Prompt tokens of ``messages`` with the session's tokenizer and framing
    (``session.count_tokens``)."""
    return session.count_tokens(messages)


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
    system_msg, anchored, note = split_sections(system_sections(session))
    summary = (
        [{"role": "system", "content": SUMMARY_PREFIX + session.compact_summary}]
        if session.compact_summary
        else []
    )
    parts = [system_msg, *summary, *(m for m in (anchored, note) if m is not None)]
    return message_tokens(session, parts), tool_schema_tokens(session, tools)


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
