"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

One ``{"timestamp", "type", "payload"}`` record per line (``RolloutLine`` in codex-rs's protocol
crate, ``RolloutItem`` tagged by ``type``), checked against rollouts Codex 0.171 wrote:

* ``session_meta``: the first line; ``payload.cwd`` is the project, ``payload.base_instructions``
  (``{"text"}``; ``instructions`` in older versions) the system prompt;
* ``response_item``: what the Responses API exchanged. ``message`` (role ``developer`` /
  ``system``: instructions, ``user``, ``assistant``), ``reasoning`` (not replayed: encrypted
  or a summary the next prompt does not carry as text), ``function_call`` /
  ``function_call_output`` and ``custom_tool_call`` / ``custom_tool_call_output`` paired by
  ``call_id``, ``local_shell_call`` (answered by a ``function_call_output``),
  ``web_search_call`` (run by the provider), ``compaction`` / ``compaction_summary`` (a remote
  compaction: a boundary), ``ghost_snapshot`` (skipped);
* ``compacted``: a local compaction (``message`` is the summary): a boundary, not a message;
* ``turn_context``, ``event_msg``, ``world_state``, ``token_usage_record``: bookkeeping,
  skipped and counted; the usage records give each step's provider prompt tokens.

A step is one model response: the output items (assistant message, reasoning, calls) between
two response ends. Codex ends every response with a ``token_usage_record`` and/or an
``event_msg`` of type ``token_count``; a rollout without either (an older version, a provider
without usage) ends a step at the next tool output or user message instead. Developer and user
messages before the first step are the system prompt and the task (``<environment_context>``
and ``AGENTS.md`` text included: the model reads them), later ones join the latest step's
observation.
"""

from __future__ import annotations

from typing import Any

from veil.default_plugins.replay.trajectory import (
    FreeText,
    Trajectory,
    TrajectoryBuilder,
    content_text,
    seconds,
)

LINE_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
"""``RolloutItem`` variants of codex-rs's protocol crate."""

BOOKKEEPING_TYPES = frozenset({"turn_context", "event_msg", "world_state", "token_usage_record"})
"""Line types that hold no message (the last two seen in Codex 0.171's rollouts)."""

OUTPUT_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "custom_tool_call", "local_shell_call"}
)
RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
KNOWN_ITEMS = OUTPUT_ITEMS | RESULT_ITEMS | {"web_search_call", "ghost_snapshot", "other"}


def looks_like(records: list[Any]) -> bool:
    """Whether parsed JSONL ``records`` are a Codex rollout: a line typed as a ``RolloutItem``
    variant with a ``payload``."""
    return any(
        isinstance(r, dict) and r.get("type") in LINE_TYPES and "payload" in r for r in records
    )


def _ends_response(record: dict[str, Any]) -> bool:
    """A line Codex writes when a model response is complete (with its usage)."""
    if record.get("type") == "token_usage_record":
        return True
    payload = record.get("payload")
    return (
        record.get("type") == "event_msg"
        and isinstance(payload, dict)
        and payload.get("type") == "token_count"
        and isinstance(payload.get("info"), dict)
    )


def _response_tokens(record: dict[str, Any]) -> int | None:
    """The prompt tokens of the response a usage line closes (``input_tokens``: Codex's count
    includes the cached part)."""
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    if record.get("type") == "event_msg":
        info = payload.get("info")
        usage = info.get("last_token_usage") if isinstance(info, dict) else None
    value = usage.get("input_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _output_text(output: Any) -> str:
    """A tool output: a string, a list of content items, or (older rollouts) an object with
    ``content``."""
    if isinstance(output, dict) and "content" in output:
        return content_text(output["content"])
    return content_text(output)


def read(path: str, records: list[Any]) -> Trajectory:
    """Read a Codex rollout's parsed records (see the module docstring)."""
    builder = TrajectoryBuilder(path, "codex")
    tally = builder.records
    marked = any(isinstance(r, dict) and _ends_response(r) for r in records)
    open_step: int | None = None  # the step of the response being read
    closed_step: int | None = None  # the last step a response end closed (for its usage)
    for record in records:
        if not isinstance(record, dict):
            tally.skip("not an object", known=False)
            continue
        kind = record.get("type")
        payload = record.get("payload")
        if kind == "session_meta" and isinstance(payload, dict):
            instructions = payload.get("base_instructions") or payload.get("instructions")
            builder.system(content_text(instructions))
            continue
        if kind == "compacted":
            builder.boundary()
            open_step = None
            continue
        if kind != "response_item" or not isinstance(payload, dict):
            if _ends_response(record):
                index = open_step if open_step is not None else closed_step
                if index is not None:  # the first usage line of a response sets its tokens
                    builder.set_prompt_tokens(index, _response_tokens(record))
                closed_step = index
                open_step = None
            label = kind if isinstance(kind, str) else "no type"
            tally.skip(label, known=label in BOOKKEEPING_TYPES or label in LINE_TYPES)
            continue
        item = payload.get("type")
        when = seconds(record.get("timestamp"))
        if item == "message" and payload.get("role") != "assistant":
            text = content_text(payload.get("content"))
            if payload.get("role") in ("developer", "system"):
                builder.system(text)
            else:
                builder.user(text)
            open_step = None
        elif item in OUTPUT_ITEMS or item == "web_search_call":
            if open_step is None:
                open_step = builder.step(when)
            _output(builder, open_step, payload)
        elif item in RESULT_ITEMS:
            call_id = payload.get("call_id")
            builder.result(
                call_id if isinstance(call_id, str) else "", _output_text(payload.get("output"))
            )
            if not marked:
                open_step = None
        elif item in ("compaction", "compaction_summary"):
            builder.boundary()
            open_step = None
        else:
            label = f"response_item {item}" if isinstance(item, str) else "response_item"
            tally.skip(label, known=item in KNOWN_ITEMS)
    return builder.build()


def _output(builder: TrajectoryBuilder, index: int, item: dict[str, Any]) -> None:
    kind = item.get("type")
    call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else ""
    if kind == "message":
        builder.add(index, content_text(item.get("content")))
    elif kind == "function_call":
        builder.add(index, call=(call_id, str(item.get("name") or ""), item.get("arguments")))
    elif kind == "custom_tool_call":
        raw = item.get("input")
        text = FreeText(raw) if isinstance(raw, str) else raw
        builder.add(index, call=(call_id, str(item.get("name") or ""), text))
    elif kind == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        call_id = call_id or (item.get("id") if isinstance(item.get("id"), str) else "")
        builder.add(index, call=(call_id, "shell", {"command": action.get("command")}))
    elif kind == "web_search_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        builder.add(index, call=("", "web_search", action), expects_result=False)
    # reasoning: not replayed
