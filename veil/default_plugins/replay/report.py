"""``veil replay``: load recorded sessions, replay them through veil and the baselines, and add
what plugins report per session (``replay_report`` hook: e.g. convergence)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from veil import BadRequest, PluginResultInvalid, results_by_plugin
from veil.default_plugins.replay.cache import CACHE_PRICE
from veil.default_plugins.replay.formats import EmptyTrajectory, Trajectory, load_trajectory
from veil.default_plugins.replay.html_report import dollars, format_dollars
from veil.default_plugins.replay.progress import ProgressTick, ReplayProgress
from veil.default_plugins.replay.runner import BASELINES, check_baselines, pick_known, replay
from veil.default_plugins.replay.veil_policy import CompactionMode, VeilReplayPolicy

POLICIES = ("veil", *BASELINES)
"""Every policy ``veil replay`` can run, in the JSON's order."""

DISPLAY_ORDER = (
    "veil",
    "full",
    "masking",
    "masking-budget",
    "masking-blocks",
    "recency",
    "recency-hysteresis",
)
"""The order of the terminal table and the plot: each baseline after the one it refines
(``masking-budget`` and ``masking-blocks`` after ``masking``)."""


def parse_policies(text: str | None) -> tuple[str, ...]:
    """Policy names from a comma-separated list (``"veil,full,masking"``); None or empty: all
    of :data:`POLICIES`. Returned in :data:`POLICIES` order, once each.

    Raises:
        BadRequest: a name is not a policy (the message lists the known ones).
    """
    if text is None or not text.strip():
        return POLICIES
    names = [n.strip() for n in text.split(",") if n.strip()]
    return pick_known(names, POLICIES, "policy")


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
    policies: tuple[str, ...] = POLICIES,
    cache_price: float = CACHE_PRICE,
    per_step: bool = False,
    budget_from_window: bool = False,
    price_per_mtok: float | None = None,
) -> dict[str, Any]:
    """Replay ``files`` and return the JSON contract of :mod:`veil.default_plugins.replay.runner`,
    extended per file with ``records`` (what the reader skipped or could not pair in the log:
    :meth:`~veil.default_plugins.replay.trajectory.RecordTally.to_json`, plus, with
    ``per_step``, ``recorded_prompt_tokens``: the provider's prompt tokens per step as the agent
    logged them, null where it did not), ``convergence`` (and whatever else ``replay_report``
    implementations add) and with ``over_budget`` in the veil object (the steps whose prompt
    exceeded the budget, with the reason: always none unless protected context alone exceeds
    it), and at the top with ``budget``, ``compaction``, ``cache_price``, ``price_per_mtok``
    (null unless given) and ``skipped`` (``[{"file", "reason"}]``: recordings that hold no
    step, e.g. an agent stopped before its first message, are left out of the figures instead
    of stopping a run over a folder).

    Args:
        files: recordings to replay.
        budget: the token budget (cl100k_base).
        project_dir: the project whose settings and plugins veil uses.
        compaction: veil's compaction mode (None: what settings say).
        disable: plugins blocked for the replay.
        progress: show a progress bar (sessions read, steps replayed) on stderr when it is a
            terminal.
        summariser: the ``compact`` model of full compaction (see :class:`VeilReplayPolicy`).
        max_steps: replay only the first N steps of each file (short benchmark runs).
        policies: the policies to run (:data:`POLICIES` by default; without ``"veil"`` no veil
            session is opened, which is fast).
        cache_price: cached-input price relative to uncached input, from 0 to 1.
        per_step: include each file's per-step measures.
        budget_from_window: ``budget`` is the model's context window with no budget set, as a
            session on a large-window model runs (veil's own target size may apply; see
            :class:`VeilReplayPolicy`); the baselines use it as their budget.
        price_per_mtok: dollars per million uncached input tokens, recorded in the result for
            the report (the figures themselves are tokens).

    Raises:
        BadRequest: a file is unreadable or in no known format (the message names it), the
            budget is not a positive integer, the cache price is not from 0 to 1, or a policy
            name is unknown.
    """
    unknown = [n for n in policies if n not in POLICIES]
    if unknown:
        raise BadRequest(f"policies: unknown policy {unknown}; known: {', '.join(POLICIES)}")
    baselines = check_baselines([n for n in policies if n != "veil"])
    with_veil = "veil" in policies
    with ReplayProgress(progress and sys.stderr.isatty()) as bar:
        trajectories: list[Trajectory] = []
        skipped: list[dict[str, str]] = []
        bar.start("reading sessions", len(files))
        for f in files:
            try:
                trajectories.append(load_trajectory(f))
            except EmptyTrajectory as exc:  # nothing to measure: skipped, said in the result
                skipped.append({"file": str(f), "reason": exc.message})
            bar.advance()
        if max_steps is not None:
            for traj in trajectories:
                traj.steps = traj.steps[:max_steps]
        veil_policies: list[VeilReplayPolicy] = []

        def make(traj: Trajectory, b: int) -> VeilReplayPolicy:
            policy = VeilReplayPolicy(
                traj,
                b,
                project_dir=project_dir,
                compaction=compaction,
                disable=disable,
                summariser=summariser,
                budget_from_window=budget_from_window,
            )
            veil_policies.append(policy)
            return policy

        makers: list[Any] = [make] if with_veil else []
        if bar.enabled:
            makers.insert(0, lambda traj, b: ProgressTick(bar.advance))
        bar.start("replaying steps", sum(len(t.steps) for t in trajectories))
        try:
            result = replay(
                trajectories,
                makers,
                budget,
                baselines=baselines,
                cache_price=cache_price,
                per_step=per_step,
            )
            for entry in [*result["files"], result["total"]]:
                entry.pop(ProgressTick.name, None)  # it measured nothing: not a policy
            for entry, policy in zip(
                result["files"] if with_veil else [], veil_policies, strict=True
            ):
                for plugin, extra in results_by_plugin(
                    policy.veil.pm, "replay_report", session=policy.session
                ):
                    if not isinstance(extra, Mapping):
                        raise PluginResultInvalid(
                            plugin, "replay_report", type(extra).__name__, "a dict or None"
                        )
                    entry.update(extra)
                # the runner counts veil's steps over the budget; the policy says why
                entry["veil"]["over_budget"] = [
                    {"step": s, "tokens": n, "reason": why} for s, n, why in policy.over_budget
                ]
        finally:
            for policy in veil_policies:
                policy.close()
    for entry, traj in zip(result["files"], trajectories, strict=True):
        records = traj.records.to_json()
        if per_step:
            records["recorded_prompt_tokens"] = [s.recorded_prompt_tokens for s in traj.steps]
        entry["records"] = records
    # what the figures were measured with (extra keys beside the contract's files / total)
    result["budget"] = budget
    result["compaction"] = (compaction or "settings") if with_veil else None
    result["cache_price"] = cache_price
    result["price_per_mtok"] = price_per_mtok
    result["skipped"] = skipped
    return result


def _ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.3f}" if reference else "-"


def render_table(result: dict[str, Any]) -> str:
    """A plain-text table of the totals and a line per file, for terminals.

    Columns: prompt tokens (summed over steps) and their ratio to full history's, the cached
    share of them, effective tokens (uncached + cache price x cached) and their ratio to full
    history's, the peak prompt, references, misses, line misses, prefix breaks, steps over the
    budget and evictions. Ratios show "-" when full history was not run.
    """
    if not result["files"]:  # every file was skipped (the README: "skipped", not an error)
        skipped = len(result.get("skipped", []))
        return f"nothing to replay: {skipped} file(s) skipped, none holds a step"
    total = result["total"]
    names = [n for n in DISPLAY_ORDER if n in total]
    full = total.get("full")
    full_raw = full["prompt_tokens"] if full else None
    full_eff = full["effective_tokens"] if full else None
    price = result.get("price_per_mtok")
    lines = [
        f"{'policy':<19} {'prompt tokens':>13} {'/full':>6} {'cached':>7} {'effective':>11} "
        f"{'/full':>6} "
        + (f"{'dollars':>11} " if price is not None else "")
        + f"{'peak':>7} {'refs':>6} {'misses':>6} {'lines':>6} {'breaks':>6} {'over':>5} "
        f"{'evictions':>9}"
    ]
    for name in names:
        p = total[name]
        raw, cached = p["prompt_tokens"], p["cached_tokens"]
        share = f"{100 * cached / raw:.1f}%" if raw else "-"
        money = ""
        if price is not None:
            money = f"{format_dollars(dollars(p['effective_tokens'], price)):>11} "
        lines.append(
            f"{name:<19} {raw:>13,} {_ratio(raw, full_raw):>6} {share:>7} "
            f"{p['effective_tokens']:>11,.0f} {_ratio(p['effective_tokens'], full_eff):>6} "
            f"{money}"
            f"{p['peak_prompt_tokens']:>7,} {p['references']:>6,} {p['misses']:>6,} "
            f"{p.get('line_misses', 0):>6,} {p['prefix_breaks']:>6,} {p['over_budget_steps']:>5,} "
            f"{format(p['evictions'], ',') if 'evictions' in p else '':>9}"
        )
    compaction = result.get("compaction")
    lines.append(
        f"\n{total['steps']} steps in {len(result['files'])} file(s), budget "
        f"{result.get('budget', '?')} tokens, cache price {result.get('cache_price', '?')}"
        + (
            # "settings": no --compaction given, so the project's settings decided
            f", veil's compaction: {'as settings say' if compaction == 'settings' else compaction}"
            if compaction
            else ""
        )
    )
    lines.append(
        "cached: share of prompt tokens a prompt cache reuses from the policy's previous step; "
        "effective: uncached + price x cached; misses: references no longer in the prompt; "
        "lines: references whose source line is not in it word for word (line misses); "
        "breaks: steps whose system message changed; over: steps over the budget"
        + (f"; dollars: effective tokens at ${price:,g} per million" if price is not None else "")
    )
    for f in result["files"]:
        conv = f.get("convergence")
        conv_text = f", {conv['fingerprints']} error fingerprints" if conv else ""
        parts = []
        for name in names:
            p = f[name]
            parts.append(
                f"{name} {p['prompt_tokens']:,} / {p['misses']} / {p.get('line_misses', 0)}"
            )
        lines.append(
            f"  {Path(f['file']).name}: {f['steps']} steps; tokens / misses / line misses: "
            + ", ".join(parts)
            + conv_text
        )
        noted = records_line(f.get("records"))
        if noted:
            lines.append(f"    {noted}")
    return "\n".join(lines)


def records_line(records: dict[str, Any] | None) -> str:
    """What a reader left out of one log, as one line for the terminal ("" when nothing):
    records skipped by type (unknown types named), compaction boundaries, unpaired calls and
    results."""
    if not records:
        return ""
    parts = []
    skipped = records.get("skipped") or {}
    if skipped:
        listed = ", ".join(f"{k} {v}" for k, v in skipped.items())
        parts.append(f"skipped {sum(skipped.values())} records ({listed})")
    unknown = records.get("unknown") or {}
    if unknown:
        parts.append(f"unknown record types: {', '.join(unknown)}")
    if records.get("compactions"):
        n = len(records["compactions"])
        parts.append(f"{n} compaction boundar{'y' if n == 1 else 'ies'} (the agent's own)")
    if records.get("calls_without_result"):
        parts.append(f"tool calls without a result: {', '.join(records['calls_without_result'])}")
    if records.get("results_without_call"):
        parts.append(f"tool results without a call: {', '.join(records['results_without_call'])}")
    return "; ".join(parts)
