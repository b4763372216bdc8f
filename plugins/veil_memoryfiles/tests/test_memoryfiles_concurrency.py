"""Two real processes append 500 entries each to the same MEMORY.md: none lost, none doubled.

The workers run under the C locale with UTF-8 mode off and write CJK and emoji, so the test also
checks that files are UTF-8 whatever the locale.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from veil_memoryfiles.entries import parse

N_PER_PROCESS = 500

WORKER = r"""
import sys, time
from pathlib import Path
from veil_memoryfiles.store import append_entry

path, tag, n, max_lines, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
while not Path(go).exists():
    time.sleep(0.005)
statuses = set()
for i in range(n):
    # ASCII-only source: under LC_ALL=C a non-ASCII -c argument cannot even be decoded
    body = f"{tag} \u6761\u76ee {i} \U0001f9e0" if i % 2 else f"{tag} entry {i}\nsecond line of {tag}-{i}"
    statuses.add(append_entry(Path(path), body, max_lines=max_lines).status)
print(sorted(statuses))
"""


def expected_contents() -> set[str]:
    out = set()
    for tag in ("p0", "p1"):
        for i in range(N_PER_PROCESS):
            out.add(f"{tag} 条目 {i} 🧠" if i % 2 else f"{tag} entry {i}\nsecond line of {tag}-{i}")
    return out


def run_two_writers(path: Path, max_lines: int) -> None:
    go = path.parent / "go"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        LC_ALL="C",
        LANG="C",
        PYTHONUTF8="0",
        PYTHONCOERCECLOCALE="0",
        PYTHONIOENCODING="ascii",
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(path),
                tag,
                str(N_PER_PROCESS),
                str(max_lines),
                str(go),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p0", "p1")
    ]
    time.sleep(0.5)  # both interpreters are up and polling before they start together
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "['written']"


def all_entries(folder: Path) -> list[str]:
    contents = []
    for f in sorted(folder.glob("*.md")):
        data = f.read_bytes()
        contents.extend(e.content for e in parse(data.decode("utf-8")).entries)
    return contents


@pytest.mark.timeout(300)
def test_two_processes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    run_two_writers(path, max_lines=10**9)
    contents = all_entries(tmp_path)
    assert len(contents) == 2 * N_PER_PROCESS
    assert set(contents) == expected_contents()
    assert "条目 1 🧠".encode() in path.read_bytes()  # UTF-8 under LC_ALL=C
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.timeout(300)
def test_two_processes_with_archiving_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    run_two_writers(path, max_lines=300)
    contents = all_entries(tmp_path)  # MEMORY.md and archive-YYYY-MM.md together
    assert len(contents) == 2 * N_PER_PROCESS
    assert set(contents) == expected_contents()
    assert len(path.read_text("utf-8").splitlines()) <= 300
    assert list(tmp_path.glob("archive-*.md"))
