"""Readers for recorded agent sessions, and the detection of their format from the content.

Every reader turns one recording into a :class:`~veil.default_plugins.replay.trajectory.Trajectory`:
the system prompt, the task, and one step per recorded model response (DESIGN.md "Measures": a
step is a recorded assistant message), with what it skipped or could not pair counted in its
``records``. The format is detected from the content, never from the file name:

JSON files (this module):

* mini-swe-agent ``.traj.json``: an object with a ``messages`` list of chat messages;
* SWE-agent ``.traj``: an object with a ``trajectory`` list of ``{action, observation, response}``
  and a ``history`` of chat messages whose tool calls carry ids (a file with a ``history``
  only is read from it);
* OpenHands event stream ``.json``: a list of ``{id, source, action+args | observation+cause}``.

JSON Lines files, one record per line (a line that is not JSON, e.g. the half-written last line
of a killed agent, is skipped and counted):

* Claude Code transcripts (:mod:`~veil.default_plugins.replay.format_claude_code`);
* Codex CLI rollouts (:mod:`~veil.default_plugins.replay.format_codex`);
* pi sessions (:mod:`~veil.default_plugins.replay.format_pi`).

Folders: an OpenHands V1 conversation (:mod:`~veil.default_plugins.replay.format_openhands_v1`),
its ``events`` folder or the conversation folder holding it.

Anything else raises :class:`veil.core.errors.BadRequest` whose message names the file, says
what is wrong and lists the formats tried.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from veil import BadRequest
from veil import json_loads as loads
from veil.default_plugins.replay import (
    format_claude_code,
    format_codex,
    format_openhands_v1,
    format_pi,
)
from veil.default_plugins.replay.trajectory import (
    EmptyTrajectory,
    FormatName,
    RecordTally,
    ReplayStep,
    Trajectory,
    TrajectoryBuilder,
    join_texts,
    render_call,
    seconds,
    with_action,
)

__all__ = [
    "EmptyTrajectory",
    "FORMATS",
    "FormatName",
    "RecordTally",
    "ReplayStep",
    "Trajectory",
    "detect_format",
    "load_trajectory",
]

FORMATS: tuple[FormatName, ...] = (
    "mini-swe-agent",
    "swe-agent",
    "openhands",
    "openhands-v1",
    "claude-code",
    "codex",
    "pi",
)
"""Every format ``veil replay`` reads, as named in its results."""

FORMATS_TRIED = (
    "mini-swe-agent .traj.json (an object with a 'messages' list), SWE-agent .traj (an object "
    "with a 'trajectory' or 'history' list), OpenHands event stream (a JSON list of events "
    "with 'source' and 'action' or 'observation'), OpenHands V1 events (objects with 'kind'), "
    "Claude Code transcript (JSON Lines with 'uuid' and 'message'), Codex rollout (JSON Lines "
    "of 'type' and 'payload'), pi session (JSON Lines starting with a 'session' header)"
)
"""What a file that is no known format is told was tried."""

# mini-swe-agent 1.0 put the command in the assistant text as a ```bash block (its own regex).
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)

# OpenHands actions that are bookkeeping of the runtime, not a model call.
_OPENHANDS_NON_MODEL_ACTIONS = frozenset({"change_agent_state", "system", "recall", "null"})
# OpenHands observations that carry no tool output the model would read.
_OPENHANDS_SILENT_OBSERVATIONS = frozenset({"null", "agent_state_changed", "recall"})
# OpenHands V1 event kinds that say a list of events is V1's (V0's actions are strings).
_OPENHANDS_V1_KINDS = frozenset({"SystemPromptEvent", "MessageEvent", "ActionEvent"})


def load_trajectory(path: str | Path) -> Trajectory:
    """Read a recorded session and return it as a :class:`Trajectory`.

    Args:
        path: a recording in any of :data:`FORMATS`: a JSON or JSON Lines file, or an
            OpenHands V1 conversation folder. The format is detected from the content,
            whatever the name.

    Raises:
        EmptyTrajectory: a recording of a known format that holds no model response.
        BadRequest: the file cannot be read, is empty, is neither JSON nor JSON Lines, is none
            of the formats (the message lists those tried), or has a field of the wrong type.
            The message starts with the path and names the field at fault.
    """
    name = str(path)
    folder = Path(path)
    if folder.is_dir():
        events = format_openhands_v1.events_folder(folder)
        if events is None:
            raise BadRequest(
                f"{name}: is a directory and not an OpenHands V1 conversation (no "
                "event-NNNNN-<id>.json files in it or in its events/ folder); give the "
                "recordings in it as files"
            )
        return _checked(format_openhands_v1.read(name, _read_events(events)), name)
    raw = _read_text(folder, name)
    if not raw.strip():
        raise BadRequest(f"{name}: file is empty, expected a recorded session (JSON or JSON Lines)")
    try:
        data = loads(raw)
    except json.JSONDecodeError as exc:
        broken: json.JSONDecodeError | None = exc
    else:
        broken = None
    if broken is not None:  # several JSON documents, one a line, or not JSON at all
        records, malformed = _json_lines(raw)
        if not records:  # not JSON Lines either: say where the JSON broke
            raise BadRequest(
                f"{name}: not valid JSON or JSON Lines (line {broken.lineno}, column "
                f"{broken.colno}: {broken.msg})"
            )
        return _checked(_read_lines(name, records, malformed), name)
    kind = detect_format(data)
    if kind is not None:
        reader = {
            "mini-swe-agent": _MiniSweAgent(name).read,
            "swe-agent": _SweAgent(name).read,
            "openhands": _OpenHands(name).read,
            "openhands-v1": lambda events: format_openhands_v1.read(name, events),
        }[kind]
        return _checked(reader(data), name)
    if isinstance(data, dict):  # a JSON Lines file of one line
        return _checked(_read_lines(name, [data], 0), name)
    raise BadRequest(f"{name}: not a recorded trajectory in a known format; tried: {FORMATS_TRIED}")


def _checked(traj: Trajectory, name: str) -> Trajectory:
    if not traj.steps:
        raise EmptyTrajectory(
            f"{name}: {traj.format} recording holds no recorded assistant message"
        )
    return traj


def _read_text(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadRequest(f"{name}: no such file") from None
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise BadRequest(f"{name}: cannot be read ({exc.strerror})") from None


def _json_lines(raw: str) -> tuple[list[Any], int]:
    """The records of JSON Lines text and the count of lines that are not JSON."""
    records: list[Any] = []
    malformed = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            records.append(loads(line))
        except json.JSONDecodeError:
            malformed += 1
    return records, malformed


def _read_lines(name: str, records: list[Any], malformed: int) -> Trajectory:
    """Read JSON Lines records as the agent log they are (pi, Codex, then Claude Code: the
    most specific test first)."""
    for looks_like, read in (
        (format_pi.looks_like, format_pi.read),
        (format_codex.looks_like, format_codex.read),
        (format_claude_code.looks_like, format_claude_code.read),
    ):
        if looks_like(records):
            traj = read(name, records)
            if malformed:
                traj.records.skip("line not JSON", known=False, count=malformed)
            return traj
    raise BadRequest(f"{name}: not a recorded trajectory in a known format; tried: {FORMATS_TRIED}")


def _read_events(folder: Path) -> list[Any]:
    """The parsed event files of an OpenHands V1 events folder, in order.

    Raises:
        BadRequest: an event file cannot be read or is not JSON (naming it).
    """
    events = []
    for file in format_openhands_v1.event_files(folder):
        try:
            events.append(loads(_read_text(file, str(file))))
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
    return events


def detect_format(data: Any) -> FormatName | None:
    """Name the format of parsed JSON ``data`` (one JSON document, not JSON Lines), or
    ``None`` if it is none of the JSON formats.

    Rules: an object with a ``messages`` list is mini-swe-agent; an object with a
    ``trajectory`` list, or a ``history`` list of chat messages, is SWE-agent; a non-empty list
    of objects one of which has a V1 ``kind`` (``SystemPromptEvent``, ``MessageEvent``,
    ``ActionEvent``) is OpenHands V1 events; one with ``source`` and ``action`` or
    ``observation`` is an OpenHands event stream.
    """
    if isinstance(data, dict):
        if isinstance(data.get("messages"), list):
            return "mini-swe-agent"
        if isinstance(data.get("trajectory"), list):
            return "swe-agent"
        history = data.get("history")
        if isinstance(history, list) and any(isinstance(m, dict) and "role" in m for m in history):
            return "swe-agent"
        return None
    if isinstance(data, list) and data and all(isinstance(e, dict) for e in data):
        if any(e.get("kind") in _OPENHANDS_V1_KINDS for e in data):
            return "openhands-v1"
        if any("source" in e and ("action" in e or "observation" in e) for e in data):
            return "openhands"
    return None


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
        """A recorded time as unix seconds (:func:`~veil.default_plugins.replay.trajectory.seconds`)."""
        return seconds(value)


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
                    steps[-1].observation = join_texts(observations)
                observations = []
                action = self.action(msg, content, where)
                extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
                steps.append(
                    ReplayStep(
                        index=len(steps),
                        assistant=with_action(content, action),
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
            steps[-1].observation = join_texts(observations)
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

    ``history`` holds the chat messages themselves; in function-calling runs (SWE-agent 1.x)
    each assistant message's ``tool_calls`` carry ids and each ``tool`` message names the calls
    it answers in ``tool_call_ids``. Those pairs are checked (a call without its result or a
    result without its call is reported in ``records``), and a file with a ``history`` but no
    ``trajectory`` entries is read from the history: one step per assistant message.
    """

    def read(self, data: dict[str, Any]) -> Trajectory:
        history = data.get("history")
        if history is not None and not isinstance(history, list):
            raise self.fail("history", "expected a list of messages")
        if not data.get("trajectory") and history:
            return self.from_history(history)
        preamble = history
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
                    assistant=with_action(response, action),
                    action=action,
                    observation=None
                    if observation is None
                    else self.text(observation, f"{where}.observation"),
                    timestamp=None,
                )
            )
        traj = Trajectory(self.path, "swe-agent", "\n\n".join(system_parts), task, steps)
        if history:  # the pairs, as the history recorded them
            traj.records = self.from_history(history).records
        return traj

    def from_history(self, history: list[Any]) -> Trajectory:
        """The trajectory the chat messages of ``history`` hold (demonstrations are preamble)."""
        builder = TrajectoryBuilder(self.path, "swe-agent")
        for i, raw in enumerate(history):
            where = f"history[{i}]"
            msg = self.obj(raw, where)
            role = msg.get("role")
            content = self.text(msg.get("content"), f"{where}.content")
            if msg.get("is_demo") or role == "system":
                if builder.steps:
                    builder.records.skip("demonstration after the task")
                else:
                    builder.system(content)
            elif role == "assistant":
                index = builder.step()
                builder.add(index, content)
                calls = msg.get("tool_calls") or []
                if not isinstance(calls, list):
                    raise self.fail(f"{where}.tool_calls", "expected a list")
                for k, call in enumerate(calls):
                    call = self.obj(call, f"{where}.tool_calls[{k}]")
                    function = self.obj(call.get("function") or {}, f"{where}.tool_calls[{k}]")
                    call_id = call.get("id") if isinstance(call.get("id"), str) else ""
                    name = function.get("name") if isinstance(function.get("name"), str) else ""
                    builder.add(index, call=(call_id, name, function.get("arguments")))
            elif role == "tool":
                ids = msg.get("tool_call_ids")
                if not isinstance(ids, list) or not ids:
                    builder.user(content)  # names no call: shown all the same
                    continue
                for k, call_id in enumerate(ids):  # one message may answer several calls
                    builder.result(str(call_id), content if k == 0 else None)
            else:
                builder.user(content)
        return builder.build()


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
            steps[index].observation = join_texts(texts)
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
        return ReplayStep(index, with_action(content, action), action, None, timestamp)

    def render_call(self, call: Any, where: str) -> str:
        function = self.obj(call, where).get("function")
        function = self.obj(function, f"{where}.function")
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        return render_call(name, function.get("arguments"))
