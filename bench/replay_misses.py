"""Where veil's misses come from (issue 18): veil and the masking baseline replayed side by side
on the same recordings, every reference either one misses classified.

Usage:
    python bench/replay_misses.py FILE.traj.json [FILE ...] [--budget 8000] [--json OUT.json]
    python bench/replay_misses.py --subset 4 [--every 8] [--data DIR]

``--subset K`` takes every ``--every``-th file of each of the four mini-swe-agent folders from
the K-th (session 9's subsets: A = 0, B = 4). For each file it prints veil's and masking's
misses; then, for the references only veil misses, how long ago the last observation holding
them was (steps) and whether an earlier assistant turn also held them (masking keeps every turn;
veil may evict turns), and the same ages for the references only masking misses. Definitions of
references and misses: ``veil.default_plugins.replay.measures`` (DESIGN.md "Measures"); veil runs
with the settings of the current directory's project, as ``veil replay`` does.

It also prices one way of holding more: an evicted assistant turn that kept its command (the
tool call's ``command``) in the prompt. Per file, ``held_by_commands`` counts veil's misses
that the commands of the turns evicted at that step hold (substring test, as a miss is), and
``command_tokens`` what those commands would have cost (cl100k_base, summed over steps); the
same for the first line of each command (at most 100 characters): ``held_by_first_lines``,
``first_line_tokens``. Nothing is changed in veil's prompt: these are what-if counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench_replay import DATA, FOLDERS  # the replay benchmark's data folder and its four folders

AGES = ((2, "1-2"), (5, "3-5"), (10, "6-10"), (20, "11-20"))


def age_bucket(age: int) -> str:
    """The bucket of an age in steps: ``1-2``, ``3-5``, ``6-10``, ``11-20`` or ``>20``."""
    for bound, name in AGES:
        if age <= bound:
            return name
    return ">20"


def evicted_commands(session: Any) -> list[str]:
    """The ``command`` arguments of the tool calls of ``session``'s assistant turns that are
    evicted now (their message stands as a pointer stub), in message order."""
    out = []
    for index in sorted(session.stubs):
        message = session.messages[index]
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                continue
            if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
                out.append(arguments["command"])
    return out


def classify(path: Path, budget: int, counts: Counter) -> dict[str, Any]:
    """Replay one recording through veil and masking; add the classified misses to ``counts``
    and return the file's totals ``{"file", "steps", "refs", "veil", "masking",
    "held_by_commands", "command_tokens", "held_by_first_lines", "first_line_tokens"}``."""
    from veil.core.models.tokens import cl100k_count
    from veil.default_plugins.replay.formats import load_trajectory
    from veil.default_plugins.replay.measures import SEPARATOR, misses, references_in
    from veil.default_plugins.replay.runner import ObservationMasking
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    traj = load_trajectory(path)
    veil = VeilReplayPolicy(traj, budget)
    masking = ObservationMasking()
    earlier, observed = "", []
    totals = {"file": str(path), "steps": len(traj.steps), "refs": 0, "veil": 0, "masking": 0}
    totals.update(held_by_commands=0, command_tokens=0, held_by_first_lines=0, first_line_tokens=0)
    try:
        for t, step in enumerate(traj.steps):
            refs = references_in(step.assistant, traj.system, traj.task, earlier)
            _, veil_text = veil.prompt_for_step(traj, t)
            _, masking_text = masking.prompt_for_step(traj, t)
            veil_miss, masking_miss = misses(refs, veil_text), misses(refs, masking_text)
            totals["refs"] += len(refs)
            totals["veil"] += len(veil_miss)
            totals["masking"] += len(masking_miss)
            commands = evicted_commands(veil.session)
            first_lines = [c.strip().split("\n")[0][:100] for c in commands]
            for key, texts in (("commands", commands), ("first_lines", first_lines)):
                joined = SEPARATOR.join(texts)
                totals[f"held_by_{key}"] += sum(1 for ref in veil_miss if ref in joined)
                totals[f"{key[:-1]}_tokens"] += sum(cl100k_count(c) for c in texts)
            turns = SEPARATOR.join(s.assistant for s in traj.steps[:t])
            for ref in veil_miss - masking_miss:
                age = t - max(i for i, text in observed if ref in text)
                counts["veil only", "last observation " + age_bucket(age)] += 1
                counts[
                    "veil only", "in an earlier turn" if ref in turns else "observations only"
                ] += 1
            for ref in masking_miss - veil_miss:
                age = t - max(i for i, text in observed if ref in text)
                counts["masking only", "last observation " + age_bucket(age)] += 1
            counts["both", "missed"] += len(veil_miss & masking_miss)
            if step.observation is not None:
                observed.append((t, step.observation))
                earlier = f"{earlier}{SEPARATOR}{step.observation}" if earlier else step.observation
    finally:
        veil.close()
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--subset", type=int, default=None, help="every --every-th file from K")
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from veil.core.errors import BadRequest

    files = list(args.files)
    if args.subset is not None:
        if not args.data.is_dir():
            print(f"--data: no folder {args.data}", file=sys.stderr)
            return 2
        for folder in FOLDERS:
            files += sorted((args.data / folder).iterdir())[args.subset :: args.every]
    if not files:
        parser.error("give recordings or --subset K")
    counts: Counter = Counter()
    rows = []
    print("| file | steps | references | veil misses | masking misses |")
    print("|---|---:|---:|---:|---:|")
    for path in files:
        try:
            row = classify(path, args.budget, counts)
        except BadRequest as exc:  # a recording with no assistant message: nothing to replay
            print(f"skipped {path}: {exc.message}", file=sys.stderr)
            continue
        rows.append(row)
        name = f"{Path(row['file']).parent.name}/{Path(row['file']).name}"
        print(f"| {name} | {row['steps']} | {row['refs']} | {row['veil']} | {row['masking']} |")
    print(
        f"| total | {sum(r['steps'] for r in rows)} | {sum(r['refs'] for r in rows)} | "
        f"{sum(r['veil'] for r in rows)} | {sum(r['masking'] for r in rows)} |"
    )
    steps = max(1, sum(r["steps"] for r in rows))
    print("\n| evicted turns keeping | veil misses held | tokens a step |\n|---|---:|---:|")
    for what, held, tokens in (
        ("their command", "held_by_commands", "command_tokens"),
        ("its first line", "held_by_first_lines", "first_line_tokens"),
    ):
        print(
            f"| {what} | {sum(r[held] for r in rows)} | {sum(r[tokens] for r in rows) / steps:,.0f} |"
        )
    print("\n| misses | class | references |\n|---|---|---:|")
    for (who, what), n in sorted(counts.items()):
        print(f"| {who} | {what} | {n} |")
    if args.json:
        classes = {f"{who}: {what}": n for (who, what), n in sorted(counts.items())}
        args.json.write_text(json.dumps({"files": rows, "classes": classes}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
