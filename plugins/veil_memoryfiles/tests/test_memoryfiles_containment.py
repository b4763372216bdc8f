"""Memory files never escape ``.veil/memory`` through a symbolic link (issue 17, part 4): a link
at every name the plugin opens (MEMORY.md, archive-YYYY-MM.md, the lock file, the provenance
record, the ``.veil/memory`` folder and an agent's folder), on the write path and the read path;
and temporary files of interrupted writes are cleaned up by the next write."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import veil_memoryfiles as plugin
from veil_memoryfiles.injection import build_memory_section
from veil_memoryfiles.service import MemoryService

from veil.core.errors import UnsafeVeilPath
from veil.core.types import ToolContext

NOV = datetime(2026, 11, 15, 12, tzinfo=timezone.utc)
SECRET = b"precious: do not touch\n"


def tool(session: SimpleNamespace, name: str, **args: object):
    tools = {t.name: t for t in plugin.register_tools(veil=None)}
    return tools[name].handler(ToolContext(session=session, tool_call_id="c1"), args)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the project, of the kind a hostile link points at."""
    target = tmp_path / "outside" / ".bashrc"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(SECRET)
    return target


def snapshot(path: Path) -> tuple[bytes, int]:
    st = path.stat()
    return path.read_bytes(), st.st_mtime_ns


def agent_dir(project: Path) -> Path:
    return project / ".veil" / "memory" / "agents" / "default"


def test_linked_memory_md_is_refused_on_write_read_search_and_injection(
    project: Path, helpers: SimpleNamespace, victim: Path
) -> None:
    folder = agent_dir(project)
    folder.mkdir(parents=True)
    os.symlink(victim, folder / "MEMORY.md")
    before = snapshot(victim)
    config = helpers.load_config(project)
    session = helpers.fake_session(config)
    for name, args in (
        ("memory_write", {"content": "appended through the link?"}),
        ("memory_read", {"scope": "agent"}),
        ("memory_search", {"query": "precious"}),
    ):
        with pytest.raises(UnsafeVeilPath) as info:
            tool(session, name, **args)
        assert ".veil/memory/agents/default/MEMORY.md" in info.value.message
        assert "symbolic link" in info.value.message
    with pytest.raises(UnsafeVeilPath):
        MemoryService(config, "default").write("via the CLI path", "agent")
    # the prompt says the file could not be read; the outside file's text is not in it
    section = build_memory_section(config, "default", project, 100_000)
    assert section is not None and "precious" not in section.text
    assert "could not be read" in section.text and "symbolic link" in section.text
    assert snapshot(victim) == before


def test_linked_archive_is_refused_when_max_lines_archives_and_on_search(
    project: Path, helpers: SimpleNamespace, victim: Path
) -> None:
    helpers.write_settings(project, {"memory": {"maxLines": 4}})
    config = helpers.load_config(project)
    svc = MemoryService(config, "default")
    svc.write("first fact", "agent", now=NOV)  # 2 lines
    svc.write("second fact", "agent", now=NOV)  # 5 lines: "first" moves to the archive
    archive = agent_dir(project) / "archive-2026-11.md"
    assert archive.read_text(encoding="utf-8") == "<!-- 2026-11-15 -->\nfirst fact\n\n"
    archive.unlink()
    os.symlink(victim, archive)
    before = snapshot(victim)
    memory_md = agent_dir(project) / "MEMORY.md"
    kept = memory_md.read_bytes()
    with pytest.raises(UnsafeVeilPath, match="archive-2026-11.md"):
        svc.write("third fact", "agent", now=NOV)  # would archive "second" through the link
    assert memory_md.read_bytes() == kept  # nothing written: the archive is written first
    with pytest.raises(UnsafeVeilPath, match="archive-2026-11.md"):
        svc.search("precious")
    assert snapshot(victim) == before


def test_linked_lock_file_is_refused_before_it_is_opened(
    project: Path, helpers: SimpleNamespace, victim: Path
) -> None:
    # filelock < 3.15 opens the lock with O_TRUNC through a link: ~/.bashrc would be emptied
    folder = agent_dir(project)
    folder.mkdir(parents=True)
    os.symlink(victim, folder / "MEMORY.md.lock")
    before = snapshot(victim)
    session = helpers.fake_session(helpers.load_config(project))
    with pytest.raises(UnsafeVeilPath, match="MEMORY.md.lock"):
        tool(session, "memory_write", content="a fact")
    assert snapshot(victim) == before and not (folder / "MEMORY.md").exists()


@pytest.mark.parametrize("linked", ["memory", "memory/agents", "memory/agents/default"])
def test_linked_folders_are_refused(
    project: Path, helpers: SimpleNamespace, tmp_path: Path, linked: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = project / ".veil" / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, link)
    config = helpers.load_config(project)
    session = helpers.fake_session(config)
    with pytest.raises(UnsafeVeilPath) as info:
        tool(session, "memory_write", content="a fact")
    assert str(link) in info.value.message
    with pytest.raises(UnsafeVeilPath):
        tool(session, "memory_read")
    with pytest.raises(UnsafeVeilPath):
        tool(session, "memory_search", query="fact")
    assert list(elsewhere.rglob("*")) == []


def test_linked_provenance_record_is_refused(
    project: Path, helpers: SimpleNamespace, victim: Path
) -> None:
    (project / ".veil").mkdir()
    os.symlink(victim, project / ".veil" / "memory-provenance")
    before = snapshot(victim)
    session = helpers.fake_session(helpers.load_config(project))
    with pytest.raises(UnsafeVeilPath, match="memory-provenance"):
        tool(session, "memory_write", content="a fact")
    assert snapshot(victim) == before
    assert not (agent_dir(project) / "MEMORY.md").exists()  # the tag goes first: no write


def test_http_put_and_get_refuse_a_linked_file(
    project: Path, helpers: SimpleNamespace, victim: Path
) -> None:
    from veil_memoryfiles.routes import get_memory_file, put_memory_file

    from veil.core.types import RouteRequest

    memory = project / ".veil" / "memory"
    memory.mkdir(parents=True)
    os.symlink(victim, memory / "MEMORY.md")
    before = snapshot(victim)
    config = helpers.load_config(project)
    for handler, body in ((put_memory_file, b"overwritten"), (get_memory_file, b"")):
        req = RouteRequest(
            method="PUT",
            path_params={"file": "MEMORY.md"},
            query={},
            body=body,
            veil=SimpleNamespace(config=config),
        )
        with pytest.raises(UnsafeVeilPath) as info:
            handler(req)
        assert info.value.http_status == 409
    assert snapshot(victim) == before


def test_interrupted_temp_files_are_removed_at_the_next_write(
    project: Path, helpers: SimpleNamespace
) -> None:
    svc = MemoryService(helpers.load_config(project), "default")
    svc.write("first", "agent", now=NOV)
    folder = agent_dir(project)
    # what a crash between mkstemp and os.replace leaves (veil.core.atomic.atomic_write_bytes)
    mine = folder / ".MEMORY.md.k2j4h5g6.tmp"
    mine.write_bytes(b"half a file")
    sibling_fresh = folder / ".archive-2026-11.md.a1b2c3d4.tmp"
    sibling_fresh.write_bytes(b"a writer of the archive is busy")
    sibling_old = folder / ".archive-2026-10.md.e5f6g7h8.tmp"
    sibling_old.write_bytes(b"left a week ago")
    week_ago = datetime(2026, 11, 8, tzinfo=timezone.utc).timestamp()
    os.utime(sibling_old, (week_ago, week_ago))
    svc.write("second", "agent", now=NOV)
    assert not mine.exists() and not sibling_old.exists()
    assert sibling_fresh.exists()  # may belong to a write in progress
    left = sorted(p.name for p in folder.iterdir())
    assert left == [".archive-2026-11.md.a1b2c3d4.tmp", "MEMORY.md", "MEMORY.md.lock"]
