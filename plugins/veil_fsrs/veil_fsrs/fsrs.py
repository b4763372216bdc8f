"""FSRS-6 memory model: retrievability, initial state, and the update after a review.

Every formula here is FSRS-6 (the Free Spaced Repetition Scheduler, version 6, as implemented by
the ``fsrs`` PyPI package, which the tests use as an oracle). Time is in days (fractions
allowed), stability ``S`` in days, difficulty ``D`` in [1, 10], grades 1 (Again), 2 (Hard),
3 (Good), 4 (Easy). All functions accept floats or numpy arrays (broadcast together) and return
``numpy.float64`` / ``numpy.ndarray`` of float64.

Two deliberate differences from the package's scheduler (DESIGN.md "FSRS clock"):

* veil always uses the long-term formulas, even for reviews less than a day apart; the package
  switches to a short-term formula below one day (so the oracle tests use whole days >= 1).
* stability is capped: :data:`LIVE_CAP_DAYS` (7) in the live window and
  :data:`DURABLE_CAP_DAYS` (365) in the durable store (seed 002; ``context.liveCapDays`` /
  ``context.durableCapDays``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ArrayLike = Any
"""A float, a sequence of floats or a numpy array (broadcast by numpy)."""

DEFAULT_PARAMETERS: tuple[float, ...] = (
    0.212,
    1.2931,
    2.3065,
    8.2956,
    6.4133,
    0.8334,
    3.0194,
    0.001,
    1.8722,
    0.1666,
    0.796,
    1.4835,
    0.0614,
    0.2629,
    1.6483,
    0.6014,
    1.8729,
    0.5425,
    0.0912,
    0.0658,
    0.1542,
)
"""FSRS-6 default parameters w0..w20 (w20 = 0.1542 is the decay of the forgetting curve)."""

DEFAULT_DECAY: float = DEFAULT_PARAMETERS[20]
STABILITY_MIN: float = 0.001
"""Smallest stability in days (FSRS-6 lower bound), also used to avoid dividing by zero."""
MIN_DIFFICULTY: float = 1.0
MAX_DIFFICULTY: float = 10.0
LIVE_CAP_DAYS: float = 7.0
"""Stability cap in the live context window, days (seed 002)."""
DURABLE_CAP_DAYS: float = 365.0
"""Stability cap in the durable store, days (seed 002)."""

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4


def curve_factor(decay: float = DEFAULT_DECAY) -> float:
    """Return F = 0.9^(-1/decay) - 1, chosen so that R(S, S) = 0.9 (FSRS-6).

    Raises:
        ValueError: ``decay`` is not > 0.
    """
    if not decay > 0:
        raise ValueError(f"decay must be > 0, got {decay!r}")
    return 0.9 ** (-1.0 / decay) - 1.0


def retrievability(
    elapsed_days: ArrayLike, stability: ArrayLike, decay: float = DEFAULT_DECAY
) -> Any:
    """FSRS-6 retrievability R(t, S) = (1 + F*t/S)^(-decay), in (0, 1].

    Args:
        elapsed_days: time since the last access, days (negative values count as 0).
        stability: stability, days (values below :data:`STABILITY_MIN` are raised to it).
        decay: FSRS-6 w20 (default 0.1542; ``context.decay``).

    Returns:
        float64 scalar or array (broadcast shape); R(0, S) = 1 and R(S, S) = 0.9.
    """
    t = np.maximum(np.asarray(elapsed_days, dtype=np.float64), 0.0)
    s = np.maximum(np.asarray(stability, dtype=np.float64), STABILITY_MIN)
    return (1.0 + curve_factor(decay) * t / s) ** (-decay)


def _grade_array(grade: ArrayLike) -> np.ndarray:
    g = np.asarray(grade)
    if g.size and (not np.issubdtype(g.dtype, np.integer) or g.min() < AGAIN or g.max() > EASY):
        raise ValueError(f"grade must be an integer 1..4 (Again, Hard, Good, Easy), got {grade!r}")
    return g.astype(np.int64)


def _params(w: Sequence[float]) -> tuple[float, ...]:
    if len(w) != 21:
        raise ValueError(f"FSRS-6 needs 21 parameters w0..w20, got {len(w)}")
    return tuple(float(x) for x in w)


def initial_stability(grade: ArrayLike, w: Sequence[float] = DEFAULT_PARAMETERS) -> Any:
    """Stability after the first review, days: S0(G) = w[G-1] (FSRS-6), at least STABILITY_MIN.

    Raises:
        ValueError: a grade outside 1..4.
    """
    p = _params(w)
    g = _grade_array(grade)
    return np.maximum(np.asarray(p[:4], dtype=np.float64)[g - 1], STABILITY_MIN)


def initial_difficulty(
    grade: ArrayLike, w: Sequence[float] = DEFAULT_PARAMETERS, clamp: bool = True
) -> Any:
    """Difficulty after the first review: D0(G) = w4 - e^(w5*(G-1)) + 1 (FSRS-6).

    Args:
        clamp: clip to [1, 10] (the unclamped D0(Easy) is the mean-reversion target).

    Raises:
        ValueError: a grade outside 1..4.
    """
    p = _params(w)
    g = _grade_array(grade)
    d = p[4] - np.exp(p[5] * (g - 1.0)) + 1.0
    return np.clip(d, MIN_DIFFICULTY, MAX_DIFFICULTY) if clamp else d


def next_difficulty(
    difficulty: ArrayLike, grade: ArrayLike, w: Sequence[float] = DEFAULT_PARAMETERS
) -> Any:
    """Difficulty after a review (FSRS-6): linear damping, then mean reversion to D0(Easy).

    ``dD = -w6*(G-3)``; ``D' = D + dD*(10-D)/9``; ``D'' = w7*D0(4) + (1-w7)*D'``; clip [1, 10].

    Raises:
        ValueError: a grade outside 1..4.
    """
    p = _params(w)
    g = _grade_array(grade)
    d = np.asarray(difficulty, dtype=np.float64)
    delta = -p[6] * (g - 3.0)
    damped = d + delta * (10.0 - d) / 9.0
    target = p[4] - math.exp(p[5] * 3.0) + 1.0  # D0(Easy), unclamped
    return np.clip(p[7] * target + (1.0 - p[7]) * damped, MIN_DIFFICULTY, MAX_DIFFICULTY)


def recall_stability(
    stability: ArrayLike,
    difficulty: ArrayLike,
    r: ArrayLike,
    grade: ArrayLike = GOOD,
    w: Sequence[float] = DEFAULT_PARAMETERS,
) -> Any:
    """Stability after a successful recall (grades 2..4), FSRS-6 long-term formula, days.

    ``S' = S * (1 + e^w8 * (11-D) * S^(-w9) * (e^(w10*(1-R)) - 1) * hard * easy)`` with
    ``hard = w15`` for Hard, ``easy = w16`` for Easy, else 1. The increment grows as R falls
    (seed 002: "an item recalled late gains more than one recalled constantly").

    Raises:
        ValueError: a grade outside 1..4.
    """
    p = _params(w)
    g = _grade_array(grade)
    s = np.maximum(np.asarray(stability, dtype=np.float64), STABILITY_MIN)
    d = np.asarray(difficulty, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    hard = np.where(g == HARD, p[15], 1.0)
    easy = np.where(g == EASY, p[16], 1.0)
    growth = math.exp(p[8]) * (11.0 - d) * s ** (-p[9]) * np.expm1(p[10] * (1.0 - r))
    return s * (1.0 + growth * hard * easy)


def forget_stability(
    stability: ArrayLike,
    difficulty: ArrayLike,
    r: ArrayLike,
    w: Sequence[float] = DEFAULT_PARAMETERS,
) -> Any:
    """Stability after a lapse (grade Again), FSRS-6, days.

    ``min(w11 * D^(-w12) * ((S+1)^w13 - 1) * e^(w14*(1-R)), S / e^(w17*w18))``.
    """
    p = _params(w)
    s = np.maximum(np.asarray(stability, dtype=np.float64), STABILITY_MIN)
    d = np.asarray(difficulty, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    long_term = p[11] * d ** (-p[12]) * ((s + 1.0) ** p[13] - 1.0) * np.exp(p[14] * (1.0 - r))
    return np.minimum(long_term, s / math.exp(p[17] * p[18]))


def next_stability(
    stability: ArrayLike,
    difficulty: ArrayLike,
    r: ArrayLike,
    grade: ArrayLike = GOOD,
    w: Sequence[float] = DEFAULT_PARAMETERS,
    cap: float | None = None,
) -> Any:
    """Stability after a review at retrievability ``r``: recall formula for grades 2..4,
    forget formula for grade 1; at least STABILITY_MIN, at most ``cap`` days when given.

    Raises:
        ValueError: a grade outside 1..4, or ``cap`` not > 0.
    """
    g = _grade_array(grade)
    s_new = np.where(
        g == AGAIN,
        forget_stability(stability, difficulty, r, w),
        recall_stability(stability, difficulty, r, np.where(g == AGAIN, GOOD, g), w),
    )
    s_new = np.maximum(s_new, STABILITY_MIN)
    if cap is not None:
        if not cap > 0:
            raise ValueError(f"cap must be > 0 days, got {cap!r}")
        s_new = np.minimum(s_new, cap)
    return s_new


def review(
    stability: ArrayLike,
    difficulty: ArrayLike,
    elapsed_days: ArrayLike,
    grade: ArrayLike = GOOD,
    w: Sequence[float] = DEFAULT_PARAMETERS,
    cap: float | None = LIVE_CAP_DAYS,
) -> tuple[Any, Any]:
    """Apply one review (an access, grade Good by default) ``elapsed_days`` after the last one.

    R is computed with the decay w20 of ``w``; the long-term formulas apply at any elapsed time
    (DESIGN.md "FSRS clock"). ``cap`` defaults to the live-window cap (7 days); pass
    :data:`DURABLE_CAP_DAYS` for the durable store or None for the uncapped FSRS-6 value.

    Returns:
        ``(new_stability_days, new_difficulty)``.

    Raises:
        ValueError: a grade outside 1..4, or ``cap`` not > 0.
    """
    p = _params(w)
    r = retrievability(elapsed_days, stability, p[20])
    return next_stability(stability, difficulty, r, grade, p, cap), next_difficulty(
        difficulty, grade, p
    )


def cap_for_tier(
    tier: str, live_cap_days: float = LIVE_CAP_DAYS, durable_cap_days: float = DURABLE_CAP_DAYS
) -> float:
    """Stability cap in days for a tier: ``"live"`` -> the live cap, anything else (warm, cold,
    durable) -> the durable cap (seed 002: "seven days in the live context window and a year in
    the durable store")."""
    return live_cap_days if tier == "live" else durable_cap_days
