"""How long each veil command takes to start, as a whole process (issue 30), with the import
profile that explains it, and optionally a second installation (the baseline) in the same run.

    python bench/bench_startup.py                              # 5 runs of each command
    python bench/bench_startup.py --baseline OTHER/.venv/bin/python   # old beside new
    python bench/bench_startup.py --small                      # 1 run each, no warm-up run,
                                                               # no profile (CI)

Each command runs as users run it, ``<venv>/bin/veil ...``, in a fresh temporary project, with
a private ``VEIL_HOME`` whose ``auth.json`` points at
:class:`veil.testing.scripted_server.ScriptedOpenAIServer` (a thread of this process on
127.0.0.1, answering "hello" at once) and names ``gpt-4o-mini`` with a ``contextWindow``, as
the README's auth.json example does. Rows, each the median over the runs:

* ``veil --help``: start to exit.
* ``veil -p hi``: start to exit, the answer printed (one model call).
* ``REPL prompt``: start of ``veil`` in a pseudo-terminal to its prompt ``› ``; ``REPL /exit``:
  ``/exit`` sent to the process gone.
* ``serve first answer`` / ``proxy first answer``: from the line where uvicorn reports the
  server running to the answer of the first request that calls the model (``POST
  /sessions`` then ``POST /sessions/{id}/messages`` for ``veil serve``; ``POST
  /v1/chat/completions`` for ``veil proxy``); ``serve start`` / ``proxy start``: process start
  to that line; ``... SIGTERM``: SIGTERM to the process gone.

Wall-clock seconds, and the CPU seconds (user + system) of the process, which depend less on
what else the machine runs: the machine this project runs on is shared, so old and new are
measured in the same run, interleaved (new, old, new, old...). The import profile
(``-X importtime``, one more run of each command of the new installation) lists the top-level
imports by cumulative time: what a command still loads before it can answer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import pty
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4o-mini"
CONTEXT_WINDOW = 128_000
TARGETS = {
    "veil --help": 0.3,
    "veil -p hi": 1.5,
    "REPL prompt": 1.5,
    "REPL /exit": 5.0,
    "serve first answer": 1.0,
    "proxy first answer": 1.0,
    "serve SIGTERM": 5.0,
    "proxy SIGTERM": 5.0,
}
"""Issue 30's targets in seconds (the exits: its 5-second limit)."""

READY = re.compile(rb"Uvicorn running on http://[^:]+:(\d+)")
PROMPT = "› ".encode()


@dataclass
class Run:
    """One measured figure: wall-clock and CPU seconds (None: the command did not get there)."""

    wall: float | None
    cpu: float | None = None


@dataclass
class Install:
    """A veil installation to time: its Python and the ``veil`` script beside it."""

    label: str
    python: Path
    runs: dict[str, list[Run]] = field(default_factory=dict)

    @property
    def veil(self) -> Path:
        return self.python.parent / "veil"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PYCACHE = Path(tempfile.gettempdir()) / "veil-bench-startup-pycache"
"""Where the timed processes keep their compiled modules (``PYTHONPYCACHEPREFIX``): a user's
installation has them (pip compiles at install time, Python writes them at first import), and
``PYTHONDONTWRITEBYTECODE`` (set on this project's machines) would have every run compile veil
from source. A warm-up run of each command fills it before anything is timed."""


def environment(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without its ``VEIL_*`` variables, with ``VEIL_HOME`` and
    compiled modules kept in :data:`PYCACHE`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    env.update(
        VEIL_HOME=str(home),
        PYTHONPYCACHEPREFIX=str(PYCACHE),
        TERM="dumb",
        COLUMNS="100",
        LINES="30",
        **(extra or {}),
    )
    return env


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap(pid: int) -> None:
    """Kill and wait for ``pid``."""
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def run_to_end(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """Start ``args`` and wait for it to exit; None figures when it fails or times out."""
    cpu = children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return Run(None)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(f"{' '.join(args)}: exit {proc.returncode}\n{err.decode()[-2000:]}\n")
        return Run(None)
    return Run(wall, children_cpu() - cpu)


def time_repl(install: Install, project: Path, env: dict[str, str], timeout: float) -> list[Run]:
    """``veil`` in a pseudo-terminal: seconds to its prompt, then from ``/exit`` to its end."""
    master, slave = pty.openpty()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: the pseudo-terminal is its terminal
        os.setsid()
        os.dup2(slave, 0)
        os.dup2(slave, 1)
        os.dup2(slave, 2)
        os.close(master)
        os.chdir(project)
        os.execve(str(install.veil), [str(install.veil)], env)
    os.close(slave)
    try:
        seen = _read_until(master, lambda b: PROMPT in b, start + timeout)
        if seen is None:
            reap(pid)
            return [Run(None), Run(None)]
        prompt = time.perf_counter() - start
        os.write(master, b"/exit\r")
        sent = time.perf_counter()
        _read_until(master, lambda b: False, sent + timeout)  # until the terminal closes
        deadline = sent + timeout
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            reap(pid)
            return [Run(prompt), Run(None)]
        return [Run(prompt), Run(time.perf_counter() - sent)]
    finally:
        os.close(master)


def _read_until(fd: int, done: Callable[[bytes], bool], deadline: float) -> bytes | None:
    """Read ``fd`` until ``done(everything read)`` or end of file; None at the deadline."""
    seen = b""
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end closed
            return seen
        if not chunk:
            return seen
        seen += chunk
        if done(seen):
            return seen
    return None


class _Drain:
    """Reads a pipe on a thread until it closes (a child that writes more than a pipe holds
    must not block on it), and waits for a pattern in what it read."""

    def __init__(self, pipe: Any) -> None:
        self.data = b""
        self._pipe = pipe
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for chunk in iter(lambda: self._pipe.read1(65536), b""):
            with self._changed:
                self.data += chunk
                self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[bytes], deadline: float) -> re.Match[bytes] | None:
        """The first match of ``pattern`` in what was read, waiting up to ``deadline``."""
        with self._changed:
            while True:
                found = pattern.search(self.data)
                left = deadline - time.perf_counter()
                if found is not None or left <= 0 or not self._thread.is_alive():
                    return found
                self._changed.wait(min(left, 0.05))

    def finish(self, timeout: float) -> bytes:
        """Everything read once the pipe closed (or after ``timeout`` seconds)."""
        self._thread.join(timeout)
        return self.data


def time_server(
    install: Install,
    project: Path,
    env: dict[str, str],
    command: str,
    first_request: Callable[[str], None],
    timeout: float,
) -> list[Run]:
    """``veil serve`` / ``veil proxy`` on a free port: seconds to uvicorn's "running" line,
    from it to the first model answer, and from SIGTERM to the process gone."""
    import httpx  # noqa: F401 - imported before the clock starts

    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(install.veil), command, "--port", str(port)], cwd=project, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    drain = _Drain(proc.stderr)
    try:
        if drain.wait_for(READY, start + timeout) is None:
            return [Run(None)] * 3
        ready = time.perf_counter()
        try:
            first_request(f"http://127.0.0.1:{port}")
        except Exception as exc:  # noqa: BLE001 - a failed request is a missing figure
            sys.stderr.write(f"veil {command}: first request failed: {exc}\n")
            return [Run(ready - start), Run(None), Run(None)]
        answered = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return [Run(ready - start), Run(answered - ready), Run(None)]
        return [Run(ready - start), Run(answered - ready), Run(time.perf_counter() - answered)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drain.finish(timeout)
        proc.stderr.close()


def serve_first_turn(base: str) -> None:
    """Create a session and post one message (the turn calls the model)."""
    import httpx

    with httpx.Client(base_url=base, timeout=120) as client:
        created = client.post("/sessions", json={})
        created.raise_for_status()
        answer = client.post(f"/sessions/{created.json()['id']}/messages", json={"content": "hi"})
        answer.raise_for_status()


def proxy_first_completion(base: str) -> None:
    """One chat completion through the proxy."""
    import httpx

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=base, timeout=120) as client:
        client.post("/v1/chat/completions", json=body).raise_for_status()


def make_project(base: Path, url: str) -> tuple[Path, Path]:
    """A project folder and a ``VEIL_HOME`` whose auth.json points at the scripted server."""
    home, project = base / "home", base / "project"
    home.mkdir(parents=True)
    project.mkdir()
    auth = {
        "providers": {"local": {"type": "openai", "base_url": url, "api_key": "sk-bench-key"}},
        "models": {"main": {"model": MODEL, "contextWindow": CONTEXT_WINDOW}},
    }
    (home / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    return project, home


def measure(install: Install, url: str, timeout: float) -> None:
    """One run of every command of ``install``, each in a fresh project."""
    with tempfile.TemporaryDirectory(prefix="veil-bench-startup-") as tmp:
        project, home = make_project(Path(tmp), url)
        env = environment(home)
        add = install.runs.setdefault
        add("veil --help", []).append(
            run_to_end([str(install.veil), "--help"], project, env, timeout)
        )
        add("veil -p hi", []).append(
            run_to_end([str(install.veil), "-p", "hi"], project, env, timeout)
        )
        prompt, leave = time_repl(install, project, env, timeout)
        add("REPL prompt", []).append(prompt)
        add("REPL /exit", []).append(leave)
        for command, request in (("serve", serve_first_turn), ("proxy", proxy_first_completion)):
            start, first, stop = time_server(install, project, env, command, request, timeout)
            add(f"{command} start", []).append(start)
            add(f"{command} first answer", []).append(first)
            add(f"{command} SIGTERM", []).append(stop)


def import_profile(install: Install, url: str, timeout: float, top: int) -> dict[str, list]:
    """``-X importtime`` of ``veil --help``, ``veil -p hi`` and ``veil serve`` up to its first
    answer: the ``top`` top-level imports by cumulative milliseconds, per command."""
    out: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="veil-bench-imports-") as tmp:
        project, home = make_project(Path(tmp), url)
        env = environment(home, {"PYTHONPROFILEIMPORTTIME": "1"})
        for label, args in (("veil --help", ["--help"]), ("veil -p hi", ["-p", "hi"])):
            proc = subprocess.run(
                [str(install.veil), *args], cwd=project, env=env, capture_output=True,
                timeout=timeout, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            out[label] = top_imports(proc.stderr.decode("utf-8", "replace"), top)
        port = free_port()
        proc = subprocess.Popen(
            [str(install.veil), "serve", "--port", str(port)], cwd=project, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        drain = _Drain(proc.stderr)
        try:
            if drain.wait_for(READY, time.perf_counter() + timeout) is not None:
                serve_first_turn(f"http://127.0.0.1:{port}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        log = drain.finish(timeout)
        proc.stderr.close()
        out["veil serve + first answer"] = top_imports(log.decode("utf-8", "replace"), top)
    return out


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def top_imports(stderr: str, top: int) -> list[tuple[str, float]]:
    """From ``-X importtime`` output: ``(module, cumulative ms)`` of the imports made by veil's
    own modules or the interpreter's start (nesting depth 0 or 1), largest first."""
    rows = []
    for line in stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m and len(m.group(3)) <= 3:  # depth 0 ("| name") or 1 ("|   name")
            rows.append((m.group(4), int(m.group(2)) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:top]


def median(runs: list[Run], attr: str) -> float | None:
    values = [getattr(r, attr) for r in runs]
    if not values or any(v is None for v in values):
        return None
    return statistics.median(values)


def show(value: float | None) -> str:
    return "failed" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="1 run of each, no profile (CI)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument(
        "--baseline", type=Path, help="the Python of another veil installation to time too"
    )
    parser.add_argument("--top", type=int, default=12, help="imports listed per command")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per command")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs = 1 if args.small else args.runs

    from veil.testing.scripted_server import ScriptedOpenAIServer

    installs = [Install("new", Path(sys.executable))]
    if args.baseline is not None:
        installs.append(Install("baseline", args.baseline))
    for install in installs:
        if not install.veil.exists():
            parser.error(f"no veil script beside {install.python}")
    profiles: dict[str, dict[str, list]] = {}
    with ScriptedOpenAIServer(default="hello") as server:
        for install in installs if not args.small else ():  # untimed: fills PYCACHE
            measure(Install("warm-up", install.python), server.url, args.timeout)
        for _ in range(runs):
            for install in installs:
                measure(install, server.url, args.timeout)
        if not args.small:
            for install in installs:
                profiles[install.label] = import_profile(
                    install, server.url, args.timeout, args.top
                )

    labels = list(installs[0].runs)
    if args.json:
        out = {
            i.label: {
                k: {"wall": median(v, "wall"), "cpu": median(v, "cpu"), "runs": len(v)}
                for k, v in i.runs.items()
            }
            for i in installs
        }
        print(json.dumps({"figures": out, "imports": profiles, "targets": TARGETS}, indent=2))
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{dt.date.today()} · {platform.machine()} · {os.cpu_count()} CPUs · load {load:.1f} · "
        f"Python {platform.python_version()} · median of {runs} run(s), wall s (CPU s)"
    )
    head = "| command | target | " + " | ".join(i.label for i in installs) + " |"
    print(head)
    print("|" + "---|" * (2 + len(installs)))
    for label in labels:
        cells = []
        for install in installs:
            values = install.runs.get(label, [])
            wall, cpu = median(values, "wall"), median(values, "cpu")
            cells.append(show(wall) + (f" ({cpu:.2f})" if cpu is not None else ""))
        target = TARGETS.get(label)
        print(f"| {label} | {'' if target is None else f'<= {target}'} | {' | '.join(cells)} |")
    for install, commands in profiles.items():
        for command, rows in commands.items():
            listed = ", ".join(f"{name} {ms:.0f}" for name, ms in rows)
            print(f"\nimports of {install} `{command}` (cumulative ms): {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
