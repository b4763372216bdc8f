"""Full compaction with real summaries (issue 5): a few recorded sessions replayed with the
bundled SmolLM2-135M as the ``compact`` model, beside the offline extractive summariser and the
no-management baseline, all counted with cl100k_base in the same run.

Usage: python bench/bench_compaction_bundled.py [--budget 8000] [--files N] [--threads N]
[--summaries PATH] [--small]

The bundled model reads prompts at ~40-60 tokens/s on one CPU thread, so each compaction of an
8k-token context costs minutes: the default replays the two shortest mini-swe-agent sessions.
``--small`` (CI) replays the first 8 steps of the shortest one at a 2,500-token budget, which
forces one small compaction. The summaries the model wrote are saved as JSON (``--summaries``)
so a reader can judge them. Eviction is off (``veil_fsrs_evict`` blocked): veil's eviction
keeps the prompt under the full-compaction trigger, so with it on compaction would rarely run.
Prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
DATA = SHARED / "mini-swe-agent"


class RecordingSummariser:
    """Wraps a ChatModel: forwards every call and keeps the reply text and the time it took."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def complete(self, messages: list[dict], tools: Any = None, on_token: Any = None) -> Any:
        started = time.perf_counter()
        reply = self.model.complete(messages, tools=tools, on_token=on_token)
        self.calls.append(
            {
                "seconds": round(time.perf_counter() - started, 1),
                "prompt_tokens": (reply.usage or {}).get("prompt_tokens"),
                "completion_tokens": (reply.usage or {}).get("completion_tokens"),
                "summary": reply.message.get("content") or "",
            }
        )
        return reply


def _shortest(count: int) -> list[Path]:
    from veil.default_plugins.replay.formats import load_trajectory

    files = sorted(DATA.glob("*.traj.json"))
    return sorted(files, key=lambda f: (len(load_trajectory(str(f)).steps), f.name))[:count]


def _row(name: str, p: dict[str, Any], full: int, extra: str = "") -> str:
    return (
        f"| {name} | {p['prompt_tokens']:,} | {p['prompt_tokens'] / full:.3f} | "
        f"{p['peak_prompt_tokens']:,} | {p['misses']} | {extra} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--summaries", type=Path, default=None)
    parser.add_argument("--small", action="store_true", help="8 steps of one file (CI)")
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"| compaction, bundled model | skipped: {DATA} not present |")
        return 0
    try:
        from veil_bundled.model import BundledModel, bundled_available
    except ImportError:
        print(
            "| compaction, bundled model | skipped: the veil_bundled distribution is not installed |"
        )
        return 0
    from veil.default_plugins.replay.report import run_replay

    if not bundled_available():
        print("| compaction, bundled model | skipped: llama-cpp-python or the GGUF is missing |")
        return 0
    files = _shortest(1 if args.small else args.files)
    budget = 2500 if args.small else args.budget
    steps = 8 if args.small else None
    model = RecordingSummariser(BundledModel(n_threads=args.threads))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as project:
        for name, summariser in (("offline", None), ("bundled", model)):
            started = time.perf_counter()
            results[name] = run_replay(
                [str(f) for f in files],
                budget,
                project_dir=project,
                compaction="full",
                # eviction keeps the prompt under the full-compaction trigger; without it the
                # prompt reaches the trigger and full compaction alone is measured
                disable=("veil_fsrs_evict",),
                summariser=summariser,
                max_steps=steps,
            )
            results[name]["seconds"] = time.perf_counter() - started
    total = results["bundled"]["total"]
    full = total["full"]["prompt_tokens"]
    names = ", ".join(f.name for f in files)
    print(
        f"full compaction replay of {names}: {total['steps']} steps, budget {budget}; "
        f"bundled model {len(model.calls)} summarisation calls, "
        f"{sum(c['seconds'] for c in model.calls):.0f} s of model time"
    )
    print("| policy | prompt tokens (sum) | ratio to full | peak | misses | notes |")
    print("|---|---:|---:|---:|---:|---|")
    print(_row("veil full compaction, bundled SmolLM2-135M", total["veil"], full))
    offline = results["offline"]["total"]["veil"]
    print(_row("veil full compaction, offline extractive", offline, full))
    for base in ("full", "masking", "recency"):
        print(_row(base, total[base], full))
    if args.summaries:
        args.summaries.write_text(json.dumps(model.calls, indent=2) + "\n")
        print(f"summaries written to {args.summaries}")
    elif model.calls:
        print("first summary:\n" + model.calls[0]["summary"][:1500])
    if args.small and not model.calls:
        print("no compaction happened in the small run", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
