"""``veil replay``: load recorded sessions, replay them through veil and the baselines, and add
what plugins report per session (``replay_report`` hook: e.g. convergence)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from veil.core.replay.formats import Trajectory, load_trajectory
from veil.core.replay.runner import replay
from veil.core.replay.veil_policy import CompactionMode, VeilReplayPolicy


def run_replay(
    files: list[str],
    budget: int,
    *,
    project_dir: str | Path | None = None,
    compaction: CompactionMode | None = None,
    disable: tuple[str, ...] = (),
    progress: bool = False,
    summariser: Any = None,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Replay ``files`` and return issue 3's JSON contract, extended per file with
    ``convergence`` (and whatever else ``replay_report`` implementations add) and with
    ``over_budget_steps`` in the veil object (always 0 unless protected context alone exceeds
    the budget; the reasons are listed in ``over_budget``). ``summariser``: the ``compact``
    model of full compaction (see :class:`VeilReplayPolicy`); ``max_steps``: replay only the
    first N steps of each file (short benchmark runs).

    Raises:
        BadRequest: a file is unreadable or in no known format (the message names it), or the
            budget is not a positive integer.
    """
    trajectories: list[Trajectory] = [load_trajectory(f) for f in files]
    if max_steps is not None:
        for traj in trajectories:
            traj.steps = traj.steps[:max_steps]
    policies: list[VeilReplayPolicy] = []

    def make(traj: Trajectory, b: int) -> VeilReplayPolicy:
        if progress and sys.stderr.isatty():
            print(f"replaying {traj.path} ({len(traj.steps)} steps)…", file=sys.stderr)
        policy = VeilReplayPolicy(
            traj,
            b,
            project_dir=project_dir,
            compaction=compaction,
            disable=disable,
            summariser=summariser,
        )
        policies.append(policy)
        return policy

    result = replay(trajectories, [make], budget)
    total_over = 0
    for entry, policy in zip(result["files"], policies, strict=True):
        session = policy.session
        for extra in policy.veil.pm.hook.replay_report(session=session):
            entry.update(extra or {})
        entry["veil"]["over_budget_steps"] = len(policy.over_budget)
        entry["veil"]["over_budget"] = [
            {"step": s, "tokens": n, "reason": why} for s, n, why in policy.over_budget
        ]
        total_over += len(policy.over_budget)
        policy.close()
    result["total"]["veil"]["over_budget_steps"] = total_over
    # what the figures were measured with (extra keys beside the contract's files / total)
    result["budget"] = budget
    result["compaction"] = compaction or "settings"
    return result


def render_table(result: dict[str, Any]) -> str:
    """A plain-text table of the totals and each file, for terminals."""
    names = ["veil", "full", "masking", "recency"]
    total = result["total"]
    lines = [
        f"{'policy':<8} {'prompt tokens':>14} {'peak':>7} {'refs':>6} {'misses':>7} {'evictions':>9}"
    ]
    for name in names:
        p = total.get(name)
        if p:
            lines.append(
                f"{name:<8} {p['prompt_tokens']:>14,} {p['peak_prompt_tokens']:>7,} "
                f"{p['references']:>6,} {p['misses']:>7,} {p.get('evictions', ''):>9}"
            )
    lines.append(
        f"\n{total['steps']} steps in {len(result['files'])} file(s), budget "
        f"{result.get('budget', '?')} tokens, compaction {result.get('compaction', 'settings')}"
    )
    for f in result["files"]:
        v = f["veil"]
        conv = f.get("convergence")
        conv_text = f", {conv['fingerprints']} error fingerprints" if conv else ""
        lines.append(
            f"  {Path(f['file']).name}: {f['steps']} steps, veil {v['prompt_tokens']:,} "
            f"tokens / {v['misses']} misses vs masking {f['masking']['prompt_tokens']:,} / "
            f"{f['masking']['misses']}, recency {f['recency']['prompt_tokens']:,} / "
            f"{f['recency']['misses']}{conv_text}"
        )
    return "\n".join(lines)
