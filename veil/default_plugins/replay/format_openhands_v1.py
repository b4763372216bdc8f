"""OpenHands V1 conversations (the OpenHands software-agent SDK): a folder of event files.

The SDK persists each event of a conversation as its own JSON file,
``<conversation>/events/event-<index, 5+ digits>-<event id>.json`` (``persistence_const.py``), an
object whose ``kind`` names its class. As ``openhands/sdk/event`` defines them and
``LLMConvertibleEvent.events_to_messages`` turns them into the model's messages:

* ``SystemPromptEvent``: ``system_prompt.text`` is the system prompt;
* ``MessageEvent``: ``llm_message`` ``{role, content: [{type: text, text}]}`` from the user (the
  task, or later what the model read) or the agent (a step without tool calls);
* ``ActionEvent``: one tool call (``tool_call`` ``{id, name, arguments}``, ``thought`` the
  prose); the actions of one model response share ``llm_response_id`` and form one step;
* ``ObservationEvent`` / ``UserRejectObservation`` / ``AgentErrorEvent``: a tool result, paired
  with its call by ``tool_call_id``;
* ``Condensation`` / ``CondensationSummaryEvent``: the agent condensed its history: a
  boundary, not a message;
* anything else (``ConversationStateUpdateEvent``, ``PauseEvent``, ``CondensationRequest``,
  ``TokenEvent``...) is bookkeeping, skipped and counted by ``kind``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veil.default_plugins.replay.trajectory import (
    Trajectory,
    TrajectoryBuilder,
    content_text,
    seconds,
)

EVENT_FILE = re.compile(r"^event-(?P<idx>\d{5,})-(?P<event_id>[0-9a-fA-F\-]{8,})\.json$")
"""An event file's name (the SDK's ``EVENT_NAME_RE``)."""

RESULT_KINDS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})
BOUNDARY_KINDS = frozenset({"Condensation", "CondensationSummaryEvent"})
BOOKKEEPING_KINDS = frozenset(
    {
        "ConversationStateUpdateEvent",
        "PauseEvent",
        "CondensationRequest",
        "TokenEvent",
        "LLMCompletionLogEvent",
        "HookExecutionEvent",
        "ConversationErrorEvent",
        "StreamingDeltaEvent",
    }
)


def events_folder(path: Path) -> Path | None:
    """The folder holding ``path``'s event files: ``path`` itself, or its ``events``
    subfolder (a conversation folder); None when neither holds one."""
    for folder in (path, path / "events"):
        if folder.is_dir() and any(EVENT_FILE.match(p.name) for p in folder.iterdir()):
            return folder
    return None


def event_files(folder: Path) -> list[Path]:
    """The event files of ``folder`` in the order they were written (by index)."""
    found = [(int(m["idx"]), p) for p in folder.iterdir() if (m := EVENT_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def _texts(content: Any) -> str:
    return content_text(content)


def _observation_text(observation: Any) -> str:
    """A tool observation as the model reads it: its content, between the terminal's
    ``metadata.prefix`` and ``suffix`` where recorded (the terminal tool's rendering)."""
    if not isinstance(observation, dict):
        return content_text(observation)
    text = _texts(observation.get("content"))
    metadata = observation.get("metadata")
    if isinstance(metadata, dict):
        prefix = metadata.get("prefix") if isinstance(metadata.get("prefix"), str) else ""
        suffix = metadata.get("suffix") if isinstance(metadata.get("suffix"), str) else ""
        text = f"{prefix}{text}{suffix}"
    return text


def read(path: str, events: list[Any]) -> Trajectory:
    """Read a V1 conversation's events, in order (see the module docstring)."""
    builder = TrajectoryBuilder(path, "openhands-v1")
    tally = builder.records
    step_of_response: dict[str, int] = {}
    for event in events:
        if not isinstance(event, dict):
            tally.skip("not an object", known=False)
            continue
        kind = event.get("kind")
        when = seconds(event.get("timestamp"))
        if kind == "SystemPromptEvent":
            prompt = event.get("system_prompt")
            builder.system(content_text(prompt))
        elif kind == "MessageEvent":
            message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
            text = _texts(message.get("content"))
            extra = _texts(event.get("extended_content"))
            if message.get("role") == "assistant":
                index = builder.step(when)
                builder.add(index, text)
            else:
                builder.user("\n".join(t for t in (text, extra) if t))
        elif kind == "ActionEvent":
            response = event.get("llm_response_id")
            index = step_of_response.get(response) if isinstance(response, str) else None
            if index is None:
                index = builder.step(when)
                if isinstance(response, str):
                    step_of_response[response] = index
            call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
            call_id = call.get("id") or event.get("tool_call_id")
            name = call.get("name") or event.get("tool_name") or ""
            builder.add(
                index,
                _texts(event.get("thought")),
                (call_id if isinstance(call_id, str) else "", str(name), call.get("arguments")),
            )
        elif kind in RESULT_KINDS:
            call_id = event.get("tool_call_id")
            if kind == "ObservationEvent":
                text = _observation_text(event.get("observation"))
            elif kind == "UserRejectObservation":
                text = f"Action rejected: {event.get('rejection_reason', '')}"
            else:
                text = str(event.get("error") or "")
            builder.result(call_id if isinstance(call_id, str) else "", text)
        elif kind in BOUNDARY_KINDS:
            builder.boundary()
        else:
            label = kind if isinstance(kind, str) else "no kind"
            tally.skip(label, known=label in BOOKKEEPING_KINDS)
    return builder.build()
