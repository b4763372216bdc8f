"""Replay benchmark (issue 3): every mini-swe-agent session in ../shared/data at a budget of
8,000 tokens, veil against the three baselines (full history, observation masking, recency
truncation), all counted with cl100k_base in the same run.

Usage: python bench/bench_replay.py [--budget 8000] [--compaction none|masking|full|both] [--small]
(--small replays one file, for CI). Prints a table; targets: veil's summed prompt tokens at most
the masking baseline's, and fewer misses than both masking and recency.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

DATA = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "data"
    / "trajectories"
    / "mini-swe-agent"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--compaction", choices=["none", "masking", "full", "both"], default=None)
    parser.add_argument("--small", action="store_true", help="one file only (CI)")
    args = parser.parse_args()
    files = sorted(DATA.glob("*.traj.json"))
    if not files:
        print(f"| replay | skipped: {DATA} not present |")
        return 0
    if args.small:
        files = files[:1]
    from veil.core.replay.report import run_replay

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as project:  # default settings, no user config
        result = run_replay(
            [str(f) for f in files], args.budget, project_dir=project, compaction=args.compaction
        )
    seconds = time.perf_counter() - started
    total = result["total"]
    full = total["full"]["prompt_tokens"]
    print(
        f"replay of {len(files)} mini-swe-agent file(s), {total['steps']} steps, budget "
        f"{args.budget}, compaction {args.compaction or 'settings'}, {seconds:.1f} s"
    )
    print(
        "| policy | prompt tokens (sum) | ratio to full | peak | references | misses | evictions |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ("veil", "full", "masking", "recency"):
        p = total[name]
        print(
            f"| {name} | {p['prompt_tokens']:,} | {p['prompt_tokens'] / full:.3f} | "
            f"{p['peak_prompt_tokens']:,} | {p['references']:,} | {p['misses']:,} | "
            f"{format(p['evictions'], ',') if 'evictions' in p else ''} |"
        )
    v, m, r = total["veil"], total["masking"], total["recency"]
    print(
        f"\ntokens <= masking: {v['prompt_tokens'] <= m['prompt_tokens']}; misses < masking: "
        f"{v['misses'] < m['misses']}; misses < recency: {v['misses'] < r['misses']}; "
        f"steps over budget: {v.get('over_budget_steps', 0)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
