"""FSRS-6 maths of veil_fsrs checked against the ``fsrs`` PyPI package (the oracle).

The package counts whole days and switches to a short-term formula below one day, so every
review here is at least one whole day after the previous one.
"""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from veil_fsrs import fsrs as vf

oracle = pytest.importorskip(
    "fsrs", reason="the fsrs package is the test oracle (pip install fsrs)"
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
SCHEDULER = oracle.Scheduler(enable_fuzzing=False)

# 4 stabilities x 3 elapsed times x 4 grades = 48 cases; difficulties cycle through 5 values.
_STABILITIES = (0.4, 2.5, 17.0, 180.0)
_ELAPSED = (1, 6, 45)
_DIFFICULTIES = (1.0, 3.3, 5.0, 7.7, 10.0)
CASES = [
    (s, t, _DIFFICULTIES[k % len(_DIFFICULTIES)], g)
    for k, (s, t, g) in enumerate(itertools.product(_STABILITIES, _ELAPSED, (1, 2, 3, 4)))
]


def _review_card(stability: float, elapsed: int, difficulty: float, grade: int):
    card = oracle.Card(
        card_id=1,
        state=oracle.State.Review,
        stability=stability,
        difficulty=difficulty,
        due=T0,
        last_review=T0,
    )
    reviewed, _ = SCHEDULER.review_card(card, oracle.Rating(grade), T0 + timedelta(days=elapsed))
    return card, reviewed


def test_parameters_are_the_fsrs6_defaults():
    assert tuple(oracle.scheduler.DEFAULT_PARAMETERS) == vf.DEFAULT_PARAMETERS
    assert vf.DEFAULT_PARAMETERS[20] == 0.1542
    assert len(CASES) >= 20


@pytest.mark.parametrize(("stability", "elapsed", "difficulty", "grade"), CASES)
def test_review_matches_oracle(stability, elapsed, difficulty, grade):
    card, reviewed = _review_card(stability, elapsed, difficulty, grade)
    r_oracle = SCHEDULER.get_card_retrievability(card, T0 + timedelta(days=elapsed))
    assert float(vf.retrievability(elapsed, stability)) == pytest.approx(r_oracle, rel=1e-12)
    new_s, new_d = vf.review(stability, difficulty, elapsed, grade, cap=None)
    assert float(new_s) == pytest.approx(reviewed.stability, rel=1e-12)
    assert float(new_d) == pytest.approx(reviewed.difficulty, rel=1e-12)


def test_review_is_vectorised_over_arrays():
    s, t, d, g = (np.array(column) for column in zip(*CASES, strict=True))
    new_s, new_d = vf.review(s, d, t, g, cap=None)
    expected = [_review_card(*case)[1] for case in CASES]
    np.testing.assert_allclose(new_s, [c.stability for c in expected], rtol=1e-12)
    np.testing.assert_allclose(new_d, [c.difficulty for c in expected], rtol=1e-12)


@pytest.mark.parametrize("grade", [1, 2, 3, 4])
def test_first_review_matches_oracle(grade):
    card = oracle.Card(card_id=2, due=T0)
    reviewed, _ = SCHEDULER.review_card(card, oracle.Rating(grade), T0)
    assert float(vf.initial_stability(grade)) == pytest.approx(reviewed.stability, rel=1e-12)
    assert float(vf.initial_difficulty(grade)) == pytest.approx(reviewed.difficulty, rel=1e-12)


@pytest.mark.parametrize("decay", [0.1542, 0.5, 1.0])
def test_retrievability_is_0_9_at_its_own_stability(decay):
    s = np.array([0.02, 0.083, 1.0, 7.0, 365.0])
    np.testing.assert_allclose(vf.retrievability(s, s, decay), 0.9, rtol=1e-12)
    assert float(vf.retrievability(0.0, 3.0, decay)) == 1.0


def test_retrievability_by_hand():
    # F = 0.9^(-1/0.1542) - 1; R(3, 1) = (1 + 3F)^-0.1542, computed here with math only.
    f = 0.9 ** (-1 / 0.1542) - 1
    assert float(vf.retrievability(3.0, 1.0)) == pytest.approx((1 + 3 * f) ** -0.1542, rel=1e-14)
    assert f == pytest.approx(0.980346, abs=1e-6)
    # Negative elapsed time (a clock step back) counts as no time at all.
    assert float(vf.retrievability(-2.0, 1.0)) == 1.0


def test_increment_grows_as_retrievability_falls():
    early = float(vf.next_stability(5.0, 5.0, 0.95, vf.GOOD))
    late = float(vf.next_stability(5.0, 5.0, 0.6, vf.GOOD))
    assert 5.0 < early < late


def test_stability_caps():
    uncapped, _ = vf.review(6.0, 2.0, 30, vf.EASY, cap=None)
    assert float(uncapped) > vf.LIVE_CAP_DAYS
    live, _ = vf.review(6.0, 2.0, 30, vf.EASY)  # the live cap is the default
    assert float(live) == 7.0
    durable, _ = vf.review(300.0, 2.0, 300, vf.EASY, cap=vf.DURABLE_CAP_DAYS)
    assert float(durable) == 365.0
    small, _ = vf.review(0.5, 5.0, 1, vf.GOOD, cap=vf.DURABLE_CAP_DAYS)
    assert float(small) == pytest.approx(float(vf.review(0.5, 5.0, 1, vf.GOOD, cap=None)[0]))
    assert vf.cap_for_tier("live") == 7.0
    assert vf.cap_for_tier("warm") == 365.0
    assert vf.cap_for_tier("live", live_cap_days=3.0) == 3.0


def test_long_term_formula_used_within_a_day():
    # veil applies the long-term recall formula even 0.5 day after the last access.
    s, d, t = 0.25, 5.0, 0.5
    r = (1 + (0.9 ** (-1 / 0.1542) - 1) * t / s) ** -0.1542
    w = vf.DEFAULT_PARAMETERS
    expected = s * (1 + math.exp(w[8]) * (11 - d) * s ** -w[9] * (math.exp(w[10] * (1 - r)) - 1))
    assert float(vf.review(s, d, t, vf.GOOD, cap=None)[0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad", [0, 5, 2.5, -1])
def test_bad_grade_is_rejected(bad):
    with pytest.raises(ValueError, match="grade"):
        vf.review(1.0, 5.0, 1.0, bad)


def test_bad_cap_and_parameters_are_rejected():
    with pytest.raises(ValueError, match="cap"):
        vf.next_stability(1.0, 5.0, 0.9, vf.GOOD, cap=0)
    with pytest.raises(ValueError, match="21 parameters"):
        vf.initial_stability(3, w=(1.0, 2.0))
    with pytest.raises(ValueError, match="decay"):
        vf.retrievability(1.0, 1.0, decay=0.0)
