"""The convergence monitor: watches the attempts against one goal and escalates in levels.

Seed 002: "A convergence monitor watches the record and escalates in levels. Progress counts as
a pass, a partial, a different error pattern, or a different file touched." Thresholds are
DESIGN.md's reference defaults, read from ``convergence`` in settings
(:class:`veil_convergence.settings.ConvergenceSettings`).

Levels:

* 0 ``none``.
* 1 ``soft``: the attempt's error fingerprint has now been seen ``soft_repeats`` (3) times in
  this goal.
* 2 ``strong``: ``strong_failures`` (5) consecutive failed attempts.
* 3 ``halt``: ``halt_without_progress`` (15) consecutive attempts without progress.

Counting rules, applied per attempt in this order:

* *progress*: outcome ``pass`` or ``partial``, or a fingerprint never seen before in this goal,
  or a target never seen before in this goal;
* consecutive failures: ``fail`` adds one, ``pass`` / ``partial`` reset to 0, ``uncertain``
  (a read, a search) leaves the count as it is;
* attempts without progress: reset to 0 on progress, else one more;
* the level is the highest condition that holds; without progress it never goes down (a warning
  stays until something changes), with progress it is recomputed (usually 0).

A new user message starts a new goal: :meth:`ConvergenceMonitor.reset`. Everything here is a pure
function of the attempts recorded, in order: the same attempts give the same levels.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from veil import Attempt

LEVEL_NAMES = ("none", "soft", "strong", "halt")
PROGRESS_OUTCOMES = frozenset({"pass", "partial"})


@dataclass(frozen=True)
class LevelChange:
    """The level moved after an attempt.

    Attributes:
        step: the attempt's step; old, new: levels (0-3);
        fingerprint: the failing approach's fingerprint (None if the attempts had no error);
        label: its readable label; action: the last action that produced it;
        message: one paragraph for the user and the model.
    """

    step: int
    old: int
    new: int
    fingerprint: str | None
    label: str | None
    action: str | None
    message: str


@dataclass
class _Goal:
    """What the monitor remembers about the current goal."""

    attempts: list[Attempt] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)
    last_action: dict[str, str] = field(default_factory=dict)
    last_seen: dict[str, int] = field(default_factory=dict)
    targets: set[str] = field(default_factory=set)
    consecutive_failures: int = 0
    without_progress: int = 0


class ConvergenceMonitor:
    """Records attempts against the current goal and computes the escalation level.

    Args:
        soft_repeats: times one fingerprint must be seen for level 1 (default 3, DESIGN.md).
        strong_failures: consecutive failures for level 2 (default 5).
        halt_without_progress: consecutive attempts without progress for level 3 (default 15).

    Raises:
        ValueError: a threshold below 1 (the message names the settings field).
    """

    def __init__(
        self, soft_repeats: int = 3, strong_failures: int = 5, halt_without_progress: int = 15
    ) -> None:
        for name, value in (
            ("softRepeats", soft_repeats),
            ("strongFailures", strong_failures),
            ("haltWithoutProgress", halt_without_progress),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"convergence.{name}: must be an integer >= 1, got {value!r}")
        self.soft_repeats = soft_repeats
        self.strong_failures = strong_failures
        self.halt_without_progress = halt_without_progress
        self.level = 0
        self.history: list[dict[str, Any]] = []
        """Every level increase, across goals: ``{"step", "level", "fingerprint"}``."""
        self.seen_fingerprints: set[str] = set()
        """Every fingerprint recorded, across goals (the session's distinct errors)."""
        self._goal = _Goal()
        self._last_change: LevelChange | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> ConvergenceMonitor:
        """Build from a :class:`veil_convergence.settings.ConvergenceSettings` (or anything with its
        three attributes)."""
        return cls(settings.soft_repeats, settings.strong_failures, settings.halt_without_progress)

    # -- state -------------------------------------------------------------------------------

    @property
    def attempts(self) -> list[Attempt]:
        """The attempts of the current goal, oldest first (a copy)."""
        return list(self._goal.attempts)

    @property
    def fingerprints(self) -> Counter[str]:
        """How often each fingerprint was seen in the current goal (a copy)."""
        return Counter(self._goal.counts)

    @property
    def consecutive_failures(self) -> int:
        """Failed attempts since the last pass or partial (``uncertain`` ones do not count)."""
        return self._goal.consecutive_failures

    @property
    def without_progress(self) -> int:
        """Attempts since the last one that made progress."""
        return self._goal.without_progress

    @property
    def last_change(self) -> LevelChange | None:
        """The latest level change (None before the first, and after :meth:`reset`)."""
        return self._last_change

    def reset(self) -> None:
        """Start a new goal (a new user message): counters, fingerprints and targets forgotten,
        level back to 0. :attr:`history` and :attr:`seen_fingerprints` are kept."""
        self._goal = _Goal()
        self.level = 0
        self._last_change = None

    # -- recording ---------------------------------------------------------------------------

    def record(self, attempt: Attempt, label: str | None = None) -> LevelChange | None:
        """Add one attempt; return the level change it caused, or None.

        Args:
            attempt: the attempt (``outcome`` one of pass / fail / partial / uncertain).
            label: readable name of ``attempt.fingerprint`` (shown in warnings).
        """
        goal = self._goal
        fp = attempt.fingerprint
        progress = attempt.outcome in PROGRESS_OUTCOMES
        if fp is not None:
            self.seen_fingerprints.add(fp)
            goal.counts[fp] += 1
            progress = progress or goal.counts[fp] == 1
            goal.labels.setdefault(fp, label or fp)
            goal.last_action[fp] = attempt.action
            goal.last_seen[fp] = len(goal.attempts)
        if attempt.target and attempt.target not in goal.targets:
            goal.targets.add(attempt.target)
            progress = True
        goal.attempts.append(attempt)

        if attempt.outcome == "fail":
            goal.consecutive_failures += 1
        elif attempt.outcome in PROGRESS_OUTCOMES:
            goal.consecutive_failures = 0
        goal.without_progress = 0 if progress else goal.without_progress + 1

        if goal.without_progress >= self.halt_without_progress:
            candidate = 3
        elif goal.consecutive_failures >= self.strong_failures:
            candidate = 2
        elif fp is not None and goal.counts[fp] >= self.soft_repeats:
            candidate = 1
        else:
            candidate = 0
        new = candidate if progress else max(candidate, self.level)
        old, self.level = self.level, new
        if new == old:
            return None
        focus = fp if candidate == 1 and fp is not None else self._most_repeated()
        change = LevelChange(
            step=attempt.step,
            old=old,
            new=new,
            fingerprint=focus,
            label=goal.labels.get(focus) if focus else None,
            action=goal.last_action.get(focus) if focus else attempt.action,
            message=self._message(new, focus),
        )
        if new > old:
            self.history.append({"step": attempt.step, "level": new, "fingerprint": focus})
        self._last_change = change
        return change

    def _most_repeated(self) -> str | None:
        """The fingerprint seen most often in this goal; ties go to the most recent."""
        goal = self._goal
        if not goal.counts:
            return None
        return max(goal.counts, key=lambda fp: (goal.counts[fp], goal.last_seen[fp]))

    # -- words -------------------------------------------------------------------------------

    def _message(self, level: int, fp: str | None) -> str:
        goal = self._goal
        what = f"`{goal.labels[fp]}`" if fp else "no recognised error"
        tried = (
            f" Last attempt: `{goal.last_action[fp]}`." if fp and goal.last_action.get(fp) else ""
        )
        if level == 0:
            return "Progress: the convergence warning is cleared."
        if level == 1:
            return (
                f"The same error has now occurred {goal.counts[fp]} times in this task: {what}."
                f"{tried} Repeating this approach will not help: read the error, look at the "
                "failing code, and change the approach."
            )
        if level == 2:
            return (
                f"{goal.consecutive_failures} attempts in a row have failed (most frequent "
                f"error: {what}).{tried} Stop and rethink: re-read the task and the latest "
                "output, and try a clearly different approach."
            )
        return (
            f"{goal.without_progress} attempts in a row made no progress (no pass, no new error, "
            f"no new file; most frequent error: {what}).{tried} The run is halted: ask the user "
            "how to proceed."
        )

    def prompt_text(self) -> str | None:
        """The system-prompt text naming the failing approach to avoid, or None at level 0."""
        if self.level == 0:
            return None
        fp = (
            self._last_change.fingerprint
            if self._last_change and self._last_change.new == self.level
            else self._most_repeated()
        )
        goal = self._goal
        lines = [
            f"Convergence warning, level {self.level} of 3 ({LEVEL_NAMES[self.level]}).",
            self._message(self.level, fp),
        ]
        if fp:
            action = goal.last_action.get(fp, "")
            lines.append(f"Approach to avoid: `{action}` -> {goal.labels[fp]}")
        return "\n".join(lines)
