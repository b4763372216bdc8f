"""memory_search: BM25 ranking checked by hand, whole entries, readable scopes only, archives."""

from __future__ import annotations

import math
import shutil
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from veil_memoryfiles.search import tokenize
from veil_memoryfiles.service import MemoryService
from veil_memoryfiles.store import overwrite

from veil.core.errors import BadRequest

NOV = datetime(2026, 11, 15, tzinfo=timezone.utc)
DEC = datetime(2026, 12, 2, tzinfo=timezone.utc)


def test_tokenize() -> None:
    assert tokenize("memory_write uses Port5051, HTTP/2!") == [
        "memory",
        "write",
        "uses",
        "port5051",
        "http",
        "2",
    ]
    assert tokenize("使用双层记忆系统") == ["使用", "用双", "双层", "层记", "记忆", "忆系", "系统"]
    assert tokenize("MEMORY.md 用于 长期") == ["memory", "md", "用于", "长期"]
    assert tokenize("记 x") == ["记", "x"]


def test_bm25_scores_match_a_hand_computation(project: Path, helpers: SimpleNamespace) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    svc.write("port 5051", "agent", now=NOV)  # D1: 2 terms
    svc.write("port port http", "agent", now=NOV)  # D2: 3 terms
    svc.write("database url", "global", now=NOV)  # D3: 2 terms
    # N = 3 documents, avgdl = 7/3; k1 = 1.2, b = 0.75; IDF(t) = ln(1 + (N - n + 0.5)/(n + 0.5))
    idf_port = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # ln 1.6
    idf_http = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm_d1 = 1.2 * (1 - 0.75 + 0.75 * 2 / (7 / 3))
    norm_d2 = 1.2 * (1 - 0.75 + 0.75 * 3 / (7 / 3))
    d1 = idf_port * 1 * 2.2 / (1 + norm_d1)
    d2 = idf_port * 2 * 2.2 / (2 + norm_d2) + idf_http * 1 * 2.2 / (1 + norm_d2)
    assert (round(d1, 5), round(d2, 5)) == (0.49918, 1.47637)  # worked out on paper too
    hits = svc.search("PORT http")
    assert [(h.content, h.scope, h.date) for h in hits] == [
        ("port port http", "agent", "2026-11-15"),
        ("port 5051", "agent", "2026-11-15"),
    ]
    assert [h.score for h in hits] == pytest.approx([d2, d1], rel=1e-9)
    assert svc.search("url", limit=5)[0].content == "database url"
    assert svc.search("nothing-here") == []
    assert len(svc.search("port", limit=1)) == 1


def test_entries_come_back_whole_with_date_and_file(
    project: Path, helpers: SimpleNamespace
) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    body = "Deploy steps:\n\n```bash\nmake deploy PORT=5051\n```\n| env | url |\n|---|---|"
    svc.write(body, "global", now=NOV)
    svc.write("unrelated", "global", now=DEC)
    (hit,) = svc.search("deploy")
    assert hit.content == body
    assert svc.hit_dict(hit) == {
        "scope": "global",
        "file": ".veil/memory/MEMORY.md",
        "date": "2026-11-15",
        "content": body,
        "score": round(hit.score, 4),
        "provenance": "agent",  # written through veil (issue 17)
    }
    text = svc.format_hits("deploy", [hit])
    assert ".veil/memory/MEMORY.md · 2026-11-15" in text and body in text


def test_ties_rank_newer_entries_first(project: Path, helpers: SimpleNamespace) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    svc.write("cache key a", "agent", now=NOV)
    svc.write("cache key b", "agent", now=DEC)
    svc.write("cache key c", "agent", now=NOV)
    assert [h.content for h in svc.search("cache")] == ["cache key b", "cache key c", "cache key a"]


def test_only_readable_scopes_are_searched(project: Path, helpers: SimpleNamespace) -> None:
    helpers.write_agent(project, "carol", {"memory": {"enabled": False}})
    config = helpers.load_config(project)
    MemoryService(config, "alice").write("alpha secret of alice", "agent", now=NOV)
    MemoryService(config, "alice").write("alpha shared fact", "global", now=NOV)
    bob = MemoryService(config, "bob")
    assert [(h.scope, h.content) for h in bob.search("alpha")] == [("global", "alpha shared fact")]
    carol = MemoryService(config, "carol")  # memory disabled: global is not readable
    assert carol.search("alpha") == []
    overwrite(carol.path("agent"), b"<!-- 2026-01-01 -->\nalpha of carol\n")
    assert [h.content for h in carol.search("alpha")] == ["alpha of carol"]


def test_archived_entries_stay_searchable(project: Path, helpers: SimpleNamespace) -> None:
    helpers.write_settings(project, {"memory": {"maxLines": 5}})
    svc = MemoryService(helpers.load_config(project), "default")
    for text in ("zebra crossing", "apple pie", "banana split"):
        svc.write(text, "agent", now=NOV)
    assert not svc.path("agent").read_text("utf-8").count("zebra")
    (hit,) = svc.search("zebra")
    assert svc.hit_dict(hit)["file"] == ".veil/memory/agents/default/archive-2026-11.md"


def test_hand_written_files_are_searchable_by_their_header(
    project: Path, helpers: SimpleNamespace, memfiles_dir: Path
) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    svc.path("global").parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(memfiles_dir / "kikibot_MEMORY_zh.md", svc.path("global"))
    (hit,) = svc.search("记忆系统")
    assert hit.date is None and hit.content.startswith("# MEMORY.md - Long-term Memory")


def test_cache_sees_a_replaced_file_of_the_same_size(
    project: Path, helpers: SimpleNamespace
) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    overwrite(svc.path("agent"), b"<!-- 2026-01-01 -->\nkiwi\n")
    assert [h.content for h in svc.search("kiwi")] == ["kiwi"]
    overwrite(svc.path("agent"), b"<!-- 2026-01-01 -->\nlime\n")
    assert svc.search("kiwi") == []
    assert [h.content for h in svc.search("lime")] == ["lime"]


def test_bad_query_or_limit_names_the_field(project: Path, helpers: SimpleNamespace) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    with pytest.raises(BadRequest, match="query"):
        svc.search("   ")
    with pytest.raises(BadRequest, match="limit"):
        svc.search("x", limit=0)
