"""The agent loop: one user message in, model calls and tool calls until a final answer.

What happens (DESIGN.md "One turn, as data flows"); every message is recorded through the turn
driver, :mod:`veil.core.turn`, the only caller of ``capture``, ``after_iteration`` and
``turn_end``:
1. user message -> :func:`~veil.core.turn.record_user` (``capture`` phase ``user``; task tags).
2. before every model call -> :func:`veil.core.prompt.context.build_prompt` (``score``, ``evict``,
   ``compact`` masking / full, ``system_prompt_sections``), fitted into the window less the
   tool schemas offered and the completion reserve.
3. the reply -> :func:`~veil.core.turn.record_assistant` (``capture`` ``assistant``); each tool
   call -> :func:`~veil.core.turn.record_tool_call` (``capture`` ``tool_call``) -> authorize and
   run -> :func:`~veil.core.turn.record_tool_result` (``capture`` ``tool_result``) -> ``render``.
4. after each tool batch -> :func:`~veil.core.turn.end_iteration` (``after_iteration``:
   autoThreshold, pressure); a halt requested by a plugin (convergence) stops the run here.
5. turn end -> :func:`~veil.core.turn.end_turn` (``turn_end``), once the state is saved;
   everything is already persisted message by message.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veil.core import turn
from veil.core.errors import BadRequest, NotAvailable, PluginHookFailed
from veil.core.jsonio import MAX_DEPTH, loads
from veil.core.models.llm import ContextWindowExceededError
from veil.core.prompt.context import Prompt, build_prompt
from veil.core.safety.permissions import authorize
from veil.core.safety.processes import shutting_down
from veil.core.text import clean_message, clean_text
from veil.core.types import Message, ToolContext, ToolResult

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session


@dataclass
class TurnResult:
    """What one user message produced.

    Attributes:
        status: ``"done"`` (final answer), ``"halted"`` (a plugin stopped the run, see
            ``reason``), ``"interrupted"`` (Ctrl-C, or veil shutting down while tools ran) or
            ``"max_iterations"``.
        final: the final assistant text ('' when there is none).
        reason: why the run stopped when not ``done``.
        iterations: model calls made.
        usage: summed ``prompt_tokens`` / ``completion_tokens`` reported for this turn.
        usage_estimated: True when veil counted some of ``usage`` because the provider
            reported none (:func:`veil.core.models.llm.counted_usage`).
        seconds: wall time.
    """

    status: str
    final: str = ""
    reason: str | None = None
    iterations: int = 0
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    usage_estimated: bool = False
    seconds: float = 0.0


def run_turn(
    session: Session,
    text: str,
    *,
    max_iterations: int | None = None,
    stream: bool = True,
) -> TurnResult:
    """Answer ``text`` in ``session``.

    Args:
        session: an open session.
        text: the user's message.
        max_iterations: model calls allowed (default settings ``loop.maxIterations``).
        stream: stream tokens to front ends (``token`` render events).

    Returns:
        A :class:`TurnResult`. Ctrl-C (KeyboardInterrupt) ends the turn with status
        ``interrupted``; the session stays consistent (every tool call keeps a result).

    Raises:
        SessionClosed: the session is closed. ProviderError: every provider failed.
        SessionBusy: another process or request is changing the session. SessionConflict:
        another process changed it since this copy was loaded. These three are raised before
        anything of the turn is stored. PluginHookFailed: a plugin's hook raised; the turn
        stopped there, what it stored stays (tool calls left without a result get one saying
        the turn stopped), and ``turn_end`` is not called.
    """
    with session.veil.session_locks.hold(session.id, "a turn"):
        session.ensure_current()
        session.ensure_open()
        return _run_turn_held(session, clean_text(text), max_iterations, stream)


def _run_turn_held(
    session: Session, text: str, max_iterations: int | None, stream: bool
) -> TurnResult:
    """:func:`run_turn` once the session's lock is held and its copy checked."""
    veil = session.veil
    started = time.monotonic()
    limit = max_iterations or session.config.settings.loop.max_iterations
    result = TurnResult(status="done")
    model = veil.llm.model_for("main", session.model)
    # the notice is the offline default's (nothing configured): shown when a local model a
    # plugin registered answers, never keyed on a provider's name
    if (
        veil.llm.notice
        and _local_model(veil, model) is not None
        and not getattr(veil.llm, "notice_shown", False)
    ):
        veil.llm.notice_shown = True  # once per process: front ends may have shown it already
        session.emit("info", text=veil.llm.notice)

    # stored first: the title, the task tags and the capture read the message as stored,
    # with any credential the user pasted redacted (Session.append)
    idx = turn.record_user(session, text)
    if session.title is None:
        session.title = " ".join(session.messages[idx]["content"].split())[:80]
        veil.store.update_session(session.id, title=session.title)

    pending_calls: list[str] = []
    answering: list[str] | None = None  # the text streamed by the model call in progress
    try:
        for iteration in range(1, limit + 1):
            session.step += 1
            result.iterations = iteration
            tools = offered_tools(veil, model)
            prompt = build_prompt(session, tools=tools)
            session.last_prompt_tokens = prompt.tokens
            for note in prompt.notes:
                session.emit("info", text=note)
            call_started = time.monotonic()
            answering = []
            on_token = _streamer(session, answering) if stream else None
            _emit_model_call(session, model, prompt.tokens)
            try:
                completion = model.complete(prompt.messages, tools=tools or None, on_token=on_token)
            except ContextWindowExceededError as refused:
                # the provider's window is smaller than veil's figure (or its count larger):
                # fit the prompt into the window the refusal implies, and ask once more
                prompt = refit_after_refusal(session, prompt, refused, tools)
                session.last_prompt_tokens = prompt.tokens
                _emit_model_call(session, model, prompt.tokens)
                try:
                    completion = model.complete(
                        prompt.messages, tools=tools or None, on_token=on_token
                    )
                except ContextWindowExceededError as again:
                    _learn_from(session, prompt, again)  # the next call starts smaller still
                    raise
            usage = dict(completion.usage or {})
            session.emit(
                "usage",
                model=completion.model,
                promptTokens=int(usage.get("prompt_tokens") or 0),
                completionTokens=int(usage.get("completion_tokens") or 0),
                cachedTokens=usage.get("cached_tokens"),
                estimated=bool(getattr(completion, "usage_estimated", False)),
                contextWindow=session.context_window,
            )
            for key in ("prompt_tokens", "completion_tokens"):
                result.usage[key] += int(usage.get(key) or 0)
            if getattr(completion, "usage_estimated", False):
                result.usage_estimated = True
                usage["estimated"] = True  # kept with the message: these figures are veil's
            veil.store.record_usage(
                session.id,
                {
                    "role": "main",
                    "model": completion.model,
                    "provider": completion.provider,
                    **usage,
                    "seconds": time.monotonic() - call_started,
                },
            )
            reply = _clean_assistant(completion.message)
            pending_calls = [tc["id"] for tc in reply.get("tool_calls") or []]
            answering = None
            idx = turn.record_assistant(session, reply, usage=usage)
            stored = session.messages[idx]  # redacted: what is captured, shown and sent again
            session.emit(
                "assistant", text=stored.get("content") or "", toolCalls=len(pending_calls)
            )

            if not pending_calls:
                result.final = stored.get("content") or ""
                break
            # each call runs with the arguments the model sent; the redacted copy is captured
            for call, shown in zip(reply["tool_calls"], stored["tool_calls"], strict=True):
                _run_tool_call(session, stored, call, shown)
                pending_calls.remove(call["id"])

            turn.end_iteration(session, iteration)
            reason = session.take_halt()
            if reason:
                result.status, result.reason = "halted", reason
                break
            if shutting_down():  # the server or process is ending: its commands were killed
                result.status, result.reason = "interrupted", "veil is shutting down"
                break
        else:
            result.status = "max_iterations"
            result.reason = f"stopped after {limit} model calls (loop.maxIterations)"
    except KeyboardInterrupt:
        for call_id in pending_calls:  # keep every call paired with a result
            session.append(
                {"role": "tool", "tool_call_id": call_id, "content": "[interrupted by the user]"}
            )
        if answering:  # stopped while the answer streamed: what the user saw is kept
            partial = clean_text("".join(answering)) + INTERRUPTED_NOTE
            idx = turn.record_assistant(session, {"role": "assistant", "content": partial})
            result.final = session.messages[idx].get("content") or ""
        result.status, result.reason = "interrupted", "interrupted by the user (Ctrl-C)"
    except PluginHookFailed as exc:
        # the turn stops here; what is stored stays, and every call of the last batch keeps a
        # result so the history can be sent again
        _answer_unanswered_calls(session, f"[not run: the turn stopped: {exc.message}]")
        raise
    finally:
        session.save_state()
    turn.end_turn(session)
    result.seconds = time.monotonic() - started
    return result


def _answer_unanswered_calls(session: Session, text: str) -> None:
    """Give each tool call of the newest assistant message that has no result yet a tool
    result saying ``text`` (stored as is, without capture: a hook has just failed)."""
    messages = session.messages
    start = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if start is None:
        return
    answered = {m.get("tool_call_id") for m in messages[start + 1 :] if m.get("role") == "tool"}
    for call in messages[start].get("tool_calls") or []:
        if call.get("id") not in answered:
            session.append({"role": "tool", "tool_call_id": call.get("id"), "content": text})


INTERRUPTED_NOTE = "\n\n[interrupted by the user]"
"""Appended to the text of an answer the user stopped while it streamed: the text is stored as
the assistant's message (shown on resume, sent again), and the model learns it was cut."""


def _streamer(session: Session, pieces: list[str]) -> Any:
    """``on_token`` of a streamed call: each piece is shown (a ``token`` event) and kept in
    ``pieces``, so an answer stopped half-way keeps what was streamed."""

    def on_token(piece: str) -> None:
        pieces.append(piece)
        session.emit("token", text=piece)

    return on_token


def _emit_model_call(session: Session, model: Any, prompt_tokens: int) -> None:
    """Say that a model call starts (front ends show a spinner until its first token)."""
    session.emit(
        "model_call",
        model=model.name,
        promptTokens=prompt_tokens,
        contextWindow=session.context_window,
    )


def _local_model(veil: Any, model: Any) -> Any:
    """The :class:`~veil.core.models.llm.LocalModel` ``model`` was loaded from, or None (a
    provider's model, or an ``llm`` that registers none)."""
    local_model_of = getattr(veil.llm, "local_model_of", None)
    return local_model_of(model) if callable(local_model_of) else None


def offered_tool_names(veil: Any, model: Any) -> list[str]:
    """Names of the tools offered to ``model``, in the order their schemas are sent: all
    registered tools, except for a local model that declares the few it can use
    (:attr:`LocalModel.tools <veil.core.models.llm.LocalModel>`, in its order: veil_bundled's
    135M model takes six, as each schema costs it prompt time at ~50 tokens/s). What the prompt
    tells the model to call is drawn from these (the manifest's guide, pointer notes: a tool the
    model is not offered is never named)."""
    local = _local_model(veil, model)
    declared = getattr(local, "tools", None)
    if declared is not None:
        return [n for n in declared if n in veil.tools]
    return list(veil.tools)


def offered_tools(veil: Any, model: Any) -> list[dict[str, Any]]:
    """The tool schemas sent to ``model`` (:func:`offered_tool_names`)."""
    return [veil.tools[n].schema() for n in offered_tool_names(veil, model)]


def _learn_from(session: Session, prompt: Prompt, refused: ContextWindowExceededError) -> int:
    """Have ``session`` learn the window ``refused`` implies for ``prompt``
    (:meth:`veil.core.session.Session.learn_context_window`); returns the window in effect."""
    return session.learn_context_window(
        refused.figures, prompt.tokens, prompt.tools_tokens, prompt.reserve_tokens
    )


def refit_after_refusal(
    session: Session,
    prompt: Prompt,
    refused: ContextWindowExceededError,
    tools: list[dict[str, Any]] | None,
) -> Prompt:
    """The prompt to send again after the provider refused ``prompt`` as too long (issue 29).

    The session learns the window the refusal implies (its stated limit, else a fifth less
    room for the messages: :func:`veil.core.models.context_refusal.learned_window`) and keeps
    it. Without the context layer (seed 000's defaults) what the prompt holds is compacted
    first, as Claude Code compacts on "prompt is too long"; the prompt is then built for the
    new window, which evicts, compacts or, as the last resort, cuts old messages behind
    pointers as any prompt over its budget (:func:`veil.core.prompt.context.build_prompt`).
    When that is no smaller, a full compaction is forced and the prompt built once more.

    Args:
        session: the session whose prompt was refused.
        prompt: the refused prompt (its tokens, tool schema tokens and completion reserve).
        refused: the provider's refusal.
        tools: the tool schemas offered with the prompt.

    Returns:
        The smaller prompt; tool calls and results stay paired in it.

    Raises:
        ContextWindowExceededError: ``refused`` itself, when nothing made the prompt smaller.
        PromptTooLarge: even the current request and the newest step exceed the learned window.
    """
    _learn_from(session, prompt, refused)
    compacted = not session.veil.context_layer_on and _force_compaction(session)
    rebuilt = build_prompt(session, tools=tools)
    if rebuilt.tokens >= prompt.tokens and not compacted and _force_compaction(session):
        rebuilt = build_prompt(session, tools=tools)
    if rebuilt.tokens >= prompt.tokens:
        raise refused
    return rebuilt


def _force_compaction(session: Session) -> bool:
    """Run full compaction now (the provider refused the prompt as too long); True if it ran.

    It summarises what the prompt holds (:func:`veil.core.prompt.fit.prompt_view`: stubs stay
    stubs, collapsed steps stay out), with the stored index of each message so the cut lands
    where it was chosen in the history."""
    from veil.core.prompt.compaction import run_full, set_just_compacted
    from veil.core.prompt.fit import prompt_view

    set_just_compacted(session, False)
    indices, messages = prompt_view(session)
    result = run_full(session, messages, list(indices), kind="refused")
    ran = result is not None and result.messages is not None
    if ran:
        set_just_compacted(session, True)  # the prompt rebuilt next is not compacted again
    return ran


def _clean_assistant(message: Message) -> Message:
    """Keep only the OpenAI fields of an assistant message; give every tool call an id; replace
    lone surrogates (a provider's ``"\\ud800"``) in its text with U+FFFD, so the reply can be
    stored and shown (:func:`veil.core.text.clean_text`)."""
    message = clean_message(message)
    out: Message = {"role": "assistant", "content": message.get("content")}
    calls = []
    for n, tc in enumerate(message.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {})
        calls.append(
            {
                "id": tc.get("id") or f"call_{int(time.time() * 1000)}_{n}",
                "type": "function",
                "function": {"name": fn.get("name", ""), "arguments": args},
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _parse_arguments(name: str, raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A tool call's arguments as a dict, or None and why they are not a JSON object."""
    try:
        arguments = loads(raw or "{}", max_depth=MAX_DEPTH)
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as exc:
        return None, f"{name}: invalid JSON arguments: {exc}"
    return arguments, None


def _run_tool_call(
    session: Session, reply: Message, call: dict[str, Any], shown: dict[str, Any] | None = None
) -> None:
    """Run one tool call with capture on the way in and out; append its result message.

    The call runs only when :func:`veil.core.safety.permissions.authorize` allows it (asking the
    front end where the rules say so); a refused call gets a tool result saying why.

    ``call`` is the call as the model sent it (the tool runs with its arguments); ``shown``
    the same call as stored, credentials redacted (``reply`` is the stored assistant message):
    capture and front ends see only that one."""
    veil = session.veil
    name = call["function"]["name"]
    call_id = call["id"]
    arguments, problem = _parse_arguments(name, call["function"].get("arguments"))
    if problem is not None:
        outcome = ToolResult(problem, is_error=True)
    shown_arguments = arguments
    if shown is not None and shown is not call:
        shown_arguments = _parse_arguments(name, shown["function"].get("arguments"))[0]
    turn.record_tool_call(session, reply, name, call_id, shown_arguments)
    session.emit("tool_call", name=name, arguments=shown_arguments, toolCallId=call_id)
    if arguments is not None:
        tool = veil.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(veil.tools))
            outcome = ToolResult(f"unknown tool {name!r}; available: {known}", is_error=True)
        elif not (decision := authorize(session, name, arguments, call_id)).allowed:
            # answered like any other result, so the call keeps its result and the model
            # learns why (and what would allow it)
            outcome = ToolResult(
                decision.tool_result_text(),
                is_error=True,
                meta={"permission": "denied", "rule": decision.rule},
            )
        else:
            try:
                out = tool.handler(ToolContext(session=session, tool_call_id=call_id), arguments)
                outcome = out if isinstance(out, ToolResult) else ToolResult(str(out))
            except PluginHookFailed:
                raise  # a hook the tool called failed: the turn stops (never a skipped hook)
            except (BadRequest, NotAvailable) as exc:  # the caller's input, or a capability off
                outcome = ToolResult(f"{name}: {exc.message}", is_error=True)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - a tool bug must not kill the session
                outcome = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
    idx, outcome = turn.record_tool_result(session, name, call_id, outcome, shown_arguments)
    session.emit(
        "tool_result",
        name=name,
        toolCallId=call_id,
        content=outcome.content,
        isError=outcome.is_error,
        outcome=outcome.outcome,
        messageIndex=idx,
        denied=outcome.meta.get("permission") == "denied",
    )
