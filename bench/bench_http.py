"""Throughput and latency of veil's HTTP API (issue 6), with a bare Starlette app as the ceiling.

    python bench/bench_http.py            # 3,000 requests or 10 s per route, 8 connections,
                                          # in 3 interleaved rounds
    python bench/bench_http.py --small    # 200 requests or 2 s per route (CI)

Each server runs under uvicorn in its own subprocess on a free 127.0.0.1 port (one worker,
``--serve`` mode of this script), so the load generator (httpx.AsyncClient, N concurrent
connections, bounded in count and in time) does not share an interpreter with it. Rows:

* ``hello (bare Starlette)``: ``GET /`` answering ``{"hello": "world"}``: the ceiling.
* ``GET /health``: veil's stack (auth-free middleware, routing, JSON) with no store access.
* ``GET /memory/MEMORY.md``, ``PUT /memory/BENCH.md``: the memory-files plugin's routes (a real
  memory file from ../shared/data/memfiles when present, else a synthetic one of 100 entries);
  PUT is a literal, atomic, locked overwrite (fsync included).
* ``POST /sessions/{id}/recall``: recall over the global MEMORY.md (the plugin's BM25) and the
  project's warm / cold tiers (empty here, so no embedding model runs).

When veil_memoryfiles is not installed, its rows say so instead of a figure. Latencies are
client-side wall-clock milliseconds (p50, p99); req/s = completed requests / elapsed time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

MEMFILE = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "memfiles"
    / ("memexport_MEMORY_index.md")
)
HAS_MEMORYFILES = importlib.util.find_spec("veil_memoryfiles") is not None


# -- servers (run in a subprocess) -------------------------------------------------------------


def hello_app():
    """The ceiling: a bare Starlette app with one JSON route."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def hello(request):
        return JSONResponse({"hello": "world"})

    return Starlette(routes=[Route("/", hello)])


def veil_app(project: Path):
    """veil's app over ``project``: the core plus veil_memoryfiles when installed (no entry
    points, so the figures do not depend on which other plugins happen to be installed)."""
    from veil_http import create_app

    from veil.core.app import open_veil

    plugins = []
    if HAS_MEMORYFILES:
        import veil_memoryfiles

        plugins.append(("veil_memoryfiles", veil_memoryfiles))
    veil = open_veil(project, use_entry_points=False, extra_plugins=tuple(plugins))
    return create_app(veil, token="")


def serve(kind: str, port: int, project: str | None) -> None:
    """Run one server until killed."""
    import uvicorn

    app = hello_app() if kind == "hello" else veil_app(Path(project or "."))
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    kind: str, project: Path | None, env: dict[str, str]
) -> tuple[subprocess.Popen, str]:
    """Start a server subprocess and wait until it answers; return it and its base URL."""
    port = free_port()
    args = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    if project is not None:
        args += ["--project", str(project)]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"
    probe = "/" if kind == "hello" else "/health"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(base + probe, timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{kind} server did not start: {proc.stderr.read()}")
        time.sleep(0.1)


# -- load generator ---------------------------------------------------------------------------


@dataclass
class Result:
    """Figures of one route."""

    name: str
    done: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rps(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def load(
    name: str,
    base: str,
    method: str,
    path: str,
    *,
    body: bytes | None,
    headers: dict[str, str],
    count: int,
    seconds: float,
    connections: int,
    warmup: int = 20,
) -> Result:
    """Send ``count`` requests (or as many as fit in ``seconds``) over ``connections``
    concurrent connections; a non-2xx answer counts as an error."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        for _ in range(warmup):
            await client.request(method, path, content=body, headers=headers)
        latencies: list[float] = []
        errors = 0
        issued = 0
        started = time.perf_counter()
        deadline = started + seconds

        async def worker() -> None:
            nonlocal errors, issued
            while issued < count and time.perf_counter() < deadline:
                issued += 1
                t0 = time.perf_counter()
                response = await client.request(method, path, content=body, headers=headers)
                latencies.append((time.perf_counter() - t0) * 1000)
                if not 200 <= response.status_code < 300:
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    return Result(name, len(latencies), errors, elapsed, latencies)


# -- the run ------------------------------------------------------------------------------------


def memory_text() -> tuple[str, str]:
    """The memory file to serve, and where it came from."""
    if MEMFILE.is_file():
        return MEMFILE.read_text(encoding="utf-8"), f"real ({MEMFILE.name})"
    entries = [
        f"<!-- 2025-03-{1 + n % 28:02d} -->\nProject fact number {n}: the service on "
        f"port {5000 + n} uses module_{n}.py and test_{n}.py."
        for n in range(100)
    ]
    return "\n\n".join(entries) + "\n", "synthetic (100 entries)"


@dataclass
class Target:
    """A route to load: ``name``, request shape, and whether it needs veil_memoryfiles."""

    name: str
    base: str
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] | None = None
    needs_memory: bool = False


def merge(name: str, parts: list[Result]) -> Result:
    """One result from several rounds of the same route."""
    return Result(
        name,
        sum(p.done for p in parts),
        sum(p.errors for p in parts),
        sum(p.seconds for p in parts),
        [x for p in parts for x in p.latencies_ms],
    )


def run(args: argparse.Namespace) -> int:
    """Start both servers, load every route in interleaved rounds, print the table."""
    rounds = 1 if args.small else args.rounds
    count, seconds = (200, 2.0) if args.small else (args.requests, args.seconds)
    connections = args.connections
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    project = Path(tempfile.mkdtemp(prefix="veil-bench-http-"))
    env["VEIL_HOME"] = str(project / "home")
    text, source = memory_text()
    (project / ".veil" / "memory").mkdir(parents=True)
    (project / ".veil" / "memory" / "MEMORY.md").write_text(text, encoding="utf-8")
    query = json.dumps({"query": "memory export index", "limit": 10}).encode()
    json_headers = {"content-type": "application/json"}

    servers: list[subprocess.Popen] = []
    parts: dict[str, list[Result]] = {}
    try:
        hello, hello_base = start_server("hello", None, env)
        servers.append(hello)
        server, base = start_server("veil", project, env)
        servers.append(server)
        session = httpx.post(base + "/sessions", timeout=30).json()["id"]
        targets = [
            Target("hello (bare Starlette)", hello_base, "GET", "/"),
            Target("GET /health", base, "GET", "/health"),
            Target("GET /memory/MEMORY.md", base, "GET", "/memory/MEMORY.md", needs_memory=True),
            Target(
                "PUT /memory/BENCH.md",
                base,
                "PUT",
                "/memory/BENCH.md",
                text.encode("utf-8"),
                {"content-type": "text/markdown"},
                needs_memory=True,
            ),
            Target(
                "POST /sessions/{id}/recall",
                base,
                "POST",
                f"/sessions/{session}/recall",
                query,
                json_headers,
            ),
        ]
        # Rounds alternate the routes so that drift in machine load hits all of them alike.
        for _ in range(rounds):
            for t in targets:
                if t.needs_memory and not HAS_MEMORYFILES:
                    continue
                result = asyncio.run(
                    load(
                        t.name,
                        t.base,
                        t.method,
                        t.path,
                        body=t.body,
                        headers=t.headers or {},
                        count=max(1, count // rounds),
                        seconds=seconds / rounds,
                        connections=connections,
                    )
                )
                parts.setdefault(t.name, []).append(result)
        hits = httpx.post(
            base + f"/sessions/{session}/recall", content=query, headers=json_headers, timeout=30
        ).json()
    finally:
        for proc in servers:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# veil HTTP bench ({dt.date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load_avg:.1f}, Python "
        f"{platform.python_version()})"
    )
    print(
        f"command: python bench/bench_http.py{' --small' if args.small else ''}; "
        f"{connections} connections, at most {count} requests or {seconds:g} s per route in "
        f"{rounds} interleaved round(s); memory file: {source}, "
        f"{len(text.encode('utf-8'))} bytes; recall hits: {len(hits.get('hits', []))}"
    )
    print()
    print("| route | requests | errors | req/s | p50 ms | p99 ms | % of ceiling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ceiling = merge(targets[0].name, parts[targets[0].name])
    empty = []
    for t in targets:
        if t.name not in parts:
            print(f"| {t.name} | veil_memoryfiles not installed | | | | | |")
            continue
        row = merge(t.name, parts[t.name])
        if row.done == row.errors:
            empty.append(t.name)
        share = 100 * row.rps / ceiling.rps if ceiling.rps else float("nan")
        print(
            f"| {row.name} | {row.done} | {row.errors} | {row.rps:,.0f} | {row.pct(0.5):.2f} "
            f"| {row.pct(0.99):.2f} | {share:.0f}% |"
        )
    if empty:
        print(f"no successful request on: {', '.join(empty)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="200 requests or 2 s per route")
    parser.add_argument("--requests", type=int, default=3000, help="per route (default 3000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per route (default 10)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--serve", choices=["hello", "veil"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.project)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
