"""The turn driver: how what happens in a turn is recorded, and the only caller of the hooks
``capture``, ``after_iteration`` and ``turn_end``.

Three drivers record turns through these functions, so they cannot drift apart:
:func:`veil.core.loop.run_turn` (veil's own agent loop), :class:`veil.harness.VeilHarness`
(another agent's loop, and ``veil proxy`` through it) and the replay policy
(:class:`veil.default_plugins.replay.veil_policy.VeilReplayPolicy`, recorded sessions).

One turn, in order (DESIGN.md "One turn, as data flows"):

1. :func:`record_user`: the user's message is stored and starts a new task, ``capture``
   (phase ``user``: the capture plugin reports the task's tags).
2. :func:`record_assistant`: the model's reply is stored with its tool calls, ``capture``
   (``assistant``).
3. for each tool call: :func:`record_tool_call` (``capture`` ``tool_call``, on the way in),
   the call runs, :func:`record_tool_result` (stored, ``capture`` ``tool_result``, on the way
   out).
4. :func:`end_iteration` once the results of all the reply's calls are recorded (one tool
   batch): ``after_iteration`` (autoThreshold, pressure; a plugin may ask to halt).
   :func:`completes_batch` says whether a recorded result was the batch's last one, for a
   driver that learns of results one at a time (the harness).
5. :func:`end_turn` after a reply without tool calls (the final answer) or when the run
   stops: ``turn_end`` (autoThreshold again: no ``after_iteration`` follows a final answer).

Every message enters through :meth:`veil.core.session.Session.append`, which stores it with
credentials redacted; ``capture`` sees the stored copy only.

The replay calls no :func:`end_turn`: a recording is one turn whose prompts are all measured
before it would end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.core.plugins import checked_list, results_by_plugin
from veil.core.prompt.tags import item_identifiers
from veil.core.types import CaptureEvent, ContextItem, Message, ToolResult

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

_CAPTURE_EXPECTED = "a list of veil.core.types.ContextItem"


def capture(session: Session, event: CaptureEvent) -> list[ContextItem]:
    """Call the ``capture`` hook for ``event`` and store the items it returns.

    Each item gets its provenance where the plugin left it unset (session id, step, message
    index, tool call id), its prompt cost in tokens (what evicting it frees: an assistant
    turn costs its message as the session counts it, any other item its content), its
    identifiers (coverage, mention counts) and the session clock as creation and access time.

    Args:
        session: the session the event happened in.
        event: what happened (phase ``user``, ``assistant``, ``tool_call`` or ``tool_result``).

    Returns:
        The stored items (now live), possibly none.

    Raises:
        PluginResultInvalid: an implementation returned something other than a list of
            :class:`~veil.core.types.ContextItem` or None (naming it).
        PluginHookFailed: an implementation raised.
    """
    items: list[ContextItem] = []
    answers = results_by_plugin(session.veil.pm, "capture", session=session, event=event)
    for plugin, result in answers:
        items.extend(checked_list(plugin, "capture", result, ContextItem, _CAPTURE_EXPECTED))
    if not items:
        return []
    now = session.clock()
    for item in items:
        item.session_id = session.id
        item.step = item.step or event.step
        if item.message_index is None:
            item.message_index = event.message_index
        if item.tool_call_id is None:
            item.tool_call_id = event.tool_call_id
        if not item.tokens:
            item.tokens = _prompt_cost(session, item)
        item_identifiers(item)  # computed once here, for coverage and the mention counts
        item.created_at = item.last_access = now
    session.add_items(items)
    return items


def _prompt_cost(session: Session, item: ContextItem) -> int:
    """Tokens an item costs in the prompt, which is what evicting it frees. An assistant turn
    costs what its message costs as the session counts it (content, and tool-call arguments
    where the session counts those: a replay's recorded content already holds the command);
    any other item its content."""
    if item.source == "assistant" and item.message_index is not None:
        message = session.messages[item.message_index]
        return max(0, session.count_tokens([message]) - session.message_overhead_tokens)
    return session.count_text(item.content) if item.content else 0


def record_user(session: Session, text: str) -> int:
    """Store a user message, start a new task (its tags are what the ``capture`` hook reports
    through :meth:`~veil.core.session.Session.note_task`) and capture it.

    Args:
        session: the session.
        text: the message's text (credentials in it are redacted when stored; the capture
            reads the stored text).

    Returns:
        The message's index in ``session.messages``.

    Raises:
        SessionConflict: another process changed the session (nothing is stored).
    """
    idx = session.append({"role": "user", "content": text})
    message = session.messages[idx]
    session.new_task()
    capture(session, CaptureEvent("user", message, session.step, message_index=idx))
    return idx


def record_assistant(session: Session, message: Message, usage: dict | None = None) -> int:
    """Store the model's reply (an OpenAI assistant message, with or without ``tool_calls``)
    and capture it. Its tool calls are captured one by one by :func:`record_tool_call`, when
    each runs. ``session.step`` is the driver's to advance before (one step per reply).

    Args:
        session: the session.
        message: ``{"role": "assistant", "content": ..., "tool_calls": [...]?}``.
        usage: the provider's token counts for this reply, stored with it.

    Returns:
        The message's index in ``session.messages``; the stored (redacted) message is
        ``session.messages[index]``.

    Raises:
        SessionConflict: another process changed the session (nothing is stored).
    """
    idx = session.append(message, usage=usage)
    stored = session.messages[idx]
    capture(session, CaptureEvent("assistant", stored, session.step, message_index=idx))
    return idx


def record_tool_call(
    session: Session,
    assistant: Message,
    name: str,
    tool_call_id: str,
    arguments: dict[str, Any] | None,
) -> None:
    """Capture a tool call on the way in (before it runs).

    Args:
        session: the session.
        assistant: the stored assistant message that holds the call.
        name: the tool's name.
        tool_call_id: the call's id.
        arguments: its arguments as they may be kept (credentials already redacted), or None
            when the model sent arguments that are not a JSON object.
    """
    capture(
        session,
        CaptureEvent(
            "tool_call",
            assistant,
            session.step,
            tool_name=name,
            tool_call_id=tool_call_id,
            arguments=arguments,
        ),
    )


def record_tool_result(
    session: Session,
    name: str,
    tool_call_id: str,
    result: ToolResult,
    arguments: dict[str, Any] | None,
) -> tuple[int, ToolResult]:
    """Store a tool call's result as its ``tool`` message and capture it on the way out.

    Args:
        session: the session.
        name: the tool's name.
        tool_call_id: the id of the call it answers.
        result: what the tool returned (``content`` becomes the message's content; ``is_error``,
            ``outcome`` and ``meta`` reach the capture).
        arguments: the call's arguments as they may be kept (redacted), or None.

    Returns:
        ``(index, stored)``: the tool message's index in ``session.messages`` and the result as
        stored and captured (content and meta redacted; ``result`` itself when nothing was).

    Raises:
        SessionConflict: another process changed the session (nothing is stored).
    """
    idx = session.append({"role": "tool", "tool_call_id": tool_call_id, "content": result.content})
    message = session.messages[idx]
    stored = session.veil.redactor.tool_result(result, message["content"])
    capture(
        session,
        CaptureEvent(
            "tool_result",
            message,
            session.step,
            message_index=idx,
            tool_name=name,
            tool_call_id=tool_call_id,
            arguments=arguments,
            result=stored,
        ),
    )
    return idx, stored


def completes_batch(session: Session, index: int) -> bool:
    """Whether the tool message at ``index`` is the last result of a tool batch: it answers a
    call of the newest assistant message before it, and with it every call of that message has
    a result (the first result of a call counts; a repeated one completes nothing again).

    Args:
        session: the session.
        index: a tool message's index in ``session.messages``.

    Returns:
        True exactly once per batch whose results all arrive; False for any other message.
    """
    messages = session.messages
    if not 0 <= index < len(messages) or messages[index].get("role") != "tool":
        return False
    start = next(
        (i for i in range(index - 1, -1, -1) if messages[i].get("role") == "assistant"), None
    )
    if start is None:
        return False
    calls = {call.get("id") for call in messages[start].get("tool_calls") or []}
    call_id = messages[index].get("tool_call_id")
    if call_id not in calls:
        return False
    answered = {
        m.get("tool_call_id") for m in messages[start + 1 : index] if m.get("role") == "tool"
    }
    return call_id not in answered and calls <= answered | {call_id}


def end_iteration(session: Session, iteration: int) -> None:
    """One iteration (a reply and its tool batch) is recorded: call ``after_iteration``.
    Plugins check thresholds here (defaultCompaction's ``autoThreshold``) and may ask to halt
    (``session.take_halt()``, read by the loop).

    Args:
        session: the session.
        iteration: the loop's model call within the turn (1-based); drivers without a loop of
            their own pass the session's step.
    """
    session.veil.pm.hook.after_iteration(session=session, iteration=iteration)


def end_turn(session: Session) -> None:
    """The turn is over (a final answer, or the run stopped): call ``turn_end`` with the
    session's last message (None when it has none). Everything is already stored message by
    message."""
    session.veil.pm.hook.turn_end(
        session=session, final_message=session.messages[-1] if session.messages else None
    )
