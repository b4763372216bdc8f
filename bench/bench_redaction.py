"""Benchmark: what secret redaction (veil.core.safety.redaction) costs on real tool output.

Every observation of the shared mini-swe-agent trajectories (the tool results a coding agent
sees: test runs, file reads, greps) is redacted as :meth:`veil.core.session.Session.append`
redacts a tool result. Reported, per gate (``aho``: one Aho-Corasick pass with ahocorasick-rs;
``plain``: one ``in`` per anchor, the fallback without it):

* µs per KB of text and µs per observation (median of the repetitions);
* the same texts through :func:`veil.core.prompt.tags.distinct_runs` (the scan capture makes of every
  tool result), timed interleaved with it: the ratio says what redaction adds to capture's
  own text work whatever the machine's speed at the moment;
* how many observations redaction changed (real trajectories hold no credential: each change
  would be a false positive to look at).

Usage: ``python bench/bench_redaction.py [--small] [--repeat N] [--data DIR]`` (``--small``: 6
files; ``--data``: the trajectories folder, default ``../shared/data/trajectories``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import veil  # noqa: F401
except ImportError:  # pragma: no cover - a bare checkout
    sys.path.insert(0, str(ROOT))

from veil.core.prompt.tags import distinct_runs  # noqa: E402
from veil.core.safety.redaction import Redactor, _aho  # noqa: E402

TRAJ = ROOT.parent / "shared" / "data" / "trajectories"


def observations(folder: Path, limit: int | None) -> list[str]:
    """Tool results (user / tool turns) of the mini-swe-agent trajectories under ``folder``
    (none when the folder is absent)."""
    files = sorted(folder.glob("mini-swe-agent*/*.json"))
    texts: list[str] = []
    for path in files[:limit]:
        for message in json.loads(path.read_text(encoding="utf-8")).get("messages", []):
            content = message.get("content")
            if message.get("role") in ("user", "tool") and isinstance(content, str) and content:
                texts.append(content)
    return texts


def time_pass(fn, texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        fn(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="6 trajectory files only")
    parser.add_argument("--repeat", type=int, default=7, help="timed passes per gate")
    parser.add_argument("--data", type=Path, default=TRAJ, help="the trajectories folder")
    args = parser.parse_args()
    texts = observations(args.data, 6 if args.small else None)
    if not texts:  # the shared data ships beside the repository, not in it
        print(f"| redaction | skipped: no trajectories under {args.data} |")
        return
    kb = sum(len(t) for t in texts) / 1024
    print(f"{len(texts)} observations, {kb:.0f} KB (mean {kb * 1024 / len(texts):.0f} chars)")
    gates = ["aho", "plain"] if _aho is not None else ["plain"]
    print("| gate | µs / KB | µs / observation | x distinct_runs | changed |")
    print("|---|---|---|---|---|")
    for gate in gates:
        red = Redactor(gate=gate)
        changed = sum(red.text(t) is not t for t in texts)
        red_times, run_times = [], []
        for _ in range(args.repeat):  # interleaved: both see the same machine state
            red_times.append(time_pass(red.text, texts))
            run_times.append(time_pass(distinct_runs, texts))
        red_s, run_s = statistics.median(red_times), statistics.median(run_times)
        print(
            f"| {gate} | {red_s / kb * 1e6:.1f} | {red_s / len(texts) * 1e6:.1f} | "
            f"{red_s / run_s:.2f} | {changed} |"
        )


if __name__ == "__main__":
    main()
