"""The latency ``veil proxy`` adds to a chat request (issue 22 part 2), against a direct call to
the same upstream in the same run.

    python bench/bench_proxy.py            # 10k live items, 200 requests
    python bench/bench_proxy.py --small    # 1k live items, 20 requests (CI)

The upstream is :class:`veil.testing.scripted_server.ScriptedOpenAIServer` on 127.0.0.1 (a thread of
this process, answering "ok" at once, no window). The proxy runs under uvicorn in a subprocess
(``--serve`` mode of this script) over a temporary project with the context layer (veil_fsrs
scorer and eviction, veil_compaction) and an upstream window of 10^9 tokens, so no request is
under pressure: what is timed is the proxy's steady-state cost per request. Before serving, the
conversation's veil session is seeded with ``--items`` live items (``bench_scoring.make_items``:
the synthetic steady-state live set the hook benchmark uses).

The client is the openai SDK (one keep-alive connection per path). The conversation grows by an
assistant reply and a user message per request (about 60 tokens), so each proxied request
captures two new messages, fits the prompt and forwards it. Each round sends the same history
once through the proxy and once directly to the upstream, alternating which goes first. Rows:
wall-clock milliseconds per request, median and p95, and the added latency (proxied minus
direct, per round).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_scoring beside this file
try:  # installed, or run from a checkout
    import veil_proxy  # noqa: F401

    import veil  # noqa: F401
except ImportError:  # pragma: no cover - a bare checkout
    sys.path[:0] = [
        str(ROOT),
        *(str(ROOT / "plugins" / p) for p in ("veil_fsrs", "veil_compaction", "veil_http")),
        str(ROOT / "plugins" / "veil_proxy"),
    ]

MODEL = "gpt-4o-mini"
SESSION = "bench"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(project: Path, port: int, items: int) -> None:
    """The proxy over ``project``, its ``bench`` conversation seeded with ``items`` live items;
    runs until killed."""
    import dataclasses

    import uvicorn
    import veil_compaction
    import veil_fsrs
    from bench_scoring import NOW, make_items
    from veil_proxy import create_app

    from veil.core.app import open_veil
    from veil.core.settings import load_config
    from veil.core.types import new_id

    config = load_config(project)
    config.settings.context.rescue_embeddings = "off"  # model time, not the proxy's
    plugins = (
        ("veil_fsrs", veil_fsrs),
        ("veil_fsrs_evict", veil_fsrs.evict_plugin),
        ("veil_compaction", veil_compaction),
    )
    veil = open_veil(project, config=config, use_entry_points=False, extra_plugins=plugins)
    app = create_app(veil, token="", host="127.0.0.1")
    conversation = app.state.proxy.book.get("x:" + SESSION, MODEL)
    session = conversation.session
    live = [dataclasses.replace(i, id=new_id("item"), tags=list(i.tags)) for i in make_items(items)]
    session.clock_override = NOW
    session.step = max(i.step for i in live)
    session.add_items(live)
    print(f"seeded {len(session.live_items)} live items", file=sys.stderr, flush=True)
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--small", action="store_true", help="1k items, 20 requests (CI)")
    parser.add_argument("--items", type=int, default=None, help="live items (10,000)")
    parser.add_argument("--requests", type=int, default=None, help="rounds (200)")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    items = args.items or (1_000 if args.small else 10_000)
    rounds = args.requests or (20 if args.small else 200)
    if args.serve:
        serve(Path(args.serve), args.port, items)
        return

    import httpx
    import openai

    from veil.testing.scripted_server import ScriptedOpenAIServer

    started_at = dt.datetime.now(dt.timezone.utc)
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(default="ok") as upstream:
        project = Path(tmp)
        (project / ".veil").mkdir()
        auth = {"providers": {"scripted": upstream.provider()}}
        (project / ".veil" / "auth.json").write_text(json.dumps(auth))
        settings = {"models": {"main": {"model": MODEL, "contextWindow": 1_000_000_000}}}
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
        port = free_port()
        env = {
            **os.environ,
            "VEIL_ALLOW_PROJECT_PROVIDERS": "1",
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        env.pop("VEIL_HTTP_TOKEN", None)
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(project),
                "--port",
                str(port),
                "--items",
                str(items),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if httpx.get(base + "/v1/models", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the proxy did not start: {proc.stderr.read()[-3000:]}")
                time.sleep(0.2)
            proxied, direct = run_rounds(openai, base, upstream.url, rounds)
        finally:
            proc.terminate()
            proc.wait(30)
    report(items, rounds, proxied, direct, started_at, args)


def run_rounds(openai, proxy_base: str, upstream_url: str, rounds: int):
    """``rounds`` requests through each path; returns the two lists of milliseconds."""
    via_proxy = openai.OpenAI(
        base_url=proxy_base + "/v1",
        api_key="unused",
        max_retries=0,
        default_headers={"X-Veil-Session": SESSION},
    )
    direct = openai.OpenAI(base_url=upstream_url, api_key="sk-scripted-test-key", max_retries=0)
    history = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Start with the failing test in tests/test_config.py."},
    ]

    def timed(client) -> float:
        t0 = time.perf_counter()
        reply = client.chat.completions.create(model=MODEL, messages=history, max_tokens=64)
        elapsed = (time.perf_counter() - t0) * 1000
        assert reply.choices[0].message.content == "ok"
        return elapsed

    for _ in range(3):  # warm-up: connections, imports, caches (not counted)
        timed(direct)
    timed(via_proxy)
    history.extend([{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Go on."}])
    proxied: list[float] = []
    plain: list[float] = []
    for n in range(rounds):
        if n % 2:
            plain.append(timed(direct))
            proxied.append(timed(via_proxy))
        else:
            proxied.append(timed(via_proxy))
            plain.append(timed(direct))
        history.extend(
            [
                {"role": "assistant", "content": "ok"},
                {
                    "role": "user",
                    "content": f"Step {n}: now check src/pkg/mod_{n % 7}.py and the handler "
                    f"handler_{n} that parse_config calls; report what changed.",
                },
            ]
        )
    return proxied, plain


def report(items, rounds, proxied, direct, started_at, args) -> None:
    added = [p - d for p, d in zip(proxied, direct, strict=True)]
    command = "python bench/bench_proxy.py" + (" --small" if args.small else "")
    print(f"# veil proxy: added latency per request ({command})\n")
    print(
        f"{started_at:%Y-%m-%d %H:%M} UTC, {platform.machine()} {platform.processor() or ''}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; {items:,} live items, "
        f"{rounds} rounds\n"
    )
    print("| path | requests | median ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for name, samples in (("direct to upstream", direct), ("through veil proxy", proxied)):
        print(
            f"| {name} | {len(samples)} | {statistics.median(samples):.2f} | "
            f"{percentile(samples, 0.95):.2f} |"
        )
    print(
        f"| **added by the proxy** | {len(added)} | {statistics.median(added):.2f} | "
        f"{percentile(added, 0.95):.2f} |"
    )


if __name__ == "__main__":
    main()
