"""Replay benchmark (issues 3 and 18): the mini-swe-agent sessions in ../shared/data, veil
against the six baselines, prompt tokens, prompt-cache reuse and misses counted with
cl100k_base in the same run.

Usage:
    python bench/bench_replay.py [--budget 8000] [--cache-price 0.1]
        [--compaction settings|none|masking|full|both|all ...] [--policies NAMES]
        [--folders NAMES] [--data DIR] [--json OUT.json] [--small]

Reads the four folders ``mini-swe-agent``, ``-rerun``, ``-lite`` and ``-reasoner`` (84 files)
under ``../shared/data/trajectories`` and prints one table per folder and one for all of them:
per policy, raw prompt tokens / full history's, the cached share, effective tokens (uncached +
price x cached) / full history's, misses, steps over the budget, prefix breaks and evictions.
Baselines do not depend on the compaction mode, so they run once; veil runs once per mode
asked for (``--compaction all``: every mode; default: what the settings say). ``--small``
replays one file, for CI (with ``--json OUT``, tests/test_benchmarks_small.py checks its figures).
Misses are counted twice: identifier misses and line misses (issue 29,
``veil.default_plugins.replay.measures``). Issue 18's targets for veil, checked on the total: effective tokens
at most 0.6x the masking baseline's and at most full history's, fewer misses than masking, no
step over the budget (stretch: effective at most 0.6x full history's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
FOLDERS = (
    "mini-swe-agent",
    "mini-swe-agent-rerun",
    "mini-swe-agent-lite",
    "mini-swe-agent-reasoner",
)
MODES = ("settings", "none", "masking", "full", "both")


def _row_name(name: str, mode: str | None) -> str:
    return f"veil ({mode})" if mode is not None else name


def table(title: str, rows: dict[str, dict[str, Any]], steps: int) -> str:
    """A markdown table of policy objects (``rows``: label -> the contract's policy object);
    ratios are to the ``full`` row (none when it is absent)."""
    full = rows.get("full")
    lines = [
        f"{title}: {steps:,} steps",
        "| policy | prompt tokens | raw / full | cached | effective / full | misses "
        "| line misses | over budget | prefix breaks | evictions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, p in rows.items():
        raw = p["prompt_tokens"]
        raw_ratio = f"{raw / full['prompt_tokens']:.3f}" if full and full["prompt_tokens"] else "-"
        eff = p["effective_tokens"]
        eff_ratio = (
            f"{eff / full['effective_tokens']:.3f}" if full and full["effective_tokens"] else "-"
        )
        cached = f"{100 * p['cached_tokens'] / raw:.1f}%" if raw else "-"
        evictions = format(p["evictions"], ",") if "evictions" in p else ""
        lines.append(
            f"| {label} | {raw:,} | {raw_ratio} | {cached} | {eff_ratio} | {p['misses']:,} | "
            f"{p.get('line_misses', 0):,} | {p['over_budget_steps']:,} | {p['prefix_breaks']:,} | "
            f"{evictions} |"
        )
    return "\n".join(lines)


def targets(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Issue 18's targets for each veil row, against the ``masking`` and ``full`` rows."""
    masking, full = rows.get("masking"), rows.get("full")
    out = []
    for label, v in rows.items():
        if not label.startswith("veil") or masking is None or full is None:
            continue
        eff = v["effective_tokens"]
        out.append(
            f"{label}: effective / masking {eff / masking['effective_tokens']:.3f} (target "
            f"<= 0.6: {eff <= 0.6 * masking['effective_tokens']}); effective / full "
            f"{eff / full['effective_tokens']:.3f} (target <= 1.0: "
            f"{eff <= full['effective_tokens']}; stretch <= 0.6: "
            f"{eff <= 0.6 * full['effective_tokens']}); misses {v['misses']:,} < masking "
            f"{masking['misses']:,}: {v['misses'] < masking['misses']}; line misses "
            f"{v['line_misses']:,} < masking {masking['line_misses']:,}: "
            f"{v['line_misses'] < masking['line_misses']}; steps over budget: "
            f"{v['over_budget_steps']}"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--cache-price", type=float, default=0.1)
    parser.add_argument(
        "--compaction",
        nargs="+",
        choices=[*MODES, "all"],
        default=["settings"],
        help="veil's compaction mode(s); 'all' runs every mode",
    )
    parser.add_argument(
        "--policies", default=None, help="comma-separated policies (default: all seven)"
    )
    parser.add_argument(
        "--folders", default=",".join(FOLDERS), help="comma-separated folders under the data"
    )
    parser.add_argument(
        "--data", type=Path, default=DATA, help=f"folder holding the folders (default {DATA})"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--small", action="store_true", help="one file only (CI)")
    args = parser.parse_args()

    from veil.core.errors import VeilError
    from veil.default_plugins.replay.formats import load_trajectory
    from veil.default_plugins.replay.report import parse_policies, run_replay
    from veil.default_plugins.replay.runner import PolicyResult

    try:
        policies = parse_policies(args.policies)
    except VeilError as exc:
        parser.error(exc.message)
    modes = list(MODES) if "all" in args.compaction else list(dict.fromkeys(args.compaction))
    folders = [f.strip() for f in args.folders.split(",") if f.strip()]
    files = {f: sorted((args.data / f).glob("*.traj.json")) for f in folders}
    # recordings of runs that stopped before the model's first message hold no step to replay:
    # they count as files with 0 steps (the loader refuses them, naming the file)
    empty: list[str] = []
    counts = {f: len(paths) for f, paths in files.items()}  # files found, empty ones included
    for folder, paths in files.items():
        keep = []
        for path in paths:
            try:
                load_trajectory(path)
            except VeilError as exc:
                empty.append(f"{folder}/{path.name}: {exc.message.split(': ', 1)[-1]}")
                continue
            keep.append(path)
        files[folder] = keep
    files = {f: paths for f, paths in files.items() if paths}
    if not files:
        print(f"| replay | skipped: no trajectories under {args.data} |")
        # CI has ../shared: there, a benchmark that measured nothing fails
        return 1 if os.environ.get("CI") == "true" else 0
    if args.small:
        first = next(iter(files))
        files, counts, empty = {first: files[first][:1]}, {first: 1}, []
    baselines = tuple(n for n in policies if n != "veil")

    started = time.perf_counter()
    # rows[folder][label] = policy object; steps[folder] = steps replayed
    rows: dict[str, dict[str, dict[str, Any]]] = {f: {} for f in files}
    steps: dict[str, int] = {}
    raw: dict[str, Any] = {"budget": args.budget, "cache_price": args.cache_price, "runs": []}
    with tempfile.TemporaryDirectory() as project:  # default settings, no user config
        runs: list[tuple[str | None, tuple[str, ...]]] = []
        if baselines:
            runs.append((None, baselines))
        if "veil" in policies:
            runs += [(mode, ("veil",)) for mode in modes]
        for mode, chosen in runs:
            for folder, paths in files.items():
                t0 = time.perf_counter()
                result = run_replay(
                    [str(p) for p in paths],
                    args.budget,
                    project_dir=project,
                    compaction=None if mode in (None, "settings") else mode,
                    policies=chosen,
                    cache_price=args.cache_price,
                )
                print(
                    f"{folder}: {'baselines' if mode is None else f'veil ({mode})'}, "
                    f"{len(paths)} files, {time.perf_counter() - t0:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                steps[folder] = result["total"]["steps"]
                for name in chosen:
                    rows[folder][_row_name(name, mode)] = result["total"][name]
                raw["runs"].append({"folder": folder, "mode": mode, "result": result})
    seconds = time.perf_counter() - started

    # all folders: sums of the folders' totals (effective tokens recomputed from the sums)
    total: dict[str, dict[str, Any]] = {}
    for label in next(iter(rows.values())):
        acc = PolicyResult()
        for folder_rows in rows.values():
            acc.add(PolicyResult.from_json(folder_rows[label]))
        total[label] = acc.to_json(args.cache_price)
    from veil.default_plugins.replay.report import DISPLAY_ORDER

    order = [name for name in DISPLAY_ORDER if name != "veil"]  # veil's rows come last here

    def ordered(r: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {k: r[k] for k in order if k in r} | {k: v for k, v in r.items() if k not in order}

    n_files = sum(counts[f] for f in files)
    print(
        f"replay of {n_files} mini-swe-agent file(s) in {len(files)} folder(s), budget "
        f"{args.budget}, cache price {args.cache_price}, veil compaction "
        f"{', '.join(modes) if 'veil' in policies else '-'}, {seconds:.1f} s"
    )
    if empty:
        print(f"{len(empty)} file(s) with no step to replay, counted as 0 steps:")
        for line in empty:
            print(f"  {line}")
    print()
    if len(files) > 1:  # one folder: its table is the total's
        for folder in files:
            print(table(f"{folder} ({counts[folder]} files)", ordered(rows[folder]), steps[folder]))
            print()
    print(table(f"all folders ({n_files} files)", ordered(total), sum(steps.values())))
    for line in targets(ordered(total)):
        print(line)
    if args.json is not None:
        raw["total"] = total
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
