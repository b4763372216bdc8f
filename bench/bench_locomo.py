"""Recall quality on LoCoMo (DESIGN.md "Measures / LoCoMo recall@k"; issue 3 target >= 0.62).

For each conversation of ``../shared/data/locomo/locomo10_dev.json``: a fresh project whose store
holds every turn as a warm item ``"speaker: text"`` (one veil session per LoCoMo session, the
session's date as the item's time, tags by :func:`veil.core.prompt.tags.extract_tags` as capture gives
them), embedded by veil's configured model (all-MiniLM-L6-v2). For each question of categories
1-4, gold = its evidence ids split on ``;``, ``,`` and spaces, deduplicated, ids absent from the
conversation dropped (the question is skipped when none remain); recall@10 = |gold ∩ top 10| /
|gold|, averaged over questions.

Rows of the table:

* ``BM25``: veil's keyword leg alone (FTS5 ``porter unicode61``, query stop words dropped).
* ``dense``: veil's vector leg alone (MiniLM cosine).
* ``RRF``: reciprocal-rank fusion (k = 60) of the two legs' top 100.
* ``veil recall``: :meth:`veil.default_plugins.recall.search.Recall.search`, what ``veil_recall``
  runs.

Usage: ``python bench/bench_locomo.py [--small] [--json] [--cache FILE] [--data FILE]``.
``--small`` runs one conversation (conv-30). ``--cache FILE`` keeps embeddings in a SQLite file
between runs (same content-hash keys as veil's own cache), so re-runs skip the model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:  # installed (pip install -e .) or run from a checkout
    import veil  # noqa: F401
except ImportError:  # pragma: no cover - a bare checkout
    sys.path.insert(0, str(ROOT))

from veil.core.app import Veil, open_veil  # noqa: E402
from veil.core.prompt.tags import extract_tags  # noqa: E402
from veil.core.types import ContextItem  # noqa: E402
from veil.default_plugins.recall import fusion  # noqa: E402
from veil.default_plugins.recall.registry import recall_for  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo10_dev.json"
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10
SMALL_SAMPLE = "conv-30"
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_SESSION_KEY = re.compile(r"session_(\d+)")


def parse_evidence(evidence: Any, dia_ids: set[str] | frozenset[str]) -> list[str]:
    """Gold dialogue ids of one question (DESIGN.md "Measures").

    Each entry is split on ``;``, ``,`` and whitespace; pieces are kept in first-seen order,
    deduplicated, and only when they are exactly an id of the conversation (``"D30:05"`` is not
    ``"D30:5"``; ``"D"`` and ``"D:11:26"`` are dropped). Non-list evidence, non-string entries
    and empty lists give ``[]``.
    """
    if not isinstance(evidence, list):
        return []
    gold: list[str] = []
    for entry in evidence:
        if not isinstance(entry, str):
            continue
        for piece in _EVIDENCE_SPLIT.split(entry):
            if piece and piece in dia_ids and piece not in gold:
                gold.append(piece)
    return gold


def session_time(text: Any) -> float | None:
    """Unix time of a LoCoMo session date such as ``"1:56 pm on 8 May, 2023"`` (UTC), or None."""
    if not isinstance(text, str):
        return None
    try:
        when = dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return when.replace(tzinfo=dt.timezone.utc).timestamp()


def conversation_turns(sample: dict[str, Any]) -> list[tuple[int, float | None, dict[str, Any]]]:
    """``[(session number, session time, turn)]`` in session order then turn order; malformed
    turns (no speaker, text or dia_id) are left out."""
    conv = sample.get("conversation") or {}
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    out = []
    for number, key in sessions:
        when = session_time(conv.get(f"{key}_date_time"))
        for turn in conv[key]:
            if isinstance(turn, dict) and all(
                isinstance(turn.get(f), str) for f in ("speaker", "text", "dia_id")
            ):
                out.append((number, when, turn))
    return out


def load_conversation(veil: Veil, sample: dict[str, Any]) -> dict[str, str]:
    """Store every turn of ``sample`` as a warm item in ``veil``'s store (one veil session per
    LoCoMo session); return ``{item id: dia_id}``."""
    store = veil.store
    by_session: dict[int, list[ContextItem]] = {}
    dia_of: dict[str, str] = {}
    for number, when, turn in conversation_turns(sample):
        session_id = f"{sample.get('sample_id', 'conv')}-s{number}"
        if number not in by_session:
            store.create_session(session_id, "default", None, {})
            by_session[number] = []
        content = f"{turn['speaker']}: {turn['text']}"
        item = ContextItem(
            content=content,
            kind="episodic",
            source="user",
            session_id=session_id,
            tags=extract_tags(content),
            created_at=when or 0.0,
            last_access=when or 0.0,
        )
        by_session[number].append(item)
        dia_of[item.id] = turn["dia_id"]
    for items in by_session.values():
        veil.tiers.store_items(items, "warm")
    return dia_of


def _recall_at(gold: list[str], ranked_dia: list[str]) -> float:
    top = set(ranked_dia[:K])
    return len(set(gold) & top) / len(gold)


def _seed_cache(veil: Veil, cache: Path | None) -> None:
    if cache is None or not cache.exists():
        return
    conn = veil.store.conn
    conn.execute("ATTACH DATABASE ? AS seed", (str(cache),))
    try:
        conn.execute("INSERT OR IGNORE INTO main.embeddings SELECT * FROM seed.embeddings")
    finally:
        conn.execute("DETACH DATABASE seed")


def _save_cache(veil: Veil, cache: Path | None) -> None:
    if cache is None:
        return
    out = sqlite3.connect(cache)
    out.execute(
        "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
        " dim INTEGER NOT NULL, vector BLOB NOT NULL)"
    )
    rows = veil.store.conn.execute("SELECT key, model, dim, vector FROM embeddings").fetchall()
    out.executemany(
        "INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?)", [tuple(r) for r in rows]
    )
    out.commit()
    out.close()


def run_sample(sample: dict[str, Any], cache: Path | None = None) -> dict[str, Any]:
    """Index one conversation and score every category 1-4 question.

    Returns:
        ``{"sample_id", "turns", "questions", "embed_s", "search_ms": [...],
        "scores": {method: {category: [recall@10, ...]}}}``.
    """
    methods = ("BM25", "dense", "RRF", "veil recall")
    scores: dict[str, dict[int, list[float]]] = {m: {c: [] for c in CATEGORIES} for m in methods}
    search_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        veil = open_veil(tmp, use_entry_points=False)
        try:
            _seed_cache(veil, cache)
            dia_of = load_conversation(veil, sample)
            ids = frozenset(dia_of.values())
            questions = [
                q
                for q in sample.get("qa") or []
                if isinstance(q, dict)
                and q.get("category") in CATEGORIES
                and isinstance(q.get("question"), str)
            ]
            recall = recall_for(veil)
            start = time.perf_counter()
            recall.flush()
            recall.embedder.embed([q["question"] for q in questions])
            embed_s = time.perf_counter() - start
            counted = 0
            for q in questions:
                gold = parse_evidence(q.get("evidence"), ids)
                if not gold:
                    continue
                counted += 1
                text = q["question"]
                t0 = time.perf_counter()
                hits = recall.search(text, K)
                search_ms.append((time.perf_counter() - t0) * 1000)
                keyword = [i for i, _ in recall.keyword_search(text, fusion.KEYWORD_DEPTH)]
                qvec = recall.embedder.embed([text])[0][0]
                dense = [i for i, _ in recall.vector_search(qvec, fusion.KEYWORD_DEPTH)]
                ranked = {
                    "BM25": keyword,
                    "dense": dense,
                    "RRF": fusion.rrf([keyword, dense]),
                    "veil recall": [h.id for h in hits],
                }
                for method, order in ranked.items():
                    dia = [dia_of[i] for i in order[:K] if i in dia_of]
                    scores[method][q["category"]].append(_recall_at(gold, dia))
            _save_cache(veil, cache)
        finally:
            veil.close()
    return {
        "sample_id": sample.get("sample_id"),
        "turns": len(dia_of),
        "questions": counted,
        "embed_s": embed_s,
        "search_ms": search_ms,
        "scores": scores,
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``{method: {"1".."4": mean, "all": mean over questions, "n": count}}``."""
    out: dict[str, dict[str, float]] = {}
    for method in results[0]["scores"]:
        row: dict[str, float] = {}
        every: list[float] = []
        for cat in CATEGORIES:
            values = [v for r in results for v in r["scores"][method][cat]]
            every += values
            row[str(cat)] = statistics.fmean(values) if values else float("nan")
        row["all"] = statistics.fmean(every) if every else float("nan")
        row["n"] = len(every)
        out[method] = row
    return out


def _cell(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"  # NaN: no question of that category


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help=f"one conversation ({SMALL_SAMPLE})")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--data", type=Path, default=DATA, help="locomo10 JSON file")
    parser.add_argument("--cache", type=Path, default=None, help="SQLite embedding cache file")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"| LoCoMo | skipped: {args.data} not present |")
        return 0
    try:
        samples = json.loads(args.data.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{args.data}: not a LoCoMo JSON file ({exc})", file=sys.stderr)
        return 2
    if not isinstance(samples, list):
        print(f"{args.data}: expected a list of conversations", file=sys.stderr)
        return 2
    if args.small:
        samples = [s for s in samples if s.get("sample_id") == SMALL_SAMPLE] or samples[:1]
    results = [run_sample(s, args.cache) for s in samples]
    table = summarise(results)
    n = int(next(iter(table.values()))["n"])
    print(
        f"LoCoMo recall@{K}, categories 1-4, {len(results)} conversation(s), {n} questions"
        f" ({platform.machine()}, {os.cpu_count()} CPUs, {dt.date.today().isoformat()})"
    )
    heads = [f"{c} {CATEGORY_NAMES[c]}" for c in CATEGORIES]
    print("| method | " + " | ".join(heads) + " | all |")
    print("|---" * (len(heads) + 2) + "|")
    for method, row in table.items():
        cells = " | ".join(_cell(row[str(c)]) for c in CATEGORIES)
        print(f"| {method} | {cells} | {row['all']:.3f} |")
    counts = {str(c): sum(len(r["scores"]["veil recall"][c]) for r in results) for c in CATEGORIES}
    searches = [ms for r in results for ms in r["search_ms"]]
    embed_s = sum(r["embed_s"] for r in results)
    print(f"\nquestions per category: {counts}")
    print(
        f"veil recall latency: median {statistics.median(searches):.1f} ms over {len(searches)}"
        f" searches; embedding (turns + questions, cache misses only): {embed_s:.1f} s"
    )
    if args.json:
        print(json.dumps({"table": table, "per_category_questions": counts}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
