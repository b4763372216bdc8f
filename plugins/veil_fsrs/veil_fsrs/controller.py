"""The pressure-threshold controller (seed 002; DESIGN.md reference defaults).

The eviction policy evicts low scorers once the prompt fills past ``threshold`` x budget. The
controller moves that threshold within ``[min, max]`` (``context.controller``):

* down by ``step`` when ``burst_count`` (3) pressure evictions happen within ``burst_window``
  (60 s, inclusive): evictions repeat quickly, so each pass should free more room;
* up by ``step`` for every ``calm_period`` (300 s) without a pressure eviction;
* up by ``step`` when an item it evicted is asked for again within ``rerequest_window``
  (1,800 s): it evicted too eagerly.

The low-water mark ``low_water`` (issue 18): a pass that starts at the threshold frees room
down to ``low_water`` x budget, so several steps append before the next pass and the prompt's
prefix stays put in between. A calm period and a re-request raise it by ``low_water_step``
within ``[low_water_min, low_water_max]`` (keep more); the cache in view caps it per pass
(:func:`cache_cap`: never so high that the session costs more per step than sending its whole
history, with cached input at ``cache_price``), which is how repeated passes lower it. The mark
in effect is never above the threshold (:attr:`Controller.low_water`).

A *pressure eviction* is a pass that evicted something in stage 2, 3 or the hard-budget stage;
stage 1 (stale single-use items) does not depend on the threshold, so it neither counts toward a
burst nor breaks a calm period. Re-requests count every evicted item, whatever its stage.

The state is a plain JSON-serialisable dict (``session.state["veil_fsrs"]["controller"]``), and
every change depends only on the event times passed in, so the same events give the same
thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from veil_fsrs.settings import ControllerSettings


def cache_cap(
    history_tokens: float,
    steps: int,
    budget_tokens: float,
    *,
    price: float,
    low: float,
    high: float,
    allowance: float = 1.0,
) -> float:
    """The highest low-water mark in ``[low, high]`` (steps of 0.01) at which a session is
    expected to cost no more per step than sending its whole history would, with cached input
    billed at ``price`` (issue 18: the cache in view).

    Model (tokens per step; ``g`` = ``history_tokens / steps``, what a step adds, ``B`` =
    ``budget_tokens``, ``w`` = the mark): a pass re-sends the prompt uncached every
    ``(1 - w) B / g`` steps, about ``w B`` tokens, so passes cost ``g w / (1 - w)`` per step;
    between passes the prompt, ``B (1 + w) / 2`` on average, is read at ``price``; the new
    tokens ``g`` are paid in full either way. Full history costs ``price x history_tokens +
    g`` per step (all of it cached but the new tokens). The mark is the largest ``w`` with
    ``g w / (1 - w) + price B (1 + w) / 2 <= price x history_tokens``, or ``low`` when none.
    A long session (history many budgets long) affords a high mark, so the prompt keeps more;
    a session just over the budget gets a low one, so passes are rare.

    ``allowance`` (``context.controller.cacheAllowance``, default 1) scales what a step may
    cost: ``allowance x price x history_tokens``. Above 1 a session may cost more per step than
    its whole history would, in exchange for a fuller prompt.

    Example: B 6,800, 400 tokens a step, price 0.1: 10,000 tokens of history -> ``low``,
    20,000 -> 0.77 (0.89 with ``allowance`` 2), 40,000 -> 0.89.
    """
    if steps <= 0 or history_tokens <= 0 or budget_tokens <= 0:
        return high
    g = history_tokens / steps
    allowed = allowance * price * history_tokens
    w = round(high, 2)
    while w > low:
        if g * w / (1.0 - w) + price * budget_tokens * (1.0 + w) / 2.0 <= allowed:
            return w
        w = round(w - 0.01, 2)
    return low


MAX_MOVES_KEPT = 50
"""How many threshold moves ``state["moves"]`` keeps (for ``/context`` and tests)."""


class Controller:
    """Moves the pressure threshold; all state lives in the dict it is given.

    Args:
        state: the dict to keep state in (created keys: ``threshold``, ``burst`` (times, s),
            ``calm_since`` (s or None), ``evicted`` (item id -> eviction time, s), ``moves``).
        settings: ``context.controller``.
    """

    def __init__(self, state: dict[str, Any], settings: ControllerSettings) -> None:
        self.settings = settings
        self.state = state
        state.setdefault("threshold", settings.threshold)
        state.setdefault("burst", [])
        state.setdefault("calm_since", None)
        state.setdefault("evicted", {})
        state.setdefault("moves", [])
        state.setdefault("low_water", settings.low_water)
        # Settings may have changed since the state was written: keep it inside the bounds.
        state["threshold"] = min(max(float(state["threshold"]), settings.min), settings.max)
        state["low_water"] = min(
            max(float(state["low_water"]), settings.low_water_min), settings.low_water_max
        )

    @property
    def threshold(self) -> float:
        """The current pressure threshold, in [min, max]."""
        return self.state["threshold"]

    @property
    def low_water(self) -> float:
        """The low-water mark in effect: where a pass frees room down to, as a share of the
        budget, in [low_water_min, low_water_max] and never above :attr:`threshold`."""
        return min(self.state["low_water"], self.threshold)

    def _move(self, direction: int, times: int, now: float, why: str, low: bool = True) -> None:
        s = self.settings
        before = self.state["threshold"]
        after = min(max(before + direction * times * s.step, s.min), s.max)
        after = round(after, 10)  # no float drift from repeated steps
        self.state["threshold"] = after
        low_before = self.state["low_water"]
        low_after = min(
            max(low_before + direction * times * s.low_water_step * low, s.low_water_min),
            s.low_water_max,
        )
        low_after = round(low_after, 10)
        self.state["low_water"] = low_after
        if after != before or low_after != low_before:
            moves = self.state["moves"]
            moves.append(
                {
                    "time": now,
                    "from": before,
                    "to": after,
                    "lowFrom": low_before,
                    "lowTo": low_after,
                    "why": why,
                }
            )
            del moves[:-MAX_MOVES_KEPT]

    def tick(self, now: float) -> None:
        """Raise the threshold once per full ``calm_period`` elapsed since the last pressure
        eviction (or the last calm raise, or the first tick). ``now`` in seconds."""
        since = self.state["calm_since"]
        if since is None or now < since:
            self.state["calm_since"] = now
            return
        periods = math.floor((now - since) / self.settings.calm_period)
        if periods > 0:
            self._move(+1, periods, now, f"calm for {periods * self.settings.calm_period:g} s")
            self.state["calm_since"] = since + periods * self.settings.calm_period

    def record_pass(self, now: float, evicted_ids: Iterable[str], pressure: bool) -> None:
        """Record an eviction pass at ``now`` (seconds).

        Args:
            evicted_ids: every id the pass evicted (remembered for re-requests).
            pressure: the pass evicted something in a pressure stage (2, 3 or hard budget).
        """
        s = self.settings
        evicted = self.state["evicted"]
        evicted.update(dict.fromkeys(evicted_ids, now))
        # Forget evictions too old to count as re-requested.
        for item_id in [i for i, t in evicted.items() if now - t > s.rerequest_window]:
            del evicted[item_id]
        if not pressure:
            return
        burst = [t for t in self.state["burst"] if now - t <= s.burst_window] + [now]
        if len(burst) >= s.burst_count:
            # the threshold only: passes that come in bursts are mostly passes that could not
            # reach the low-water mark (protected items fill the prompt), and lowering the mark
            # then only drops context; the cache cap (cache_cap) already frees more per pass
            # when passes come often for the history they save (replay, bench/RESULTS.md)
            self._move(-1, 1, now, f"{len(burst)} evictions within {s.burst_window:g} s", low=False)
            burst = []  # the next lowering needs a new burst
        self.state["burst"] = burst
        self.state["calm_since"] = now

    def on_rerequest(self, item_id: str, now: float) -> bool:
        """An evicted item was asked for again (hydrated, recalled, promoted) at ``now``.

        Raises the threshold by one step when the item was evicted at most
        ``rerequest_window`` seconds ago; each eviction counts once.

        Returns:
            True when the threshold was raised (or would have been, at the maximum).
        """
        evicted_at = self.state["evicted"].pop(item_id, None)
        if evicted_at is None or not 0 <= now - evicted_at <= self.settings.rerequest_window:
            return False
        self._move(+1, 1, now, f"evicted item {item_id} requested again")
        return True
