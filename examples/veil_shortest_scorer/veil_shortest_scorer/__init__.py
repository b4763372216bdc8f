"""An example scorer plugin for veil: retention = 1 / (1 + tokens / 100), halved for items more
than five steps old. Pinned items score 1. Installed, it answers ``score`` before the default
FSRS scorer: pluggy asks the plugin registered last first, and veil registers entry points in
name order (``veil_shortest_scorer`` after ``veil_fsrs``); blocking ``veil_fsrs`` is optional. The
default eviction policy (entry point ``veil_fsrs_evict``) keeps working on these scores."""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.hookspecs import hookimpl

SCORER_NAME = "shortest"


@hookimpl
def score(session: Any, items: Any, task_tags: frozenset[str], now: float) -> np.ndarray:
    """Scores in [0, 1] from token counts and age in steps (deterministic)."""
    cols = items.columns()
    scores = 1.0 / (1.0 + cols["tokens"] / 100.0)
    current = max(getattr(session, "step", 0), int(cols["step"].max(initial=0)))
    scores = np.where(current - cols["step"] > 5, scores / 2.0, scores)
    return np.where(cols["pinned"], 1.0, scores)
