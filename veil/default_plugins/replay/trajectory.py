"""The common replay model every reader produces, and the pieces readers share.

A recorded session becomes a :class:`Trajectory`: the system prompt, the task, and one
:class:`ReplayStep` per recorded model response (DESIGN.md "Measures": a step is a recorded
assistant message). What the reader left out is kept beside it in a :class:`RecordTally`:
records skipped by type (those of a type the reader does not know counted apart), the
agent's own compactions (boundaries, never messages), and tool calls and results that could
not be paired. ``veil replay`` reports the tally per file, so nothing is dropped silently.

Agents that record tool calls with ids (Claude Code, Codex, pi, OpenHands V1, SWE-agent's
``history``) are read through :class:`TrajectoryBuilder`, which pairs each result with its call
by id whatever the order the log wrote them in.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from veil import BadRequest
from veil import json_loads as loads

FormatName = Literal[
    "mini-swe-agent", "swe-agent", "openhands", "openhands-v1", "claude-code", "codex", "pi"
]

# Tools whose call is a shell or Python snippet: the snippet is the command text, so a replayed
# step reads as the model wrote it. Names as each agent's tools are called: OpenHands V0
# (execute_bash, execute_ipython_cell, cmd_run), OpenHands V1 (terminal), Claude Code (Bash),
# Codex (exec_command, shell, shell_command), pi (bash).
SHELL_ARGUMENT = {
    "execute_bash": "command",
    "bash": "command",
    "Bash": "command",
    "cmd_run": "command",
    "terminal": "command",
    "execute_ipython_cell": "code",
    "exec_command": "cmd",
    "shell": "command",
    "shell_command": "command",
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
        recorded_prompt_tokens: the prompt tokens the provider reported for this response, as
            the agent logged them (uncached + cache reads + cache writes); ``None`` when the
            log holds no usage. Provider tokens, not cl100k_base: a cross-check only.
    """

    index: int
    assistant: str
    action: str
    observation: str | None
    timestamp: float | None = None
    recorded_prompt_tokens: int | None = None


@dataclass
class RecordTally:
    """What a reader left out of the replay, and the pairs it could not make.

    Attributes:
        skipped: records not replayed, by record type (``"attachment"``, ``"event_msg"``,
            ``"other branch"``...), counts.
        unknown: the part of ``skipped`` whose type the reader does not know (a newer agent
            version's record), by type, counts.
        compactions: for each compaction the agent made, the index of the first step after it
            (a boundary: its summary is not replayed as a message).
        calls_without_result: ids of tool calls no result answers.
        results_without_call: ids of tool results that answer no recorded call (their text
            joins the observation of the step before them).
    """

    skipped: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    compactions: list[int] = field(default_factory=list)
    calls_without_result: list[str] = field(default_factory=list)
    results_without_call: list[str] = field(default_factory=list)

    def skip(self, kind: str, *, known: bool = True, count: int = 1) -> None:
        """Count ``count`` records of type ``kind`` left out (``known=False``: a type the reader
        does not know, counted in :attr:`unknown` too)."""
        self.skipped[kind] = self.skipped.get(kind, 0) + count
        if not known:
            self.unknown[kind] = self.unknown.get(kind, 0) + count

    def to_json(self) -> dict[str, Any]:
        """``{"skipped": {type: n}, "unknown": {type: n}, "compactions": [step...],
        "calls_without_result": [id...], "results_without_call": [id...]}``, types sorted."""
        return {
            "skipped": dict(sorted(self.skipped.items())),
            "unknown": dict(sorted(self.unknown.items())),
            "compactions": list(self.compactions),
            "calls_without_result": list(self.calls_without_result),
            "results_without_call": list(self.results_without_call),
        }


@dataclass
class Trajectory:
    """A recorded session in the common replay model.

    Attributes:
        path: the file (or OpenHands V1 events folder) it was read from, as given.
        format: the format it was read as (:data:`FormatName`).
        system: the system prompt ("" when the format does not record one); SWE-agent
            demonstrations shown before the task are appended to it (they are fixed preamble).
        task: the user's task message(s).
        steps: one :class:`ReplayStep` per recorded assistant message, in order.
        records: what the reader skipped or could not pair (:class:`RecordTally`).
    """

    path: str
    format: FormatName
    system: str
    task: str
    steps: list[ReplayStep] = field(default_factory=list)
    records: RecordTally = field(default_factory=RecordTally)


class EmptyTrajectory(BadRequest):
    """A readable recording of a known format that holds no step to replay (the agent stopped
    before its first message). ``veil replay`` skips it when other files remain."""


def with_action(text: str, action: str) -> str:
    """Render an assistant message as its prose followed by its command text (if not in it)."""
    if not action or action in text:
        return text
    return f"{text.rstrip()}\n\n{action}" if text.strip() else action


def join_texts(parts: list[str]) -> str | None:
    """Texts joined by newlines; ``None`` for no text at all."""
    return "\n".join(parts) if parts else None


def seconds(value: Any) -> float | None:
    """A recorded time as unix seconds: a number of seconds, or an ISO-8601 string (a naive
    time is UTC); None for anything else. Milliseconds are the caller's to divide."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    return None


class FreeText(str):
    """A custom tool's free-form input (Codex's ``apply_patch`` patch): :func:`render_call`
    shows it as itself, as the model wrote it."""


def _command_text(value: Any) -> str | None:
    """A shell command as text: a string as is; an argv list as the script of ``bash -lc
    SCRIPT`` when it is one (Codex's ``shell`` tool), else the words quoted for a shell."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].endswith("sh"):
            return value[2]
        return shlex.join(value)
    return None


def render_call(name: str, arguments: Any) -> str:
    """A tool call as the text a replayed step shows for it.

    Args:
        name: the tool's name.
        arguments: a dict of arguments, a JSON object as text, or :class:`FreeText` (a custom
            tool's input, e.g. Codex's ``apply_patch``).

    Returns:
        For a shell or Python tool (:data:`SHELL_ARGUMENT`), the command itself; for
        :class:`FreeText`, the text; for a string that is not JSON, the name and the string; for
        any other call, the name then one ``key: value`` line per argument, string values
        unescaped so file contents keep their real newlines.
    """
    if isinstance(arguments, FreeText):
        return str(arguments)
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return f"{name} {text}".strip()
    if not isinstance(arguments, dict):
        return name
    key = SHELL_ARGUMENT.get(name)
    if key is not None:
        command = _command_text(arguments.get(key))
        if command is not None:
            return command
    lines = [name]
    for k, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{k}: {shown}")
    return "\n".join(lines)


def content_text(value: Any) -> str:
    """Message content as text, leniently: a string; a list of parts whose text is taken from
    ``text`` (``{"type": "text"}``, ``input_text``, ``output_text``); a tool result's nested
    ``content``; images and other parts without text leave nothing. Used for agent logs,
    whose content shapes vary by provider and version."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [content_text(part) for part in value]
        return "\n".join(p for p in parts if p)
    if isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, str):
            return text
        if "content" in value:
            return content_text(value["content"])
    return ""


@dataclass
class _Draft:
    """A step being assembled: its prose parts and rendered calls, in order."""

    texts: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    observed: bool = False
    timestamp: float | None = None
    prompt_tokens: int | None = None


class TrajectoryBuilder:
    """Assembles a :class:`Trajectory` from the messages of a log that records tool calls with
    ids, in the order the log wrote them.

    Rules: system text before the first step is the system prompt; user text before it is the
    task, after it joins the observation of the latest step (what the model read next); each
    :meth:`step` opens a step, :meth:`add` adds text or calls to an open one (one response
    written as several records); a result joins the observation of the step that made its
    call, and a result whose call is unknown joins the latest step's and is reported; calls no
    result answers are reported when :meth:`build` runs.
    """

    def __init__(self, path: str, fmt: FormatName) -> None:
        self.path = path
        self.format: FormatName = fmt
        self.records = RecordTally()
        self._system: list[str] = []
        self._task: list[str] = []
        self._drafts: list[_Draft] = []
        self._owner: dict[str, int] = {}  # call id -> step index
        self._answered: set[str] = set()
        self._call_order: list[str] = []

    @property
    def steps(self) -> int:
        """Steps opened so far."""
        return len(self._drafts)

    def system(self, text: str) -> None:
        """System (or developer) text: the system prompt before the first step, later what the
        model reads next (it joins the latest step's observation)."""
        if not text:
            return
        if self._drafts:
            self._observe(len(self._drafts) - 1, text)
        else:
            self._system.append(text)

    def user(self, text: str) -> None:
        """User text: the task before the first step, later the latest step's observation."""
        if not text:
            return
        if self._drafts:
            self._observe(len(self._drafts) - 1, text)
        else:
            self._task.append(text)

    def step(self, timestamp: float | None = None, prompt_tokens: int | None = None) -> int:
        """Open a step (one model response); returns its index."""
        self._drafts.append(_Draft(timestamp=timestamp, prompt_tokens=prompt_tokens))
        return len(self._drafts) - 1

    def add(
        self,
        index: int,
        text: str = "",
        call: tuple[str, str, Any] | None = None,
        *,
        expects_result: bool = True,
    ) -> None:
        """Add prose and/or one tool call to step ``index``.

        Args:
            index: a step :meth:`step` returned.
            text: prose the model wrote ("" for none).
            call: ``(id, name, arguments)``: arguments as :func:`render_call` takes them.
            expects_result: False for a call the provider ran itself (a web search), whose
                result is not a tool message: never reported as unanswered.
        """
        draft = self._drafts[index]
        if text:
            draft.texts.append(text)
        if call is not None:
            call_id, name, arguments = call
            draft.actions.append(render_call(name, arguments))
            if expects_result and call_id:
                if call_id not in self._owner:
                    self._call_order.append(call_id)
                self._owner[call_id] = index

    def set_prompt_tokens(self, index: int, tokens: int | None) -> None:
        """Record the provider's prompt tokens for step ``index`` (kept if already set)."""
        draft = self._drafts[index]
        if draft.prompt_tokens is None and tokens is not None:
            draft.prompt_tokens = tokens

    def result(self, call_id: str, text: str | None) -> None:
        """A tool result: joins the observation of the step that made call ``call_id``; an
        unknown id is reported (and its text joins the latest step's, or the task before any
        step: it was in the model's context either way). ``text`` None: the call is answered
        by text already shown (one message answering several calls)."""
        owner = self._owner.get(call_id)
        if owner is None:
            self.records.results_without_call.append(call_id)
            if text is not None and self._drafts:
                self._observe(len(self._drafts) - 1, text)
            elif text:
                self._task.append(text)
            return
        self._answered.add(call_id)
        if text is not None:
            self._observe(owner, text)

    def boundary(self) -> None:
        """The agent compacted its context here: the next step is the first after it."""
        self.records.compactions.append(len(self._drafts))

    def _observe(self, index: int, text: str) -> None:
        draft = self._drafts[index]
        draft.observed = True
        draft.observations.append(text)

    def build(self) -> Trajectory:
        """The trajectory, with unanswered calls reported in its ``records``."""
        self.records.calls_without_result.extend(
            c for c in self._call_order if c not in self._answered
        )
        steps = []
        for i, draft in enumerate(self._drafts):
            prose = "\n\n".join(t for t in draft.texts if t)
            action = "\n".join(a for a in draft.actions if a)
            steps.append(
                ReplayStep(
                    index=i,
                    assistant=with_action(prose, action),
                    action=action,
                    observation="\n".join(draft.observations) if draft.observed else None,
                    timestamp=draft.timestamp,
                    recorded_prompt_tokens=draft.prompt_tokens,
                )
            )
        return Trajectory(
            self.path,
            self.format,
            "\n\n".join(self._system),
            "\n\n".join(self._task),
            steps,
            self.records,
        )
