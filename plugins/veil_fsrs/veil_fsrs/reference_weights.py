"""How likely the agent's next steps use an identifier it has seen: the value of a name when
eviction chooses what the prompt keeps (issue 29).

A coding agent's next action mostly reuses names from its context: file paths, symbols, line and
issue numbers (the identifier shape of DESIGN.md "Measures",
:func:`veil.core.prompt.tags.identifier_tokens`). Which ones it reuses is predictable from four
things the session already knows about each name, at the current step:

* ``assistant``: how many of the agent's own turns mentioned it (names it works with);
* ``results``: how many tool results held it (names the code keeps showing);
* ``age``: steps since any item last held it;
* ``assistant_age``: steps since a turn of the agent last mentioned it (None: never).

:func:`reference_weight` returns the empirical probability that the name is a *reference*
(DESIGN.md "Measures": used by one of the agent's next :data:`HORIZON` steps after it appeared in
a tool result) for those four, bucketed, from a table fitted on the 84 recorded mini-swe-agent
sessions of ``../shared/data`` by ``bench/fit_reference_weights.py`` (which regenerates
``data/reference_weights.json``; additive smoothing, a coarser table for cells seen rarely).
Fitted on two of the four folders and used on the other two, the replay misses 2% more than
with the table fitted on all four (bench/RESULTS.md, issue 29), so the table carries what coding
agents do rather than those 84 sessions.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from functools import lru_cache
from importlib import resources

__all__ = [
    "AGE_BOUNDS",
    "HORIZON",
    "MAX_COUNT",
    "age_bucket",
    "count_bucket",
    "features",
    "reference_weight",
    "weight_table",
]

HORIZON = 5
"""Steps ahead the table predicts a use within (about the steps between two eviction passes)."""

AGE_BOUNDS = (1, 2, 4, 8, 16, 32)
"""Upper bounds of the age buckets, in steps: 0-1, 2, 3-4, 5-8, 9-16, 17-32, more."""

MAX_COUNT = 6
"""Mention counts of the agent's turns are bucketed 0..6 (6 = six or more)."""

RESULT_COUNT_MAX = 3
"""Tool-result counts are bucketed 0..3 (3 = three or more)."""

NEVER = len(AGE_BOUNDS) + 2
"""The ``assistant_age`` bucket of a name no turn mentioned."""


def age_bucket(age: float) -> int:
    """The bucket of an age in steps (:data:`AGE_BOUNDS`; negative ages count as 0)."""
    return bisect_left(AGE_BOUNDS, age)


def count_bucket(count: int, top: int = MAX_COUNT) -> int:
    """``count`` capped at ``top``."""
    return min(max(int(count), 0), top)


def features(
    assistant: int, results: int, age: float, assistant_age: float | None
) -> tuple[int, int, int, int]:
    """The table key of a name: ``(assistant count bucket, age bucket, result count bucket,
    assistant age bucket)``."""
    return (
        count_bucket(assistant),
        age_bucket(age),
        count_bucket(results, RESULT_COUNT_MAX),
        NEVER if assistant_age is None else age_bucket(assistant_age),
    )


@lru_cache(maxsize=1)
def weight_table() -> list[list[list[list[float]]]]:
    """Every cell's probability as nested lists ``[assistant][age][results][assistant_age]``
    (buckets as :func:`features` gives them): the fitted cell, else its coarse cell
    ``(assistant, age)``, else the overall rate. Read once from
    ``data/reference_weights.json``."""
    raw = json.loads(
        resources.files("veil_fsrs").joinpath("data/reference_weights.json").read_text("utf-8")
    )
    fine = {tuple(int(x) for x in key.split(",")): float(p) for key, p in raw["table"].items()}
    coarse = {tuple(int(x) for x in key.split(",")): float(p) for key, p in raw["coarse"].items()}
    prior = float(raw["prior"])
    ages = len(AGE_BOUNDS) + 1
    return [
        [
            [
                [fine.get((a, g, r, s), coarse.get((a, g), prior)) for s in range(NEVER + 1)]
                for r in range(RESULT_COUNT_MAX + 1)
            ]
            for g in range(ages)
        ]
        for a in range(MAX_COUNT + 1)
    ]


def reference_weight(
    assistant: int, results: int, age: float, assistant_age: float | None
) -> float:
    """Probability in [0, 1] that a name is used within the next :data:`HORIZON` steps.

    Args:
        assistant: turns of the agent that mentioned it so far.
        results: tool results (and other items) that held it so far.
        age: steps since an item last held it.
        assistant_age: steps since a turn last mentioned it; None when none did.

    Returns:
        The fitted probability of its cell (``data/reference_weights.json``); for a cell the
        fit saw too rarely, that of the coarser cell ``(assistant count, age)``; else the
        overall rate.
    """
    a, g, r, s = features(assistant, results, age, assistant_age)
    return weight_table()[a][g][r][s]
