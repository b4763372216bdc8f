"""Benchmark of the memory-files plugin (issue 4): memory_write and memory_search on a
10,000-entry MEMORY.md, and the maxLines archive step when a write crosses the cap.

    python bench/bench_memory.py            # 10,000 entries
    python bench/bench_memory.py --small    # 1,000 entries, fewer repetitions (CI)

Prints a Markdown table of wall-clock times in milliseconds (median and 95th percentile over the
repetitions). Every write includes the lock, parsing the whole file, the temp-file write, fsync
and rename: that is the real cost of one memory_write. Entries are synthetic (seeded random words,
one in five spanning three lines) so runs are comparable.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from veil_memoryfiles.entries import count_lines, parse
from veil_memoryfiles.injection import build_memory_section
from veil_memoryfiles.search import clear_cache, search_files
from veil_memoryfiles.store import append_entry

NOW = dt.datetime(2026, 11, 15, 12, tzinfo=dt.timezone.utc)
NO_BYTE_CAP = {"max_file_bytes": 10**12}
"""The synthetic files are larger than memory.maxFileBytes' default (256 KiB): lift it so that
the rows measure what their names say (maxLines alone decides what is archived)."""


def synthetic_entries(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct entries of 5-30 words from a 3,000-word vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)] + ["port", "deploy", "database", "cache", "测试", "部署"]
    out = []
    for i in range(n):
        words = rng.choices(vocab, k=rng.randint(5, 30))
        text = f"fact {i}: " + " ".join(words)
        if i % 5 == 0:
            text += f"\nsecond line {i}\nthird line with port {5000 + i % 100}"
        out.append(text)
    return out


def build_file(path: Path, n: int) -> None:
    """Write an ``n``-entry memory file in one go (the format append_entry produces)."""
    parts = [f"<!-- 2026-11-01 -->\n{e}\n" for e in synthetic_entries(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("\n".join(parts).encode("utf-8"))


def timed(
    fn: Callable[[], object], repeat: int, before: Callable[[], object] | None = None
) -> list[float]:
    """Milliseconds of ``repeat`` calls of ``fn`` (``before`` runs untimed before each call)."""
    out = []
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def row(name: str, ms: list[float], note: str = "") -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p95:.2f} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="1,000 entries, fewer repetitions")
    args = parser.parse_args()
    n = 1_000 if args.small else 10_000
    repeat = 10 if args.small else 30

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "MEMORY.md"
        build_file(path, n)
        size_kb = path.stat().st_size / 1024
        lines = count_lines(path.read_text("utf-8"))

        counter = iter(range(10**9))
        rows.append(
            row(
                "memory_write (append, no archive)",
                timed(
                    lambda: append_entry(
                        path, f"new fact {next(counter)}", max_lines=10**9, now=NOW, **NO_BYTE_CAP
                    ),
                    repeat,
                ),
                f"{n:,}-entry file, {size_kb:,.0f} KiB",
            )
        )
        rows.append(
            row(
                "memory_write (skipped_duplicate)",
                timed(
                    lambda: append_entry(
                        path, "new fact 0", max_lines=10**9, now=NOW, **NO_BYTE_CAP
                    ),
                    repeat,
                ),
                "re-append of the last entry",
            )
        )
        append_entry(path, "new fact 0", max_lines=10**9, now=NOW, **NO_BYTE_CAP)

        queries = ["port deploy", "database cache w17", "部署 测试", "w1 w2 w3 w4", "second line"]
        q = iter(range(10**9))
        rows.append(
            row(
                "memory_search, cold (parse + index)",
                timed(
                    lambda: search_files([("agent", path)], queries[next(q) % len(queries)], 10),
                    repeat,
                    before=clear_cache,
                ),
                f"BM25 over {n:,} entries, top 10",
            )
        )
        search_files([("agent", path)], "warm", 10)
        rows.append(
            row(
                "memory_search, warm (file unchanged)",
                timed(
                    lambda: search_files([("agent", path)], queries[next(q) % len(queries)], 10),
                    repeat,
                ),
                "parsed file cached by inode/size/mtime",
            )
        )
        rows.append(
            row(
                "parse only",
                timed(lambda: parse(path.read_text("utf-8")), repeat),
                f"{lines:,} lines",
            )
        )

        # Archive: a write that crosses the cap by a little (one entry moves) ...
        cap = count_lines(path.read_text("utf-8"))
        moved = []
        rows.append(
            row(
                "memory_write crossing maxLines (1 entry archived)",
                timed(
                    lambda: moved.append(
                        append_entry(
                            path,
                            f"archive trigger {next(counter)}",
                            max_lines=cap,
                            now=NOW,
                            **NO_BYTE_CAP,
                        ).archived
                    ),
                    repeat,
                ),
                f"cap {cap:,} lines; moved {sum(moved) / max(1, len(moved)):.1f} entries/write",
            )
        )
        # ... and one that halves the file (about n/2 entries move at once).
        half_ms = []
        half_moved = []
        for i in range(max(3, repeat // 5)):
            build_file(path, n)
            (Path(tmp) / "archive-2026-11.md").unlink(missing_ok=True)
            half = count_lines(path.read_text("utf-8")) // 2
            t0 = time.perf_counter()
            r = append_entry(path, f"halving {i}", max_lines=half, now=NOW, **NO_BYTE_CAP)
            half_ms.append((time.perf_counter() - t0) * 1000)
            half_moved.append(r.archived)
        rows.append(
            row(
                "memory_write crossing maxLines (half archived)",
                half_ms,
                f"{statistics.mean(half_moved):,.0f} entries moved at once",
            )
        )

        # Injection: the memory section for a 128k window (10% cap) over the same file.
        from veil.core.settings import load_config

        project = Path(tmp) / "proj"
        mem = project / ".veil" / "memory" / "agents" / "default" / "MEMORY.md"
        build_file(mem, n)
        os.environ.setdefault("VEIL_HOME", str(Path(tmp) / "home"))
        config = load_config(project)
        rows.append(
            row(
                "injection section (128k window, 10% cap)",
                timed(
                    lambda: build_memory_section(config, "default", project, 128_000),
                    max(3, repeat // 5),
                ),
                "every entry repository-provided (quoted)",
            )
        )
        from veil_memoryfiles.service import MemoryService
        from veil_memoryfiles.trust import clear_cache as clear_trust_cache

        svc = MemoryService(config, "default")
        svc.trust("agent")  # the user vouches for the file: every entry tagged
        clear_trust_cache()
        rows.append(
            row(
                "injection section, entries veil wrote",
                timed(
                    lambda: build_memory_section(config, "default", project, 128_000),
                    max(3, repeat // 5),
                    before=clear_trust_cache,
                ),
                "tags checked per entry (HMAC-SHA256), cold",
            )
        )
        big = {"memory": {"maxFileBytes": 10**12, "maxEntryBytes": 16384}}
        (project / ".veil" / "settings.json").write_text(__import__("json").dumps(big))
        svc = MemoryService(load_config(project), "default")
        rows.append(
            row(
                "memory_write from the model (tag + copy guard)",
                timed(
                    lambda: svc.write(f"model fact {next(counter)} w1 w2", "agent", origin="agent"),
                    repeat,
                ),
                f"{n:,}-entry file, all entries tagged",
            )
        )

    print(
        f"veil memory-files benchmark: {n:,} entries; {dt.date.today().isoformat()}; "
        f"{platform.machine()} {os.cpu_count()} CPUs; Python {platform.python_version()}; "
        f"command: {' '.join([Path(sys.executable).name, *sys.argv])}"
    )
    print()
    print("| operation | runs | median ms | p95 ms | notes |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
