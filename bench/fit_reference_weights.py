"""Fit veil_fsrs' reference-weight table (issue 29): how likely the agent's next steps use a name
it has seen, from recorded sessions.

Usage:
    python bench/fit_reference_weights.py [--data DIR] [--folders A,B] [--out FILE] [--small]

For every recording (the replay's readers, :func:`veil.default_plugins.replay.formats.
load_trajectory`), at every other step t, every identifier seen so far in an earlier step
(:func:`veil.core.prompt.tags.identifier_tokens` of the assistant messages and tool results,
names in the system prompt or the task left out) is one sample: its key is
:func:`veil_fsrs.reference_weights.features` (turns that mentioned it, tool results that held
it, steps since last held, steps since last mentioned by a turn), and it is positive when it is
a reference (DESIGN.md "Measures") of one of steps t .. t + HORIZON - 1. A cell's probability is
``(positives + 0.5) / (samples + 5)``; cells with fewer than MIN_SAMPLES samples are left out,
and the lookup falls back to the coarse table over ``(turn count, age)``.

Writes ``plugins/veil_fsrs/veil_fsrs/data/reference_weights.json`` (or ``--out``) and prints
the marginal rates. ``--small`` fits one file into a temporary file (CI checks the script runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "trajectories"
FOLDERS = (
    "mini-swe-agent",
    "mini-swe-agent-rerun",
    "mini-swe-agent-lite",
    "mini-swe-agent-reasoner",
)
OUT = ROOT / "plugins" / "veil_fsrs" / "veil_fsrs" / "data" / "reference_weights.json"
MIN_SAMPLES = 20


def fit(paths: list[Path]) -> dict:
    """The table (``{"table", "coarse", "prior", "horizon", "samples", "files"}``) fitted on
    ``paths`` (recordings the replay reads)."""
    from veil_fsrs.reference_weights import HORIZON, features

    from veil.core.prompt.tags import identifier_tokens
    from veil.default_plugins.replay.formats import EmptyTrajectory, load_trajectory
    from veil.default_plugins.replay.measures import SEPARATOR, references_in

    samples: Counter = Counter()
    positives: Counter = Counter()
    coarse_n: Counter = Counter()
    coarse_p: Counter = Counter()
    used_files = 0
    for path in paths:
        try:
            traj = load_trajectory(path)
        except EmptyTrajectory:
            continue
        used_files += 1
        head = traj.system + SEPARATOR + traj.task
        refs: list[set[str]] = []
        earlier = ""
        for step in traj.steps:
            refs.append(references_in(step.assistant, traj.system, traj.task, earlier))
            if step.observation is not None:
                earlier = f"{earlier}{SEPARATOR}{step.observation}" if earlier else step.observation
        assistant: Counter = Counter()
        results: Counter = Counter()
        last: dict[str, int] = {}
        last_assistant: dict[str, int] = {}
        for t in range(len(traj.steps)):
            if t > 0:
                prev = traj.steps[t - 1]
                for name in identifier_tokens(prev.assistant):
                    assistant[name] += 1
                    last[name] = last_assistant[name] = t - 1
                for name in identifier_tokens(prev.observation or ""):
                    results[name] += 1
                    last[name] = t - 1
            if t % 2:
                continue
            future = set().union(*refs[t : t + HORIZON])
            for name, seen in last.items():
                if name in head:
                    continue
                mentioned = last_assistant.get(name)
                key = features(
                    assistant[name],
                    results[name],
                    t - 1 - seen,
                    None if mentioned is None else t - 1 - mentioned,
                )
                hit = name in future
                samples[key] += 1
                positives[key] += hit
                coarse_n[key[:2]] += 1
                coarse_p[key[:2]] += hit
    total = sum(samples.values())
    prior = (sum(positives.values()) + 0.5) / (total + 5) if total else 0.01

    def rate(p: int, n: int) -> float:
        return round((p + 0.5) / (n + 5), 5)

    return {
        "horizon": HORIZON,
        "files": used_files,
        "samples": total,
        "prior": round(prior, 5),
        "table": {
            ",".join(map(str, k)): rate(positives[k], n)
            for k, n in sorted(samples.items())
            if n >= MIN_SAMPLES
        },
        "coarse": {
            ",".join(map(str, k)): rate(coarse_p[k], n) for k, n in sorted(coarse_n.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--folders", default=",".join(FOLDERS))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--small", action="store_true", help="one file, into a temporary file")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no recordings at {args.data}", file=sys.stderr)
        return 2
    paths = sorted(p for f in args.folders.split(",") for p in (args.data / f).glob("*.traj.json"))
    if args.small:
        paths = paths[:1]
    table = fit(paths)
    out = args.out or (Path(tempfile.mkdtemp()) / "reference_weights.json" if args.small else OUT)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"fitted on {table['files']} recordings, {table['samples']:,} samples -> {out}")
    print(
        f"cells: {len(table['table'])} (coarse {len(table['coarse'])}), overall rate {table['prior']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
