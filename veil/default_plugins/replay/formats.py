"""Readers for recorded agent sessions: mini-swe-agent, SWE-agent and OpenHands.

Every reader turns one file into a :class:`Trajectory`: the system prompt, the task, and one
:class:`ReplayStep` per recorded assistant message (DESIGN.md "Measures": a step is a recorded
assistant message). The format is detected from the parsed JSON, not from the file name:

* mini-swe-agent ``.traj.json``: an object with a ``messages`` list of chat messages;
* SWE-agent ``.traj``: an object with a ``trajectory`` list of ``{action, observation, response}``;
* OpenHands event stream ``.json``: a list of ``{id, source, action+args | observation+cause}``.

Anything else (an empty file, malformed JSON, another shape) raises
:class:`veil.core.errors.BadRequest` whose message names the file and says what is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from veil.core.errors import BadRequest
from veil.core.jsonio import loads

FormatName = Literal["mini-swe-agent", "swe-agent", "openhands"]

# mini-swe-agent 1.0 put the command in the assistant text as a ```bash block (its own regex).
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)

# OpenHands actions that are bookkeeping of the runtime, not a model call.
_OPENHANDS_NON_MODEL_ACTIONS = frozenset({"change_agent_state", "system", "recall", "null"})
# OpenHands observations that carry no tool output the model would read.
_OPENHANDS_SILENT_OBSERVATIONS = frozenset({"null", "agent_state_changed", "recall"})
# OpenHands tools whose call is a shell or Python snippet: the snippet is the command text.
_OPENHANDS_CODE_ARGUMENT = {
    "execute_bash": "command",
    "bash": "command",
    "cmd_run": "command",
    "execute_ipython_cell": "code",
}


@dataclass
class ReplayStep:
    """One recorded assistant message and the tool output that followed it.

    Attributes:
        index: position of the step in the trajectory, from 0.
        assistant: the recorded assistant message text, with its action (the command it ran)
            rendered as text after the prose when the format keeps the action apart.
        action: the command text alone ("" when the message ran nothing, e.g. a final answer).
        observation: the tool output(s) that followed, joined by newlines; ``None`` when nothing
            followed (typically the last step).
        timestamp: when the message was recorded, unix seconds; ``None`` when the format does
            not record it (the replay engine then assumes 30 s per step, DESIGN.md).
    """

    index: int
    assistant: str
    action: str
    observation: str | None
    timestamp: float | None = None


@dataclass
class Trajectory:
    """A recorded session in the common replay model.

    Attributes:
        path: the file it was read from, as given.
        format: ``"mini-swe-agent"``, ``"swe-agent"`` or ``"openhands"``.
        system: the system prompt ("" when the format does not record one); SWE-agent
            demonstrations shown before the task are appended to it (they are fixed preamble).
        task: the user's task message(s).
        steps: one :class:`ReplayStep` per recorded assistant message, in order.
    """

    path: str
    format: FormatName
    system: str
    task: str
    steps: list[ReplayStep] = field(default_factory=list)


class EmptyTrajectory(BadRequest):
    """A readable recording of a known format that holds no step to replay (the agent stopped
    before its first message). ``veil replay`` skips it when other files remain."""


def load_trajectory(path: str | Path) -> Trajectory:
    """Read a recorded session and return it as a :class:`Trajectory`.

    Args:
        path: a mini-swe-agent ``.traj.json``, SWE-agent ``.traj`` or OpenHands event-stream
            ``.json`` file. The format is detected from the content, whatever the extension.

    Raises:
        BadRequest: the file cannot be read, is empty, is not valid JSON, is none of the three
            formats, has a field of the wrong type, or holds no assistant message. The message
            starts with the file path and names the field at fault.
    """
    name = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadRequest(f"{name}: no such file") from None
    except IsADirectoryError:
        raise BadRequest(f"{name}: is a directory, not a trajectory file") from None
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise BadRequest(f"{name}: cannot be read ({exc.strerror})") from None
    if not raw.strip():
        raise BadRequest(f"{name}: file is empty, expected a recorded trajectory (JSON)")
    try:
        data = loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRequest(
            f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None

    kind = detect_format(data)
    if kind is None:
        raise BadRequest(
            f"{name}: not a recorded trajectory: expected a mini-swe-agent .traj.json (an object "
            "with a 'messages' list), a SWE-agent .traj (an object with a 'trajectory' list) or "
            "an OpenHands event stream (a list of events with 'source' and 'action' or "
            "'observation')"
        )
    reader = {"mini-swe-agent": _MiniSweAgent, "swe-agent": _SweAgent, "openhands": _OpenHands}
    traj = reader[kind](name).read(data)
    if not traj.steps:
        raise EmptyTrajectory(f"{name}: {kind} trajectory holds no recorded assistant message")
    return traj


def detect_format(data: Any) -> FormatName | None:
    """Name the trajectory format of parsed JSON ``data``, or ``None`` if it is none of them.

    Rules: an object with a ``messages`` list is mini-swe-agent; an object with a
    ``trajectory`` list is SWE-agent; a non-empty list of objects at least one of which has
    ``source`` and ``action`` or ``observation`` is an OpenHands event stream.
    """
    if isinstance(data, dict):
        if isinstance(data.get("messages"), list):
            return "mini-swe-agent"
        if isinstance(data.get("trajectory"), list):
            return "swe-agent"
        return None
    if (
        isinstance(data, list)
        and data
        and all(isinstance(e, dict) for e in data)
        and any("source" in e and ("action" in e or "observation" in e) for e in data)
    ):
        return "openhands"
    return None


def _with_action(text: str, action: str) -> str:
    """Render an assistant message as its prose followed by its command text (if not in it)."""
    if not action or action in text:
        return text
    return f"{text.rstrip()}\n\n{action}" if text.strip() else action


def _join(parts: list[str]) -> str | None:
    return "\n".join(parts) if parts else None


class _Reader:
    """Shared helpers: every reader knows its file name for error messages."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, why: str) -> BadRequest:
        return BadRequest(f"{self.path}: {where}: {why}")

    def text(self, value: Any, where: str) -> str:
        """Message content as text: a string, None (""), or a list of ``{type, text}`` parts."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            parts = []
            for k, part in enumerate(value):
                if isinstance(part, str):
                    parts.append(part)
                elif isinstance(part, dict) and isinstance(part.get("text", ""), str):
                    parts.append(part.get("text", ""))
                else:
                    raise self.fail(f"{where}[{k}]", "expected a text part")
            return "\n".join(parts)
        raise self.fail(where, f"expected text, got {type(value).__name__}")

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    @staticmethod
    def seconds(value: Any) -> float | None:
        """A recorded time as unix seconds: a number, or an ISO-8601 string (naive = UTC)."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.timestamp()
        return None


class _MiniSweAgent(_Reader):
    """mini-swe-agent ``{info, messages[], instance_id}``.

    messages: system, user (task), then assistant messages each followed by the tool/user
    messages holding its observation (``<returncode>`` / ``<output>``). The command is in
    ``tool_calls[].function.arguments.command`` (v1.1+, also ``extra.actions[].command``) or in a
    ```` ```bash ```` block of the text (v1.0). The final ``exit`` message (the submission, never
    shown to the model) is not an observation. Timestamp: ``extra.timestamp`` of the assistant
    message.
    """

    def read(self, data: dict[str, Any]) -> Trajectory:
        system_parts: list[str] = []
        task_parts: list[str] = []
        steps: list[ReplayStep] = []
        observations: list[str] = []
        for i, raw in enumerate(data["messages"]):
            where = f"messages[{i}]"
            msg = self.obj(raw, where)
            role = msg.get("role")
            if not isinstance(role, str):
                raise self.fail(f"{where}.role", "missing or not a string")
            content = self.text(msg.get("content"), f"{where}.content")
            if role == "assistant":
                if steps:
                    steps[-1].observation = _join(observations)
                observations = []
                action = self.action(msg, content, where)
                extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
                steps.append(
                    ReplayStep(
                        index=len(steps),
                        assistant=_with_action(content, action),
                        action=action,
                        observation=None,
                        timestamp=self.seconds(extra.get("timestamp")),
                    )
                )
            elif role == "system" and not steps:
                system_parts.append(content)
            elif role in ("user", "tool"):
                (observations if steps else task_parts).append(content)
            # "exit" and unknown roles carry nothing the model was shown.
        if steps:
            steps[-1].observation = _join(observations)
        return Trajectory(
            self.path, "mini-swe-agent", "\n\n".join(system_parts), "\n\n".join(task_parts), steps
        )

    def action(self, msg: dict[str, Any], content: str, where: str) -> str:
        commands: list[str] = []
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            raise self.fail(f"{where}.tool_calls", "expected a list")
        for k, call in enumerate(calls):
            function = self.obj(call, f"{where}.tool_calls[{k}]").get("function") or {}
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str):
                try:
                    arguments = loads(arguments)
                except json.JSONDecodeError:
                    commands.append(arguments)  # a provider sent raw text: it is the command
                    continue
            if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
                commands.append(arguments["command"])
        if not commands:
            extra = msg.get("extra")
            actions = extra.get("actions") if isinstance(extra, dict) else None
            for act in actions if isinstance(actions, list) else []:
                if isinstance(act, dict) and isinstance(act.get("command"), str):
                    commands.append(act["command"])
        if not commands:
            commands = _BASH_BLOCK.findall(content)
        return "\n".join(commands)


class _SweAgent(_Reader):
    """SWE-agent ``{environment, trajectory[], history[], info}``.

    One step per ``trajectory`` entry: the assistant text is ``response`` (or ``thought``) with
    ``action`` appended when the response does not already contain it (function-calling runs keep
    it apart); the observation is the entry's ``observation`` (the raw tool output). The system
    prompt is the first ``system`` message of ``history`` (else of the first entry's
    ``messages``), demonstrations (``is_demo``) are appended to it, and the task is the first
    other ``user`` message. SWE-agent records no per-step wall-clock time: timestamps are None.
    """

    def read(self, data: dict[str, Any]) -> Trajectory:
        preamble = data.get("history")
        if not preamble and data["trajectory"]:
            first = data["trajectory"][0]
            preamble = first.get("messages") if isinstance(first, dict) else None
        system_parts: list[str] = []
        task = ""
        if preamble is not None and not isinstance(preamble, list):
            raise self.fail("history", "expected a list of messages")
        for i, raw in enumerate(preamble or []):
            msg = self.obj(raw, f"history[{i}]")
            role = msg.get("role")
            content = self.text(msg.get("content"), f"history[{i}].content")
            if role == "system" or (role == "user" and msg.get("is_demo")):
                system_parts.append(content)  # demonstrations are fixed preamble too
            elif role == "user":
                task = content
                break
            elif role == "assistant":
                break

        steps: list[ReplayStep] = []
        for i, raw in enumerate(data["trajectory"]):
            where = f"trajectory[{i}]"
            entry = self.obj(raw, where)
            response = self.text(entry.get("response"), f"{where}.response")
            if not response:
                response = self.text(entry.get("thought"), f"{where}.thought")
            action = self.text(entry.get("action"), f"{where}.action").strip()
            observation = entry.get("observation")
            steps.append(
                ReplayStep(
                    index=i,
                    assistant=_with_action(response, action),
                    action=action,
                    observation=None
                    if observation is None
                    else self.text(observation, f"{where}.observation"),
                    timestamp=None,
                )
            )
        return Trajectory(self.path, "swe-agent", "\n\n".join(system_parts), task, steps)


class _OpenHands(_Reader):
    """OpenHands event stream: a list of ``{id, timestamp, source, action+args}`` actions and
    ``{id, source, observation, content, cause}`` observations.

    The task is the first ``user`` ``message`` action; the system prompt is a ``system`` action's
    ``args.content`` if recorded, else "". A step is one model response: consecutive agent
    actions sharing ``tool_call_metadata.model_response.id`` (parallel tool calls) form one step;
    an agent action without metadata (a plain ``message``) is a step of its own. Its text is the
    response's ``content`` followed by each tool call rendered as text (a shell/Python call as its
    command, another tool as its name and ``key: value`` lines). Observations are the
    non-empty observations whose ``cause`` is one of the step's actions (``content``, else
    ``message``); later user messages join the observation of the step before them. Runtime
    bookkeeping (agent state changes, "No observation") is skipped. Timestamp: the ISO time of
    the step's first action (naive times are UTC).
    """

    def read(self, data: list[dict[str, Any]]) -> Trajectory:
        system = ""
        task_parts: list[str] = []
        steps: list[ReplayStep] = []
        observations: dict[int, list[str]] = {}  # step index -> observation texts
        step_of_action: dict[Any, int] = {}  # action event id -> step index
        last_response: Any = None
        for i, event in enumerate(data):
            where = f"event[{i}]"
            source = event.get("source")
            action = event.get("action")
            if isinstance(action, str):
                args = event.get("args") if isinstance(event.get("args"), dict) else {}
                if action == "system":
                    system = self.text(args.get("content"), f"{where}.args.content")
                elif source == "user" and action == "message":
                    text = self.text(args.get("content", event.get("message")), f"{where}.args")
                    if steps:
                        observations.setdefault(len(steps) - 1, []).append(text)
                    else:
                        task_parts.append(text)
                elif source == "agent" and action not in _OPENHANDS_NON_MODEL_ACTIONS:
                    metadata = event.get("tool_call_metadata")
                    response = self.model_response(metadata, where)
                    response_id = response.get("id") if response else None
                    if response_id is None or response_id != last_response:
                        steps.append(self.step(len(steps), event, args, response, where))
                    last_response = response_id
                    step_of_action[event.get("id")] = len(steps) - 1
                continue
            kind = event.get("observation")
            if isinstance(kind, str) and kind not in _OPENHANDS_SILENT_OBSERVATIONS:
                owner = step_of_action.get(event.get("cause"))
                if owner is None:
                    continue
                text = self.text(event.get("content"), f"{where}.content")
                if not text.strip():
                    text = self.text(event.get("message"), f"{where}.message")
                observations.setdefault(owner, []).append(text)
        for index, texts in observations.items():
            steps[index].observation = _join(texts)
        return Trajectory(self.path, "openhands", system, "\n\n".join(task_parts), steps)

    def model_response(self, metadata: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(metadata, dict):
            return None
        response = metadata.get("model_response")
        return response if isinstance(response, dict) else None

    def step(
        self,
        index: int,
        event: dict[str, Any],
        args: dict[str, Any],
        response: dict[str, Any] | None,
        where: str,
    ) -> ReplayStep:
        timestamp = self.seconds(event.get("timestamp"))
        message = None
        if response is not None:
            choices = response.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                message = choices[0].get("message")
        if not isinstance(message, dict):
            # A plain agent message (or a finish without metadata): its text is in args.
            text = args.get("content") or args.get("thought") or event.get("message")
            text = self.text(text, f"{where}.args.content")
            return ReplayStep(index, text, "", None, timestamp)
        where_msg = f"{where}.tool_call_metadata.model_response.choices[0].message"
        content = self.text(message.get("content"), f"{where_msg}.content")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise self.fail(f"{where_msg}.tool_calls", "expected a list")
        commands = [
            self.render_call(call, f"{where_msg}.tool_calls[{k}]") for k, call in enumerate(calls)
        ]
        action = "\n".join(c for c in commands if c)
        return ReplayStep(index, _with_action(content, action), action, None, timestamp)

    def render_call(self, call: Any, where: str) -> str:
        function = self.obj(call, where).get("function")
        function = self.obj(function, f"{where}.function")
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                return f"{name} {arguments}".strip()
        if not isinstance(arguments, dict):
            return name
        code_key = _OPENHANDS_CODE_ARGUMENT.get(name)
        if code_key and isinstance(arguments.get(code_key), str):
            return arguments[code_key]
        # Other tools: the name, then one "key: value" line each, values unescaped so the text
        # reads as the model wrote it (file contents keep their real newlines).
        lines = [name]
        for key, value in arguments.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{key}: {shown}")
        return "\n".join(lines)
