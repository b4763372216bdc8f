"""Benchmark of the compaction plugin (issue 5): observation masking, chunked summarisation for a
full compaction on an 8k-token model, and defaultCompaction runs, over long synthetic histories.

    python bench/bench_compaction.py            # 2,000- and 10,000-step histories
    python bench/bench_compaction.py --small    # 200 steps, fewer repetitions (CI)

Offline and deterministic: the summariser is veil_compaction.testing.ScriptedSummariser (no model
weights, no network), so the times are veil's own cost (transcript rendering, token counting,
chunking, merging, the SQLite write), not a model's. Histories are seeded
(veil_compaction.testing.synthetic_history: 0-3 parallel tool calls per step, results of 50-1,500
characters). Token figures use veil's estimate (veil.core.models.tokens). Replay figures over the recorded
trajectories (summed prompt tokens and misses, issue 5) come with ``veil replay --compaction``.

Prints a Markdown table; times are wall-clock milliseconds (median over the repetitions).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import veil_compaction
from veil_compaction.masking import mask_observations
from veil_compaction.planning import choose_cut
from veil_compaction.summariser import Summariser
from veil_compaction.testing import ScriptedSummariser, synthetic_history

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.models.tokens import count_message_tokens
from veil.core.prompt.compaction import run_default
from veil.core.settings import load_config

RESULT_CHARS = (50, 1500)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median milliseconds of ``repeat`` calls of ``fn``, and the last call's value."""
    times, value = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        value = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), value


def bench_masking(steps: int, repeat: int) -> list[str]:
    history = synthetic_history(steps, seed=1, result_chars=RESULT_CHARS)
    ms, masked = timed(lambda: mask_observations(history, 10), repeat)
    before, after = count_message_tokens(history), count_message_tokens(masked)
    return [
        f"| masking (10 steps kept) | {steps:,} | {len(history):,} | {ms:.2f} | "
        f"tokens {before:,} -> {after:,} |"
    ]


def bench_full(steps: int, repeat: int) -> list[str]:
    history = synthetic_history(steps, seed=2, result_chars=RESULT_CHARS)
    cut = choose_cut(history, 4)
    part = history[:cut]
    model = ScriptedSummariser(context_window=8192, reply_tokens=1500)
    summariser = Summariser(model)

    def run() -> object:
        model.requests.clear()
        model.request_tokens.clear()
        return summariser.summarise(part, previous="earlier summary")

    ms, outcome = timed(run, repeat)
    return [
        f"| full compaction summary, 8k model | {steps:,} | {cut:,} summarised | {ms:.1f} | "
        f"{count_message_tokens(part):,} tokens in {outcome.chunks} chunks, {outcome.calls} "
        f"calls, largest request {outcome.largest_request:,} <= {summariser.input_budget:,} |"
    ]


def bench_default(steps: int, root: Path) -> list[str]:
    history = synthetic_history(steps, seed=3, result_chars=RESULT_CHARS)
    project = root / f"default_{steps}"
    project.mkdir()
    config = load_config(project)
    model = ScriptedSummariser(context_window=8192, reply_tokens=1500)
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_compaction", veil_compaction),),
    )
    try:
        session = veil.new_session()
        session.messages = list(history)  # in memory: the store write measured is the commit
        sizes, times = [], []
        while True:
            started = time.perf_counter()
            result = run_default(session)
            times.append((time.perf_counter() - started) * 1000)
            if result.already_up_to_date:
                break
            sizes.append(result.new_size)
    finally:
        veil.close()
    first = ", ".join(f"{s:,}" for s in sizes[:4])
    return [
        f"| defaultCompaction (50%) until up to date | {steps:,} | {len(history):,} | "
        f"{statistics.median(times[:-1]):.1f} per run | {len(sizes)} runs, compactSize "
        f"{first}{', ...' if len(sizes) > 4 else ''} |"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small sizes for CI")
    args = parser.parse_args()
    mask_sizes = [200] if args.small else [2_000, 10_000]
    sizes = [200] if args.small else [2_000]
    repeat = 3 if args.small else 5
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VEIL_HOME"] = str(Path(tmp) / "home")  # never the user's ~/.veil
        rows: list[str] = []
        for steps in mask_sizes:
            rows += bench_masking(steps, repeat)
        for steps in sizes:
            rows += bench_full(steps, 1 if not args.small else repeat)
            rows += bench_default(steps, Path(tmp))
    print(
        f"compaction benchmark ({'small' if args.small else 'full'}): python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}"
    )
    print()
    print("| case | steps | messages | ms (median) | figures |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
