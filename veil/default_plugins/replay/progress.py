"""The progress bar of ``veil replay`` (rich), on stderr and only on a terminal.

The runner (:func:`veil.default_plugins.replay.runner.replay`) asks every policy for every step
in order; the bar learns of each step through :class:`ProgressTick`, a policy that sends
nothing and counts the steps it is asked for, so the runner needs no callback of its own.
``run_replay`` removes the tick's figures from the result before anyone reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ProgressTick:
    """A policy that advances the bar once per replayed step and sends nothing (no message,
    no tokens); the runner asks it before the other policies of each step, so the bar shows
    the step under way."""

    name = "progress (not a policy)"

    def __init__(self, advance: Callable[[], None]) -> None:
        self._advance = advance

    def prompt_for_step(self, traj: Any, t: int) -> tuple[list[dict[str, Any]], str]:
        """Advance the bar; the prompt is empty."""
        self._advance()
        return [], ""


class ReplayProgress:
    """A rich progress bar on stderr with one task at a time (reading sessions, then replaying
    steps), removed when done. Disabled, every method does nothing (``--json``, or stderr is not
    a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ReplayProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, description: str, total: int) -> None:
        """Show a new task of ``total`` units (the previous one is finished)."""
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(description, total=total)

    def advance(self) -> None:
        """One unit of the current task is done."""
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)
