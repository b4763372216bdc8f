"""The cost / misses frontier (issue 29): veil over its budget and every baseline over its own
knob on the mini-swe-agent recordings, priced at cache prices 0.1 and 0.5, with identifier and
line misses, a table, the dominance check and two plots.

Usage:
    python bench/bench_frontier.py [--data DIR] [--folders NAMES] [--subset K [--every 8]]
        [--budgets 4000,6000,8000,12000,16000] [--keeps 3,5,10,20] [--blocks 5,10,20]
        [--jobs N] [--veil-settings JSON|FILE | --project DIR] [--no-veil]
        [--json OUT.json] [--plot PREFIX] [--compare LABEL=OLD.json] [--cache DIR | --no-cache]
        [--checkpoint DIR] [--small]
    python bench/bench_frontier.py --plot-only OUT.json [--plot PREFIX] [--compare LABEL=OLD.json]

Points (``veil.default_plugins.replay.frontier``): veil at each budget; masking at each N
(observations kept); masking-blocks at each G (N = 10); recency, recency-hysteresis and
masking-budget at veil's budgets; full history once. Each point is replayed once per file and
priced at 0.1 and 0.5 afterwards. ``--subset K`` takes every ``--every``-th file of each folder
from the K-th (earlier sessions' subsets: A = 0, B = 4). ``--jobs N`` replays in N processes
(each file x budget of veil is one job). ``--veil-settings`` runs veil with a settings.json
(given as JSON text or a file) in a scratch project; ``--project`` with that project's settings;
neither: defaults. Baseline results are cached under ``--cache`` (default
``$XDG_CACHE_HOME/veil/frontier``), keyed by each recording's bytes and the code of the
measure, so a second sweep of veil under other settings replays only veil. ``--json`` keeps
every figure, per file, for ``--plot-only``; ``--compare "veil before=OLD.json"`` draws the
veil points of an earlier sweep on the same files beside this one's, dashed. ``--checkpoint DIR``
keeps each finished job in DIR: the same command run again after a crash or a kill replays only
the jobs that had not finished (a changed recording, option, setting or code is replayed). ``--small`` (CI): the first 30 steps of one short
recording, veil at 4,000 and 8,000, no cache, the plots in a scratch folder.

Prints the Markdown table (policy, knob, effective / full history's at 0.1 and 0.5, identifier
misses, line misses, steps over the budget, tokens per step, cached share), then which baseline
points no veil point dominates (cost no higher, fewer misses on both measures) at each price,
and per veil budget whether it costs more than full history.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
FOLDERS = (
    "mini-swe-agent",
    "mini-swe-agent-rerun",
    "mini-swe-agent-lite",
    "mini-swe-agent-reasoner",
)
SMALL_FILE = ("mini-swe-agent", "sqlfluff__sqlfluff-2419.traj.json")
"""``--small``'s recording: a short one, also read by tests/test_benchmarks_small.py."""
SMALL_STEPS = 30
SMALL_BUDGETS = (4000, 8000)
SMALL_KEEPS = (5, 10)
SMALL_BLOCKS = (10,)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(
            f"bench_frontier.py: {what}: expected comma-separated whole numbers, got {text!r}"
        ) from None
    if not values or any(v <= 0 for v in values):
        raise SystemExit(
            f"bench_frontier.py: {what}: expected positive whole numbers, got {text!r}"
        )
    return values


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "veil" / "frontier"


def _settings_project(text: str, scratch: Path) -> Path:
    """A scratch project whose .veil/settings.json is ``text`` (JSON, or a file holding it)."""
    candidate = Path(text)
    if not text.lstrip().startswith("{") and candidate.is_file():
        text = candidate.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"bench_frontier.py: --veil-settings: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SystemExit("bench_frontier.py: --veil-settings: expected a JSON object")
    (scratch / ".veil").mkdir(parents=True, exist_ok=True)
    (scratch / ".veil" / "settings.json").write_text(json.dumps(data), encoding="utf-8")
    return scratch


FIRST_SUBSETS = (4, 0)
"""Without ``--subset``, the files of the sessions' subsets B (4) then A (0) are replayed first,
so a run cut short has whole subsets to compare with earlier sessions' figures."""


def pick_files(data: Path, folders: list[str], subset: int | None, every: int) -> list[Path]:
    """The recordings of ``folders`` under ``data``: with ``subset`` K every ``every``-th file
    of each folder from the K-th (sorted by name); without, every file, those of the subsets
    :data:`FIRST_SUBSETS` first, each group longest first."""
    found = {folder: sorted((data / folder).glob("*.traj.json")) for folder in folders}
    if subset is not None:
        return [f for folder in folders for f in found[folder][subset::every]]
    groups = [[f for folder in folders for f in found[folder][k::every]] for k in FIRST_SUBSETS]
    taken = {f for group in groups for f in group}
    groups.append([f for folder in folders for f in found[folder] if f not in taken])
    return [f for group in groups for f in sorted(group, key=lambda f: -f.stat().st_size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help=f"default {DATA}")
    parser.add_argument("--folders", default=",".join(FOLDERS))
    parser.add_argument("--subset", type=int, default=None, help="every --every-th file from K")
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--budgets", default="4000,6000,8000,12000,16000")
    parser.add_argument("--keeps", default="3,5,10,20", help="masking's N values")
    parser.add_argument("--blocks", default="5,10,20", help="masking-blocks' G values")
    parser.add_argument("--reference-budget", type=int, default=8000)
    parser.add_argument("--jobs", type=int, default=1, help="processes (this VM has 2 cores)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--veil-settings", default=None, metavar="JSON|FILE")
    group.add_argument("--project", type=Path, default=None, help="veil's project (settings)")
    parser.add_argument("--no-veil", action="store_true", help="baselines only (seconds)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--plot-only", type=Path, default=None, metavar="JSON")
    parser.add_argument(
        "--plot", default=None, metavar="PREFIX", help="PNG prefix (default bench/frontier)"
    )
    parser.add_argument("--title", default=None, help="the plots' title")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="LABEL=JSON",
        help="draw the veil points of an earlier sweep's --json too (same files), dashed",
    )
    parser.add_argument("--cache", type=Path, default=None, help="baseline cache folder")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each finished job here; the same command run again resumes",
    )
    parser.add_argument("--small", action="store_true", help="30 steps of one file (CI)")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from veil.core.errors import VeilError
    from veil.default_plugins.replay import frontier

    plot_prefix = args.plot or str(Path(__file__).resolve().parent / "frontier")
    compare = []
    for item in args.compare:
        label, _, path = item.rpartition("=")
        try:
            compare.append((label or "veil before", json.loads(Path(path).read_text("utf-8"))))
        except (OSError, ValueError) as exc:
            print(f"bench_frontier.py: --compare {path}: {exc}", file=sys.stderr)
            return 2
    if args.plot_only is not None:
        try:
            result = json.loads(args.plot_only.read_text(encoding="utf-8"))
            print(frontier.render_table(result))
            print()
            print(frontier.render_targets(result))
            paths = frontier.plot_frontier(result, plot_prefix, title=args.title, compare=compare)
            for path in paths:
                print(f"plot written to {path}")
        except (OSError, ValueError, KeyError, VeilError) as exc:
            message = exc.message if isinstance(exc, VeilError) else exc
            print(f"bench_frontier.py: --plot-only {args.plot_only}: {message}", file=sys.stderr)
            return 2
        return 0

    budgets = _ints(args.budgets, "--budgets")
    keeps, blocks = _ints(args.keeps, "--keeps"), _ints(args.blocks, "--blocks")
    folders = [f.strip() for f in args.folders.split(",") if f.strip()]
    max_steps = args.max_steps
    if args.small:
        files = [args.data / SMALL_FILE[0] / SMALL_FILE[1]]
        budgets, keeps, blocks = list(SMALL_BUDGETS), list(SMALL_KEEPS), list(SMALL_BLOCKS)
        max_steps = SMALL_STEPS
        files = [f for f in files if f.is_file()]
    else:
        files = pick_files(args.data, folders, args.subset, args.every)
    if not files:
        message = f"| frontier | skipped: no trajectories under {args.data} |"
        if os.environ.get("CI") == "true":  # CI has ../shared: a missing folder is a failure
            print(message, file=sys.stderr)
            return 1
        print(message)
        return 0

    cache = None if (args.no_cache or args.small) else (args.cache or _default_cache())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        if args.veil_settings is not None:
            project = _settings_project(args.veil_settings, Path(scratch))
        else:
            project = args.project or Path(scratch)  # defaults: an empty project
        try:
            result = frontier.sweep(
                [str(f) for f in files],
                budgets=budgets,
                keeps=keeps,
                blocks=blocks,
                with_veil=not args.no_veil,
                project_dir=project,
                jobs=args.jobs,
                cache_folder=cache,
                reference_budget=args.reference_budget,
                max_steps=max_steps,
                progress=lambda line: print(line, file=sys.stderr, flush=True),
                checkpoint=args.checkpoint,
            )
        except VeilError as exc:
            print(f"bench_frontier.py: {exc.message}", file=sys.stderr)
            return 2
    seconds = time.perf_counter() - started
    result["meta"].update(
        command=" ".join(["python bench/bench_frontier.py", *(argv or sys.argv[1:])]),
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        veil_settings=(
            args.veil_settings
            if args.veil_settings is not None
            else (str(args.project) if args.project else "defaults")
        ),
    )
    meta = result["meta"]
    print(
        f"frontier: {len(meta['files'])} file(s), {sum(meta['steps'].values()):,} steps "
        f"({len(meta['skipped'])} without a step skipped), budgets {budgets}, masking N {keeps}, "
        f"blocks G {blocks}, veil settings: {meta['veil_settings']}, {seconds:.1f} s "
        f"(jobs {args.jobs}; per kind, summed over jobs: {meta['seconds']})"
    )
    print()
    print(frontier.render_table(result))
    print()
    print(frontier.render_targets(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(f"figures written to {args.json}")
    with tempfile.TemporaryDirectory() as scratch:  # --small draws, then throws away
        if args.small:
            plot_prefix = str(Path(scratch) / "frontier")
        try:
            paths = frontier.plot_frontier(result, plot_prefix, title=args.title, compare=compare)
            for path in paths:
                print(f"plot written to {path}")
        except VeilError as exc:  # matplotlib missing: the figures above still stand
            print(f"bench_frontier.py: no plot: {exc.message}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
