"""Loader threads and the end of a veil process (veil.core.background), each in a fresh Python
process: stopping is for good there, and finish() ends the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path


def _slow_chain(folder: Path, count: int = 200, pause: float = 0.05) -> None:
    """Package ``slowchain``: module ``m0`` imports ``m1``... each after ``pause`` seconds, so
    importing it takes ``count * pause`` seconds (10 s), in many imports."""
    package = folder / "slowchain"
    package.mkdir()
    (package / "__init__.py").write_text("from slowchain import m0\n")
    for i in range(count):
        nxt = f"from slowchain import m{i + 1}\n" if i + 1 < count else ""
        (package / f"m{i}.py").write_text(f"import time\ntime.sleep({pause})\n{nxt}")


def _run(folder: Path, code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=folder,
        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_loader_stops_at_its_next_import(tmp_path):
    _slow_chain(tmp_path)
    proc = _run(
        tmp_path,
        """
        import sys, time
        from veil.core import background
        background.start_loader("slow", lambda: __import__("slowchain"))
        time.sleep(0.5)  # inside the chain
        started = time.monotonic()
        left = background.stop_loaders(timeout=5)
        print("left", left, "took", round(time.monotonic() - started, 2))
        print("imported", "slowchain" in sys.modules, "m199" in str(list(sys.modules)))
        print("again", background.start_loader("late", lambda: None))
        """,
    )
    assert proc.returncode == 0, proc.stderr
    left, imported, again = proc.stdout.splitlines()
    assert left.startswith("left [] took ") and float(left.split()[-1]) < 1.0
    assert imported == "imported False False"  # the partial import was taken back
    assert again == "again None"  # nothing starts once the process is ending


def test_finish_runs_the_exit_handlers_and_leaves_with_the_status(tmp_path):
    """Non-daemon workers (a ThreadPoolExecutor's) are told to stop and joined, the atexit
    handlers run, buffered output is flushed, and the status is the one given."""
    proc = _run(
        tmp_path,
        """
        import atexit, sys
        from concurrent.futures import ThreadPoolExecutor
        from veil.core import background
        pool = ThreadPoolExecutor(2)
        pool.submit(print, "task ran")
        atexit.register(lambda: print("atexit ran"))
        sys.stdout.write("buffered, no newline")
        background.finish(3)
        print("never printed")
        """,
        timeout=30,
    )
    assert proc.returncode == 3
    assert proc.stdout.splitlines() == ["task ran", "buffered, no newlineatexit ran"]


def test_the_exit_does_not_wait_for_a_loader_inside_a_long_import(tmp_path):
    """The conditions of issue 30's hang: an object whose finalizer imports (as litellm's
    AsyncHTTPHandler.__del__ does) and a loader thread in the middle of a 10-second import when
    the process ends. finish() stops the loader at its next import and leaves without running
    the interpreter's finalizers. (The hang itself needs the loader frozen inside the import
    lock's short critical section: plugins/veil_repl/tests/test_repl_exit.py meets it in real
    runs, 1 of 50 on main.)"""
    _slow_chain(tmp_path)
    (tmp_path / "late_module.py").write_text("X = 1\n")
    started = time.monotonic()
    proc = _run(
        tmp_path,
        """
        import time
        from veil.core import background

        class ImportsWhenCollected:
            def __del__(self):
                import late_module  # noqa: F401

        keep = ImportsWhenCollected()
        background.start_loader("slow", lambda: __import__("slowchain"))
        time.sleep(0.5)
        print("leaving", flush=True)
        background.finish(0)
        """,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "leaving\n"
    assert time.monotonic() - started < 15  # the chain alone takes 10 s
