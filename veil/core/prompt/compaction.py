"""Running a compaction: what is folded, the ``summarise`` hook, the checks, the one write.

A compaction replaces the older part of a session's history by a summary: the session's
``compact_summary`` stands for ``messages[:compact_size]`` in every later prompt (seed 000). The
core owns the mechanism; plugins make the decisions (when, what, the summary text):

1. what is folded: the ``plan_compaction`` hook (firstresult; ``veil_compaction`` by default)
   is asked, with what the prompt holds of the history after the summary
   (:func:`veil.core.prompt.fit.prompt_view`: stubs stay stubs, collapsed steps stay out),
   whether automatic full compaction runs now and how many of those messages it folds
   (:func:`run_full`), and what one run of seed 000's defaultCompaction folds
   (:func:`run_default`: manual ``/compact`` and ``autoThreshold``); the core checks the answer
   (:func:`ask_plan`) and carries it back to the stored history
   (:func:`veil.core.prompt.compaction_cut.stored_cut`). Without an answer nothing is compacted
   automatically and a manual compaction is refused (:class:`~veil.core.errors.NotAvailable`);
2. ``before_compaction`` with exactly those messages (full compaction, when memory is enabled
   for the agent; seed 000 "Memory extraction during compaction"), before anything is written;
3. the ``summarise`` hook (firstresult; ``veil_compaction`` by default) for the text;
4. the refusal rules of issue 19: a summary made only of invisible characters, or one that would
   not make what is sent smaller, is refused (:class:`~veil.core.errors.CompactionRejected`) and
   nothing is written;
5. the write: ``compact_summary`` and ``compact_size`` together, in one ``save_state``;
6. the ``compaction`` event, and the count of consecutive failures that stops automatic
   compaction after ``compaction.maxConsecutiveFailures`` (Claude Code's auto-compact circuit
   breaker, 3 by default).
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from veil.core.errors import (
    CompactionDisabled,
    CompactionRejected,
    ConfigError,
    NotAvailable,
    PluginResultInvalid,
)
from veil.core.plugins import first_answer
from veil.core.prompt.compaction_cut import is_boundary, stored_cut
from veil.core.settings import DefaultCompaction
from veil.core.types import CompactionPlan, CompactResult, Message, Summary

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

STATE_KEY = "compaction"
"""Key of ``session.state`` under which the core keeps its compaction bookkeeping."""

FAILURES = "consecutiveFailures"
JUST_COMPACTED = "justCompacted"


# -- never twice in a row --------------------------------------------------------------------


def just_compacted(session: Session) -> bool:
    """Whether the prompt built last for ``session`` was compacted (full compaction, or a forced
    one after the provider refused a prompt as too long). The next prompt is then not compacted
    again, nor does ``autoThreshold`` run. Kept in ``session.state``, so it holds across a
    session loaded again (each HTTP turn loads the session afresh)."""
    return bool(session.state.get(STATE_KEY, {}).get(JUST_COMPACTED))


def set_just_compacted(session: Session, value: bool) -> None:
    """Set what :func:`just_compacted` answers (the core calls it when it builds a prompt)."""
    if value:
        session.state.setdefault(STATE_KEY, {})[JUST_COMPACTED] = True
        return
    state = session.state.get(STATE_KEY)
    if state is not None:
        state.pop(JUST_COMPACTED, None)
        if not state:
            del session.state[STATE_KEY]


# -- settings and measures -------------------------------------------------------------------


def default_compaction_settings(session: Session) -> DefaultCompaction:
    """The session's snapshot of agent.json's ``defaultCompaction`` (seed 000: snapshotted at
    creation; later edits of agent.json do not apply to the session).

    Raises:
        ConfigError: the snapshot holds a value out of range, naming the field.
    """
    raw = (getattr(session, "snapshot", None) or {}).get("defaultCompaction") or {}
    try:
        return DefaultCompaction.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"session {session.id}: snapshot defaultCompaction.{field}: {first['msg']}"
        ) from exc


def summary_messages(summary: str | None) -> list[Message]:
    """The system message the core sends for a summary (none when there is no summary)."""
    from veil.core.prompt.assemble import SUMMARY_PREFIX

    if not summary:
        return []
    return [{"role": "system", "content": SUMMARY_PREFIX + summary}]


def conversation_tokens(session: Session, summary: str | None, messages: list[Message]) -> int:
    """Tokens of the summary message plus ``messages`` (the session's tokenizer; no system
    prompt), used for the before / after figures of a compaction."""
    return int(session.count_tokens([*summary_messages(summary), *messages]))


def pinned_before(session: Session, size: int) -> list[Message]:
    """The current request's user messages before ``size``: what the core sends verbatim after
    the summary when ``compact_size`` is ``size`` (:func:`veil.core.prompt.assemble.pinned_requests`)."""
    from veil.core.prompt.assemble import current_request

    history = session.messages
    return [history[i] for i in current_request(history) if i < size]


# -- the refusal rules (issue 19) ------------------------------------------------------------

_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def visible(text: str) -> bool:
    """Whether ``text`` holds a character a reader sees: anything but separators (Unicode
    categories Z*: spaces, line and paragraph separators), other characters (C*: controls,
    format characters such as U+200B ZERO WIDTH SPACE or U+FEFF, unassigned, private use,
    surrogates) and combining marks standing alone (Mn, Me), and the Hangul fillers (U+115F,
    U+1160, U+3164, U+FFA0), which are letters that render blank. A summary that holds none
    is empty (issue 19)."""
    return any(
        unicodedata.category(ch)[0] not in "ZC"
        and unicodedata.category(ch) not in ("Mn", "Me")
        and ch not in _BLANK_LETTERS
        for ch in text
    )


def check_shrinks(tokens_before: int, tokens_after: int) -> None:
    """Refuse a compaction that does not make what is sent smaller (issue 19: a summary longer
    than what it replaces was applied, and a small window then compacted every turn).

    Args:
        tokens_before: tokens of the summary and messages sent before the compaction.
        tokens_after: the same once the new summary would stand in for the compacted part.

    Raises:
        CompactionRejected: ``tokens_after >= tokens_before``; nothing has been written.
    """
    if tokens_after >= tokens_before:
        raise CompactionRejected(
            f"the summary would not shrink the prompt ({tokens_before} -> {tokens_after} "
            "tokens); the conversation is left as it was"
        )


def commit(session: Session, summary: str, new_size: int) -> None:
    """Store ``summary`` and ``compact_size = new_size`` together (one ``save_state`` write, one
    SQLite transaction); on failure the session keeps its previous values in memory too."""
    old = (session.compact_summary, session.compact_size)
    session.compact_summary, session.compact_size = summary, new_size
    try:
        session.save_state()
    except BaseException:
        session.compact_summary, session.compact_size = old
        raise


# -- consecutive failures --------------------------------------------------------------------
# A compaction fails when the summariser raises (a provider error, an empty or invisible-only
# summary) or when its summary would not shrink the prompt. On a small window such a compaction
# repeats every turn without ever getting under the limit (issue 19), so after
# ``compaction.maxConsecutiveFailures`` failures in a row automatic compaction (full and
# ``autoThreshold``) stops for the session with one warning. A compaction that is applied,
# manual ``/compact`` included, resets the count. The count is kept in ``session.state`` and so
# survives a resumed session.


def failure_limit(session: Session) -> int:
    """``compaction.maxConsecutiveFailures`` in effect (3 by default)."""
    return int(session.config.settings.compaction.max_consecutive_failures)


def failure_count(session: Session) -> int:
    """Failed or refused compactions in a row so far (0 after one that was applied)."""
    return int(session.state.get(STATE_KEY, {}).get(FAILURES, 0))


def auto_stopped(session: Session) -> bool:
    """Whether automatic compaction (full and ``autoThreshold``) has stopped for ``session``:
    :func:`failure_count` reached :func:`failure_limit`."""
    return failure_count(session) >= failure_limit(session)


def record_failure(session: Session, what: str, reason: str) -> None:
    """Count a failure of ``what`` (e.g. ``"full compaction"``) and warn the user: the failure
    itself, and once the limit is reached, that automatic compaction stops."""
    state = session.state.setdefault(STATE_KEY, {})
    state[FAILURES] = failure_count(session) + 1
    session.emit("warning", text=f"{what} failed, context unchanged: {reason}")
    if state[FAILURES] == failure_limit(session):
        session.emit(
            "warning",
            text=(
                f"automatic compaction stopped after {state[FAILURES]} consecutive failures "
                "(compaction.maxConsecutiveFailures); the conversation is left as it is; "
                "run /compact to try again"
            ),
        )


def record_success(session: Session) -> None:
    """Reset the count after a compaction that was applied."""
    state = session.state.get(STATE_KEY)
    if state is not None:
        state.pop(FAILURES, None)
        if not state:
            del session.state[STATE_KEY]


# -- the plan --------------------------------------------------------------------------------

PlanKind = Literal["prompt", "refused", "manual", "auto"]
"""Why the core asks ``plan_compaction`` (:func:`veil.hookspecs.plan_compaction`)."""


def can_plan(session: Session) -> bool:
    """Whether a loaded plugin implements ``plan_compaction`` (without one nothing is
    compacted)."""
    return bool(session.veil.pm.hook.plan_compaction.get_hookimpls())


def not_planned() -> NotAvailable:
    """The refusal of a manual compaction when no plugin plans one."""
    return NotAvailable(
        "no loaded plugin answers plan_compaction, which decides what a compaction folds"
    )


def ask_plan(
    session: Session, messages: list[Message], kind: PlanKind, prompt_tokens: int | None = None
) -> int | None:
    """Ask ``plan_compaction`` how many of ``messages`` to fold, and check the answer.

    Args:
        session: the session.
        messages: what the prompt holds from ``compact_size`` on (the plan counts in it).
        kind: why it is asked (:data:`PlanKind`).
        prompt_tokens: for kind ``"prompt"``, the prompt's tokens with the tool schemas.

    Returns:
        The number of leading ``messages`` to fold (a boundary: no tool call is separated from
        its results), or None when no plugin answered.

    Raises:
        PluginResultInvalid: the answer is not a :class:`CompactionPlan` whose ``fold`` is an
            int in ``[0, len(messages)]`` at a boundary (naming the plugin).
        PluginHookFailed: the planner raised.
    """
    plugin, answer = first_answer(
        session.veil.pm,
        "plan_compaction",
        session=session,
        messages=messages,
        kind=kind,
        prompt_tokens=prompt_tokens,
    )
    if answer is None:
        return None
    expected = "a veil.CompactionPlan whose fold is a boundary in [0, len(messages)], or None"
    if not isinstance(answer, CompactionPlan):
        raise PluginResultInvalid(plugin, "plan_compaction", type(answer).__name__, expected)
    fold = answer.fold
    if isinstance(fold, bool) or not isinstance(fold, int):
        got = f"a CompactionPlan whose fold is {type(fold).__name__}"
        raise PluginResultInvalid(plugin, "plan_compaction", got, expected)
    if not 0 <= fold <= len(messages):
        got = f"fold={fold}, out of range for {len(messages)} messages"
        raise PluginResultInvalid(plugin, "plan_compaction", got, expected)
    if not is_boundary(messages, fold):
        got = f"fold={fold}, which separates a tool call from its results"
        raise PluginResultInvalid(plugin, "plan_compaction", got, expected)
    return fold


# -- the summary -----------------------------------------------------------------------------


def can_summarise(session: Session) -> bool:
    """Whether a loaded plugin implements ``summarise`` (without one nothing is compacted)."""
    return bool(session.veil.pm.hook.summarise.get_hookimpls())


def _summarise(
    session: Session,
    messages: list[Message],
    previous: str | None,
    instructions: list[str],
    mode: Literal["full", "default"],
) -> Summary:
    """Ask the ``summarise`` hook for the summary of ``messages`` and refuse an invisible one.

    Raises:
        NotAvailable: no plugin answered. CompactionRejected: the summary holds no visible
        character. PluginResultInvalid: the answer is not a :class:`Summary` with a ``str``
        text (naming the plugin). PluginHookFailed: the summariser raised.
    """
    plugin, answer = first_answer(
        session.veil.pm,
        "summarise",
        session=session,
        messages=list(messages),
        previous=previous,
        instructions=list(instructions),
        mode=mode,
    )
    if answer is None:
        raise NotAvailable(
            "no loaded plugin implements summarise, which writes a compaction's summary"
        )
    if not isinstance(answer, Summary) or not isinstance(answer.text, str):
        got = type(answer).__name__
        if isinstance(answer, Summary):
            got = f"a Summary whose text is {type(answer.text).__name__}"
        raise PluginResultInvalid(plugin, "summarise", got, "a veil.core.types.Summary or None")
    if not visible(answer.text):
        raise CompactionRejected(
            "the summary holds no visible character; the conversation is left as it was"
        )
    return answer


def extract_memories(session: Session, part: list[Message]) -> None:
    """Fire ``before_compaction`` with the messages about to be folded, when memory is enabled
    for the agent (seed 000: extraction is skipped when memory is disabled). An extractor's
    failure is reported, not raised: what it wrote stays, and the compaction goes on."""
    if not session.config.memory_enabled(session.agent):
        return
    try:
        session.veil.pm.hook.before_compaction(session=session, messages=list(part))
    except Exception as exc:  # noqa: BLE001 - extraction must not block compaction
        session.emit("warning", text=f"memory extraction before compaction failed: {exc}")


# -- automatic full compaction ---------------------------------------------------------------


def run_full(
    session: Session,
    messages: list[Message],
    indices: list[int | None] | None = None,
    *,
    kind: Literal["prompt", "refused"] = "refused",
    prompt_tokens: int | None = None,
) -> CompactResult | None:
    """Automatic full compaction (seed 000 "Context Compaction", step 2): fold the older part
    of what would be sent into the summary, as ``plan_compaction`` answers (``veil_compaction``:
    over ``compaction.threshold`` x the window, all but the newest
    ``compaction.keepRecentTurns`` steps).

    The build of every prompt (``kind="prompt"``, with ``prompt_tokens``) and a provider's
    "prompt too long" (``kind="refused"``) call it. It never raises: a failed or refused summary is reported as a ``warning`` event, counted
    (:func:`record_failure`), nothing is changed and None lets the turn go on; once
    :func:`auto_stopped`, it is not tried.

    Args:
        session: the session (``messages`` are its ``messages[compact_size:]`` as prepared by
            the core: masked, evicted content stubbed, collapsed steps left out, pairing
            repaired).
        messages: what the core would send after the system prompt and summary.
        indices: the stored index of each of ``messages`` (None for a tool result made up to
            repair pairing): a cut is carried back to the history through them (issue 19).
        kind: ``"prompt"`` (a prompt is being built) or ``"refused"`` (the provider refused
            one as too long), passed to ``plan_compaction``.
        prompt_tokens: for ``"prompt"``, the prompt's tokens with the tool schemas.

    Returns:
        ``CompactResult(messages=<kept tail>, compacted_count, new_size, summary, tokens_before,
        tokens_after)``; None when no plugin summarises, automatic compaction has stopped, no
        plugin plans one or the plan folds nothing (under the threshold; the recent steps are
        all there is), ``defaultCompaction.enabled`` is false (DESIGN.md "Decisions"), or the
        summary was refused or failed.
    """
    if not can_summarise(session) or auto_stopped(session):
        return None
    try:
        result = _run_full(session, messages, indices, kind, prompt_tokens)
    except Exception as exc:  # noqa: BLE001 - the turn must go on; nothing was changed
        record_failure(session, "full compaction", str(getattr(exc, "message", exc)))
        return None
    if result is not None:
        record_success(session)
    return result


def _run_full(
    session: Session,
    messages: list[Message],
    indices: list[int | None] | None,
    kind: Literal["prompt", "refused"],
    prompt_tokens: int | None,
) -> CompactResult | None:
    cut = ask_plan(session, messages, kind, prompt_tokens)
    if not cut or not default_compaction_settings(session).enabled:
        return None
    part, kept = messages[:cut], messages[cut:]
    old_summary, old_size = session.compact_summary, session.compact_size
    new_size = stored_cut(session.messages, old_size, messages, cut, indices)
    if new_size <= old_size:
        return None
    tokens_before = conversation_tokens(
        session, old_summary, [*pinned_before(session, old_size), *messages]
    )
    extract_memories(session, part)  # before the write: what it wrote stays either way
    summary = _summarise(session, part, old_summary, [], "full")
    tokens_after = conversation_tokens(
        session, summary.text, [*pinned_before(session, new_size), *kept]
    )
    check_shrinks(tokens_before, tokens_after)
    commit(session, summary.text, new_size)

    compacted = new_size - old_size
    session.emit(
        "compaction",
        text=(
            f"compacted {compacted} messages into a summary "
            f"({summary.calls} model call(s)): {tokens_before} -> {tokens_after} tokens"
        ),
        tokensBefore=tokens_before,
        tokensAfter=tokens_after,
        mode="full",
        compactedCount=compacted,
        newSize=new_size,
        summaryCalls=summary.calls,
    )
    return CompactResult(
        messages=list(kept),
        compacted_count=compacted,
        new_size=new_size,
        summary=summary.text,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
    )


# -- seed 000's defaultCompaction ------------------------------------------------------------


def run_default(
    session: Session, instructions: str | None = None, *, trigger: str = "manual"
) -> CompactResult:
    """One run of seed 000's defaultCompaction on ``session`` (manual ``/compact``, or
    ``autoThreshold`` with ``trigger="auto"``).

    It asks ``plan_compaction`` (kind ``trigger``) how many of the messages the prompt holds
    from ``compactSize`` on are folded (``veil_compaction``: until their characters reach
    ``compactionCount``% of the uncompacted context), asks ``summarise`` (mode ``"default"``) for
    the summary of them merged with the existing one, and stores it with the new
    ``compactSize``. A successful run resets the count of consecutive failures (a manual
    ``/compact`` that works starts automatic compaction again); the caller counts failures.

    Args:
        session: an open session.
        instructions: extra instructions for this run (``/compact TEXT``), passed after the
            agent's ``customInstructions``; both are redacted before they reach the summariser.
        trigger: ``"manual"`` or ``"auto"`` (``autoThreshold``), reported in the event.

    Returns:
        ``CompactResult(compacted_count, new_size, already_up_to_date, summary, tokens_before,
        tokens_after)`` (seed 000's ``compactedCount``, ``newSize``, ``alreadyUpToDate``).

    Raises:
        SessionClosed: the session is closed.
        CompactionDisabled: ``defaultCompaction.enabled`` is false in the session's snapshot.
        ConfigError: the snapshot holds a bad value.
        NotAvailable: no plugin implements ``summarise``, or none answers ``plan_compaction``.
        PluginResultInvalid: the plan is not a :class:`CompactionPlan` at a boundary.
        CompactionRejected: the summary would not shrink the prompt or holds no visible
            character (issue 19).
        ProviderError: or whatever else the summariser raises, as raised.

    In every case the session is unchanged.
    """
    from veil.core.prompt.fit import prompt_view

    session.ensure_open()
    settings = default_compaction_settings(session)
    if not settings.enabled:
        raise CompactionDisabled(f"defaultCompaction is disabled for agent {session.agent!r}")
    if not can_summarise(session):
        raise NotAvailable(
            "no loaded plugin implements summarise, which writes a compaction's summary"
        )
    history = session.messages
    start = min(session.compact_size, len(history))
    old_summary = session.compact_summary
    # what the prompt holds, not the raw history: an evicted result stays its stub (issue 19:
    # a 2 MB result long out of the prompt took 136 summariser calls to read again)
    indices, view = prompt_view(session) if start < len(history) else ([], [])
    if not view:
        return CompactResult(
            compacted_count=0, new_size=start, already_up_to_date=True, summary=old_summary
        )
    cut = ask_plan(session, view, "auto" if trigger == "auto" else "manual")
    if cut is None:
        raise not_planned()
    if cut == 0:
        return CompactResult(
            compacted_count=0, new_size=start, already_up_to_date=True, summary=old_summary
        )
    end = len(history) if cut >= len(view) or indices[cut] is None else int(indices[cut])
    part = view[:cut]
    # the instructions go to the model as they are: a key pasted in them (or in the agent's
    # customInstructions) is redacted like everything else that reaches it
    redact = session.veil.redactor.text
    extra = [redact(settings.custom_instructions or ""), redact(instructions or "")]
    tokens_before = conversation_tokens(
        session, old_summary, [*pinned_before(session, start), *view]
    )
    summary = _summarise(session, part, old_summary, extra, "default")
    tokens_after = conversation_tokens(
        session, summary.text, [*pinned_before(session, end), *view[cut:]]
    )
    check_shrinks(tokens_before, tokens_after)
    commit(session, summary.text, end)
    if failure_count(session):  # a manual /compact that worked starts automatic ones again
        record_success(session)
        session.save_state()
    session.emit(
        "compaction",
        text=(
            f"compacted {end - start} messages ({trigger} defaultCompaction, "
            f"{summary.calls} model call(s)): {tokens_before} -> {tokens_after} tokens"
        ),
        tokensBefore=tokens_before,
        tokensAfter=tokens_after,
        mode="default",
        trigger=trigger,
        compactedCount=end - start,
        newSize=end,
        summaryCalls=summary.calls,
    )
    return CompactResult(
        compacted_count=end - start,
        new_size=end,
        already_up_to_date=False,
        summary=summary.text,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
    )
