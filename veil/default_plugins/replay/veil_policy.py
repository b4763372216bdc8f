"""veil as a replay policy: recorded sessions fed step by step through a real veil session.

The recorded assistant messages stand in for the model and the recorded observations for the
tools; everything else is veil's own machinery, unchanged: ``capture``, ``score``, ``evict``
(tiers, pointer stubs), the manifest and system sections, observation masking and compaction
as configured (``--compaction``). Each step is recorded by veil's turn driver
(:mod:`veil.core.turn`), as the loop records a reply and its tool call. The prompt for step t is
what :func:`build_prompt` returns after steps 0..t-1 were ingested, so it cannot depend on later
messages.

Token accounting matches DESIGN.md "Measures": cl100k_base over message contents, no
per-message overhead, tool schemas and tool-call arguments not counted (the command text is in
the assistant content already). The window veil manages is the budget itself.

What may hold a reference (the *match text*, :mod:`veil.default_plugins.replay.measures`): the
system message's sections but the manifest, and the contents of the other messages but the
pointer stubs and the context notes; inside those contents, a line veil wrote itself is left
out too (:meth:`RecordedText.veil_marker_line`: an elision marker ``[12 lines repeated later in this
conversation]``, a pointer note, the mask of a masked result, the marker lines of an excerpt).
Text veil writes never holds a reference, under either measure.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from veil import (
    LLM,
    Completion,
    ToolResult,
    build_prompt,
    cl100k_count,
    end_iteration,
    record_assistant,
    record_tool_call,
    record_tool_result,
    record_user,
    seeded_ids,
    shown_lines,
)
from veil.default_plugins.capture.rules import assistant_text
from veil.default_plugins.replay.formats import Trajectory
from veil.default_plugins.replay.measures import SEPARATOR, identifier_tokens

CompactionMode = Literal["none", "masking", "full", "both"]
STEP_SECONDS = 30.0  # DESIGN.md: 30 s per step when a format records no time
REPLAY_EPOCH = 1_700_000_000.0
_EXIT_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
FSRS_EVICTION_PLUGIN = "veil_fsrs_evict"
"""The plugin whose turn embeddings the replay batches (see ``_embed_turns_in_one_batch``)."""


class ReplayModel:
    """The ChatModel of a replay: counts cl100k_base tokens; as a summariser (full compaction)
    it answers with a deterministic extractive summary, since no model runs during a replay.

    Args:
        budget: the context window it reports, in tokens.
    """

    name = "replay-cl100k"
    provider = "replay"

    def __init__(self, budget: int) -> None:
        self.context_window = budget
        self.calls = 0

    def count_tokens(self, messages: list[dict] | str) -> int:
        """cl100k_base tokens of a text, or of the contents of messages."""
        if isinstance(messages, str):
            return cl100k_count(messages)
        return sum(cl100k_count(m.get("content") or "") for m in messages)

    def complete(
        self, messages: list[dict], tools: Any = None, on_token: Callable[[str], None] | None = None
    ) -> Completion:
        """An extractive summary: the identifiers the messages mention, newest first, within
        ~300 tokens (a stand-in summariser so compaction can be measured offline)."""
        self.calls += 1
        seen: dict[str, None] = {}
        for m in reversed(messages):
            for tok in sorted(identifier_tokens(m.get("content") or "")):
                seen.setdefault(tok, None)
        text, out = "Earlier steps mentioned: ", []
        for tok in seen:
            if cl100k_count(text + " ".join(out + [tok])) > 300:
                break
            out.append(tok)
        content = text + " ".join(out)
        return Completion(
            message={"role": "assistant", "content": content},
            usage={
                "prompt_tokens": self.count_tokens(messages),
                "completion_tokens": cl100k_count(content),
            },
            model=self.name,
            provider=self.provider,
        )


def is_bracketed(line: str) -> bool:
    """Whether ``line``, blanks stripped, is one ``[...]``: the shape of every line veil writes
    into a message it sends (stubs, masks, elision markers, pointer notes, excerpt markers)."""
    text = line.strip()
    return len(text) >= 2 and text[0] == "[" and text[-1] == "]"


class RecordedText:
    """What the recording showed before the step being built (system prompt, task, assistant
    turns and observations), as one growing text, to tell veil's own lines from recorded ones.

    A line of veil's prompt is *veil's own* (:meth:`veil_marker_line`) when it is bracketed
    (:func:`is_bracketed`) and occurs nowhere in the recorded text: a recorded line such as
    ``[tool.pytest]`` stays content, and so does a line cut short by a pointer (a substring of
    what was recorded). Answers are cached per line; a line not found is searched again only
    in text added since.
    """

    def __init__(self) -> None:
        self._pending: list[str] = []  # added since the text was last joined
        self._text = ""
        self._seen: dict[str, int] = {}  # line -> length of the text searched (-1: found)

    def add(self, text: str) -> None:
        """Append one recorded text."""
        self._pending.append(text)

    def _joined(self) -> str:
        if self._pending:  # joined only when a bracketed line must be looked up
            self._text = SEPARATOR.join([self._text, *self._pending])
            self._pending = []
        return self._text

    def veil_marker_line(self, line: str) -> bool:
        """Whether ``line`` is a line veil wrote itself (bracketed, and recorded nowhere)."""
        if not is_bracketed(line):
            return False
        searched = self._seen.get(line, 0)
        if searched < 0:
            return False
        text = self._joined()
        # a match may start up to len(line) - 1 characters before the text searched last time
        if text.find(line, max(0, searched - len(line))) >= 0:
            self._seen[line] = -1
            return False
        self._seen[line] = len(text)
        return True

    def content(self, text: str) -> str:
        """``text`` without the lines veil wrote itself (:meth:`veil_marker_line`)."""
        if "[" not in text:
            return text
        lines = text.split("\n")
        kept = [line for line in lines if not self.veil_marker_line(line)]
        return text if len(kept) == len(lines) else "\n".join(kept)


def _outcome(observation: str) -> str | None:
    m = _EXIT_CODE.search(observation[:200])
    if m:
        return "pass" if m.group(1) == "0" else "fail"
    return None


class VeilReplayPolicy:
    """The ``veil`` policy of :func:`veil.default_plugins.replay.runner.replay`.

    Args:
        traj: the trajectory (one policy per trajectory).
        budget: the token budget (cl100k_base); veil manages a window of exactly this size.
        project_dir: the project whose settings and plugins are used (default: current dir).
        compaction: ``none`` (no masking, no full compaction), ``masking``, ``full`` or ``both``;
            None keeps what the settings say.
        disable: plugins to block for the replay.
        summariser: the ``compact`` model role for full compaction (for example the bundled
            model, to see real summaries); default: :class:`ReplayModel`'s offline extractive
            summary. The replay's own token counting stays cl100k_base either way.
        budget_from_window: ``budget`` is the model's context window and no budget is set
            (``context.budgetTokens`` unset), as for a user on a large-window model: the eviction
            policy may aim lower (veil_fsrs' ``context.targetTokens``). Default: ``budget`` is
            set as ``context.budgetTokens`` (the frontier's knob).

    Attributes:
        evictions: items evicted so far. over_budget: ``[(step, tokens, reason)]`` of steps whose
            prompt exceeded the budget.
    """

    name = "veil"

    def __init__(
        self,
        traj: Trajectory,
        budget: int,
        *,
        project_dir: str | Path | None = None,
        compaction: CompactionMode | None = None,
        disable: tuple[str, ...] = (),
        summariser: Any = None,
        budget_from_window: bool = False,
    ) -> None:
        from veil import load_config, open_veil

        config = load_config(project_dir)
        settings = config.settings
        settings.loop.completion_reserve = 0
        # the budget the replay is run at is the user's own (context.budgetTokens), unless it
        # stands for a model's window alone (a large-window session: the eviction policy's
        # own target size may then apply)
        settings.context.budget_tokens = None if budget_from_window else budget
        if settings.context.rescue_embeddings == "background":
            settings.context.rescue_embeddings = "sync"  # a replay must be deterministic
        if traj.system:
            settings.loop.system_prompt = traj.system
        if compaction is not None:
            masking = compaction in ("masking", "both")
            settings.compaction.observation_masking_turns = 10 if masking else 0
            self._full = compaction in ("full", "both")
        else:
            self._full = True
        if not self._full:
            settings.compaction.threshold = 1.0  # never reached below: see prompt_for_step
        self.model = ReplayModel(budget)
        shared = settings.store.url is not None
        if shared:  # `veil replay --store URL`: its sessions under a project of their own
            settings.store.project = f"{settings.store.project_name(config.project_dir)}:replay"
        self.veil = open_veil(
            config.project_dir,
            config=config,
            disable=disable,
            llm=LLM(config, models={"main": self.model, "compact": summariser or self.model}),
            db_path=None if shared else ":memory:",
        )
        self.session = self.veil.new_session()
        if not self._full:
            self.session.snapshot.setdefault("defaultCompaction", {})["enabled"] = False
        self.session.message_overhead_tokens = 0
        self.session.count_tool_arguments = False
        # nothing is sent: a step whose protected context alone exceeds the budget is measured
        # and reported in over_budget, as with budgets the fixed parts alone fill
        self.session.refuse_oversized_prompt = False
        self.budget = budget
        self.ingested = 0
        self.over_budget: list[tuple[int, int, str]] = []
        self._start = next((s.timestamp for s in traj.steps if s.timestamp is not None), None)
        self._task_sent = False
        self._batch_embedded = False
        self._recorded = RecordedText()
        for text in (traj.system, traj.task):
            self._recorded.add(text)
        self.traj = traj
        self._ids = random.Random(f"{Path(traj.path).name}:{len(traj.steps)}")

    @property
    def evictions(self) -> int:
        """Items evicted so far in this trajectory (from the event log)."""
        return self.veil.store.eviction_count(self.session.id)

    def _time(self, t: int) -> float:
        step = self.traj.steps[t] if t < len(self.traj.steps) else None
        if step is not None and step.timestamp is not None:
            return step.timestamp
        base = self._start if self._start is not None else REPLAY_EPOCH
        return base + STEP_SECONDS * t

    def _assistant_message(self, t: int) -> dict[str, Any]:
        """Recorded step ``t`` as the assistant message veil's loop would have stored."""
        step = self.traj.steps[t]
        msg: dict[str, Any] = {"role": "assistant", "content": step.assistant}
        if step.observation is not None:
            arguments = json.dumps({"command": step.action})
            msg["tool_calls"] = [
                {
                    "id": f"call_{t}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": arguments},
                }
            ]
        return msg

    def _embed_turns_in_one_batch(self) -> None:
        """Once the session embeds turns (veil_fsrs' eviction policy does from its first
        eviction on), embed every turn of the recording in one batch: the vectors land in the
        content-hash cache, and each turn then finds its own when it is captured. Batching is
        ~10x faster than one turn at a time; no prompt can see a later turn this way (a vector
        is only read for a captured item). The policy says whether it embeds through
        ``veil_fsrs.evict_plugin.embeds_turns``; with it blocked or absent nothing is."""
        if self._batch_embedded:
            return
        policy = self.veil.pm.get_plugin(FSRS_EVICTION_PLUGIN)
        embeds_turns = getattr(policy, "embeds_turns", None)
        if embeds_turns is None or not embeds_turns(self.session):
            return
        self._batch_embedded = True
        texts = [self.traj.task] + [
            assistant_text(self._assistant_message(t)) for t in range(len(self.traj.steps))
        ]
        try:
            self.veil.tiers.embedder.embed([t for t in texts if t.strip()])
        except Exception:  # noqa: BLE001 - the session's own embedding reports the failure
            return

    def _ingest(self, t: int) -> None:
        """Feed recorded step ``t`` through the turn driver (:mod:`veil.core.turn`), as veil's
        loop records a reply: the assistant message, then its one tool call and the recorded
        observation as its result, then the end of the iteration. A step without an
        observation (the final answer) is the reply alone."""
        session, step = self.session, self.traj.steps[t]
        session.step = t + 1
        session.clock_override = self._time(t)
        msg = self._assistant_message(t)
        idx = record_assistant(session, msg)
        if step.observation is None:
            return
        call_id, args = f"call_{t}", {"command": step.action}
        record_tool_call(session, session.messages[idx], "bash", call_id, args)
        result = ToolResult(step.observation, outcome=_outcome(step.observation))
        record_tool_result(session, "bash", call_id, result, args)
        end_iteration(session, t + 1)

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[dict[str, Any]], str]:
        """The prompt veil would send for step ``t`` and the text references may match. Item
        ids come from a generator seeded per recording, so a replay gives the same figures
        every time."""
        with seeded_ids(self._ids):
            return self._prompt_for_step(traj, t)

    def _prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[dict[str, Any]], str]:
        session = self.session
        if not self._task_sent:
            session.clock_override = self._time(0)
            record_user(session, traj.task)  # at step 0: no step is ingested yet
            self._task_sent = True
        while self.ingested < t:
            self._embed_turns_in_one_batch()
            self._ingest(self.ingested)
            recorded = traj.steps[self.ingested]
            self._recorded.add(recorded.assistant)
            if recorded.observation is not None:
                self._recorded.add(recorded.observation)
            self.ingested += 1
        session.step = t + 1
        session.clock_override = self._time(t)
        prompt = build_prompt(session)
        messages = prompt.messages
        tokens = self.model.count_tokens(messages)
        if tokens > self.budget:
            self.over_budget.append((t, tokens, "protected context alone exceeds the budget"))
        stubs = set(session.stubs.values())
        # an excerpt holds its item's lines verbatim; its markers are veil's own text
        excerpts = {
            session.stubs[item.message_index]: "\n".join(shown_lines(item.content, item.excerpt))
            for item in session.paged_out.values()
            if item.excerpt and item.message_index in session.stubs
        }
        kept = [s.text for s in prompt.sections if not s.name.startswith("manifest")]
        # the context notes hold the manifest and the volatile sections already counted above
        notes = [n for n in (prompt.note, prompt.anchored_note) if n is not None]
        for m in messages[1:]:
            content = m.get("content")
            if any(m is n for n in notes):
                continue
            if content in excerpts:
                kept.append(excerpts[content])
            elif content not in stubs:
                kept.append(self._recorded.content(content or ""))
        return messages, SEPARATOR.join(kept)

    def close(self) -> None:
        """Release the in-memory store."""
        self.veil.close()


def veil_policy_factory(
    project_dir: str | Path | None = None,
    compaction: CompactionMode | None = None,
    disable: tuple[str, ...] = (),
) -> Callable[[Trajectory, int], VeilReplayPolicy]:
    """A factory for :func:`veil.default_plugins.replay.runner.replay`: one fresh veil session per
    file."""

    def make(traj: Trajectory, budget: int) -> VeilReplayPolicy:
        return VeilReplayPolicy(
            traj, budget, project_dir=project_dir, compaction=compaction, disable=disable
        )

    return make
