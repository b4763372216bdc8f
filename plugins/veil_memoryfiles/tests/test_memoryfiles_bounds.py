"""Size bounds of memory (issue 17, part 5): memory.maxEntryBytes refuses, memory.maxFileBytes
archives like maxLines, every write path (tool, CLI, the turn loop behind HTTP POST, PUT within
the HTTP body limit); memory_read / memory_search stay within loop.toolOutputChars and page."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
import veil_memoryfiles as plugin
from click.testing import CliRunner
from veil_memoryfiles.backend import files_for
from veil_memoryfiles.errors import MemoryLimitExceeded
from veil_memoryfiles.service import MemoryService
from veil_memoryfiles.store import append_entry

from veil.core.errors import ConfigError
from veil.core.types import ToolContext

NOV = datetime(2026, 11, 15, 12, tzinfo=timezone.utc)
MARK = "<!-- 2026-11-15 -->\n"  # 20 bytes


def tool(session: SimpleNamespace, name: str, **args: object):
    tools = {t.name: t for t in plugin.register_tools(veil=None)}
    return tools[name].handler(ToolContext(session=session, tool_call_id="c1"), args)


@pytest.fixture
def cli() -> click.Group:
    @click.group()
    def root() -> None:
        """Stand-in for veil's top-level command."""

    plugin.register_commands(cli=root)
    return root


# -- settings -----------------------------------------------------------------------------------


def test_defaults_and_validation(project: Path, helpers: SimpleNamespace) -> None:
    mem = helpers.load_config(project).settings.memory
    assert (mem.max_entry_bytes, mem.max_file_bytes) == (16 * 1024, 256 * 1024)
    helpers.write_settings(project, {"memory": {"maxEntryBytes": 2000, "maxFileBytes": 1000}})
    with pytest.raises(ConfigError) as info:
        helpers.load_config(project)
    assert "settings.json" in info.value.message and "maxEntryBytes (2000)" in info.value.message
    helpers.write_settings(project, {"memory": {"maxFileBytes": 0}})
    with pytest.raises(ConfigError, match="memory.maxFileBytes"):
        helpers.load_config(project)
    # agent.json overrides for the agent's own file, and the merge is checked too
    helpers.write_settings(project, {})
    helpers.write_agent(project, "small", {"memory": {"maxEntryBytes": 10, "maxFileBytes": 100}})
    helpers.write_agent(project, "bad", {"memory": {"maxEntryBytes": 300_000}})
    config = helpers.load_config(project)
    svc = MemoryService(config, "small")
    assert (svc.limits("agent").max_entry_bytes, svc.limits("agent").max_file_bytes) == (10, 100)
    assert svc.limits("global").max_entry_bytes == 16 * 1024
    with pytest.raises(ConfigError, match="agents/bad/agent.json: memory.maxEntryBytes"):
        config.memory_for("bad")


# -- maxEntryBytes ---------------------------------------------------------------------------------


def test_entry_over_the_limit_is_refused_and_nothing_is_written(
    project: Path, helpers: SimpleNamespace
) -> None:
    config = helpers.load_config(project)
    session = helpers.fake_session(config)
    path = MemoryService(config, "default").path("agent")
    # the attack: ten writes of 1 MiB made a 10 MB MEMORY.md
    for _ in range(10):
        with pytest.raises(MemoryLimitExceeded) as info:
            tool(session, "memory_write", content="A" * (1 << 20))
    assert info.value.message.startswith(
        "content: 1048576 bytes is over memory.maxEntryBytes (16384 bytes); nothing was written"
    )
    assert (info.value.code, info.value.http_status) == ("MEMORY_LIMIT_EXCEEDED", 413)
    assert not path.exists() and not (project / ".veil" / "memory-provenance").exists()
    # bytes of UTF-8, not characters: 8,193 "é" are 16,386 bytes
    with pytest.raises(MemoryLimitExceeded, match="16386 bytes"):
        tool(session, "memory_write", content="é" * 8193)
    # exactly the limit passes; surrounding whitespace is trimmed before measuring
    out = tool(session, "memory_write", content="  \n" + "B" * 16384 + "\n\n  ")
    assert out.meta["status"] == "written"
    assert path.read_bytes() == f"<!-- {out.meta['date']} -->\n{'B' * 16384}\n".encode()


def test_entry_limit_through_the_turn_loop(project: Path, helpers: SimpleNamespace) -> None:
    # What a POST /sessions/{id}/messages turn runs: the model's tool call gets an error result.
    import veil_memoryfiles

    from veil.core.app import open_veil
    from veil.core.models.llm import LLM
    from veil.testing.scripted_model import ScriptedModel

    config = helpers.load_config(project)
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "memory_write", "arguments": {"content": "x" * 20_000}}]},
            "done",
        ]
    )
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_memoryfiles", veil_memoryfiles),),
    )
    try:
        session = veil.new_session()
        veil.run_turn(session, "remember this log")
        tool_msg = next(m for m in model.calls[1] if m.get("role") == "tool")
        assert tool_msg["content"] == (
            "memory_write: content: 20000 bytes is over memory.maxEntryBytes (16384 bytes); "
            "nothing was written. Write a shorter, focused entry (or raise memory.maxEntryBytes "
            "in .veil/settings.json)"
        )
        assert not (project / ".veil" / "memory" / "agents").exists()
    finally:
        veil.close()


def test_cli_write_over_the_limit(cli: click.Group, project: Path, stored_memory) -> None:
    p = str(project)
    r = CliRunner().invoke(cli, ["memory", "write", "x" * 16385, "--project", p])
    assert r.exit_code == 1 and "memory.maxEntryBytes (16384 bytes)" in r.output
    assert "Traceback" not in r.output
    # stdin is read only up to the limit plus 1 MiB of slack, then refused
    big = b"y" * (16384 + (1 << 20) + 1)
    r = CliRunner().invoke(cli, ["memory", "write", "-", "--project", p], input=big)
    assert r.exit_code == 1 and "standard input is over memory.maxEntryBytes" in r.output
    # whitespace around stdin text is trimmed before the entry is measured
    padded = b"\n" * 100_000 + b"z" * 16384 + b"\n" * 100_000
    r = CliRunner().invoke(cli, ["memory", "write", "-", "--project", p], input=padded)
    assert (r.exit_code, r.output) == (0, "written\n")
    data = stored_memory(project, "agents/default/MEMORY.md").encode()
    assert data.startswith(b"<!-- ") and data.endswith(("-->\n" + "z" * 16384 + "\n").encode())
    assert len(data) == 20 + 16384 + 1


# -- maxFileBytes -------------------------------------------------------------------------------


def test_file_cap_archives_oldest_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    a, b, c = "a" * 30, "b" * 30, "c" * 30
    # entry = 20 (date line) + 30 + 1 = 51 bytes; a blank line (1 byte) separates entries
    r1 = append_entry(path, a, max_lines=500, max_file_bytes=110, max_entry_bytes=50, now=NOV)
    r2 = append_entry(path, b, max_lines=500, max_file_bytes=110, max_entry_bytes=50, now=NOV)
    assert (r1.archived, r2.archived, path.stat().st_size) == (0, 0, 103)
    r3 = append_entry(path, c, max_lines=500, max_file_bytes=110, max_entry_bytes=50, now=NOV)
    # 103 + 1 + 51 = 155 > 110: "a" (51 + its blank line = 52 bytes) moves, 103 bytes are left
    assert (r3.archived, path.stat().st_size) == (1, 103)
    assert r3.archive_path is not None
    assert r3.archive_path.read_bytes() == f"{MARK}{a}\n\n".encode()
    assert path.read_bytes() == f"{MARK}{b}\n\n{MARK}{c}\n".encode()


def test_file_cap_refuses_when_the_header_alone_is_too_big(
    project: Path, helpers: SimpleNamespace
) -> None:
    helpers.write_settings(project, {"memory": {"maxFileBytes": 200, "maxEntryBytes": 50}})
    config = helpers.load_config(project)
    svc = MemoryService(config, "default")
    path = svc.path("agent")
    path.parent.mkdir(parents=True)
    header = ("# notes " + "h" * 181 + "\n").encode()  # 190 bytes
    path.write_bytes(header)
    with pytest.raises(MemoryLimitExceeded) as info:
        svc.write("a new fact", "agent", now=NOV)  # 190 + blank line 1 + 20 + 10 + 1 = 222
    assert info.value.message.startswith(
        "MEMORY.md: its header and the new entry alone take 222 bytes, over "
        "memory.maxFileBytes (200 bytes)"
    )
    assert path.read_bytes() == header
    assert (
        not list(path.parent.glob("archive-*"))
        and not (project / ".veil" / "memory-provenance").exists()
    )


# -- HTTP ----------------------------------------------------------------------------------------


def test_http_put_stays_literal_within_the_body_limit(
    project: Path, helpers: SimpleNamespace, stored_memory
) -> None:
    pytest.importorskip("veil_http")
    import veil_memoryfiles
    from starlette.testclient import TestClient
    from veil_http import create_app

    from veil.core.app import open_veil

    helpers.write_settings(project, {"memory": {"maxFileBytes": 1000, "maxEntryBytes": 100}})
    veil = open_veil(
        project, use_entry_points=False, extra_plugins=(("veil_memoryfiles", veil_memoryfiles),)
    )
    try:
        client = TestClient(
            create_app(veil, max_body_bytes=4096),
            raise_server_exceptions=False,
            base_url="http://127.0.0.1:5051",
        )
        # over maxFileBytes but within the body limit: the seed's literal overwrite stands
        body = b"<!-- 2026-11-15 -->\n" + b"p" * 3000 + b"\n"
        r = client.put("/memory/MEMORY.md", content=body)
        assert r.status_code == 200 and stored_memory(project, "MEMORY.md").encode() == body
        # over the body limit: 413 before anything is written
        r = client.put("/memory/MEMORY.md", content=b"q" * 4097)
        assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert stored_memory(project, "MEMORY.md").encode() == body
        # the next append archives what the PUT left over the file cap
        files = files_for(veil.config, veil)
        MemoryService(veil.config, "default", files).write("small fact", "global", now=NOV)
        assert stored_memory(project, "MEMORY.md") == "<!-- 2026-11-15 -->\nsmall fact\n"
        client.close()
    finally:
        veil.close()


# -- reads and searches within the tool-output cap -------------------------------------------------


def capped_session(helpers: SimpleNamespace, project: Path, chars: int) -> SimpleNamespace:
    helpers.write_settings(project, {"loop": {"toolOutputChars": chars}})
    return helpers.fake_session(helpers.load_config(project))


def test_memory_read_pages_by_lines_within_the_cap(project: Path, helpers: SimpleNamespace) -> None:
    session = capped_session(helpers, project, 400)
    svc = MemoryService(session.config, "default")
    for i in range(40):
        svc.write(f"fact number {i:02d} about the build", "agent", now=NOV)
    whole = svc.read("agent", annotate=True).split("\n")
    assert len(whole) == 2 + 40 * 2 + 39  # heading, blank, 40 entries of 2 lines, 39 blanks
    got: list[str] = []
    offset = 1
    while True:
        out = tool(session, "memory_read", scope="agent", offset=offset)
        assert len(out.content) <= 400
        meta = out.meta
        page = out.content.split("\n\n[showing lines")[0].split("\n")
        assert page == whole[meta["start_line"] - 1 : meta["end_line"]]
        got.extend(page)
        if meta["end_line"] == meta["total_lines"]:
            assert "[showing lines" not in out.content and not meta["truncated"]
            break
        # the page is full: the next line would not have fit in 200 (400 - the note's reserve)
        assert sum(len(x) + 1 for x in page) + len(whole[meta["end_line"]]) + 1 > 200
        assert out.content.endswith(
            f"call memory_read with scope='agent', offset={meta['end_line'] + 1} for more]"
        )
        offset = meta["end_line"] + 1
    assert got == whole
    out = tool(session, "memory_read", scope="agent", offset=4, limit=2)
    assert out.content.split("\n\n[")[0] == "\n".join(whole[3:5])
    with pytest.raises(Exception, match="offset: 500 is past the end"):
        tool(session, "memory_read", scope="agent", offset=500)


def test_a_huge_hand_written_line_is_cut_within_the_cap(
    project: Path, helpers: SimpleNamespace
) -> None:
    session = capped_session(helpers, project, 400)
    path = MemoryService(session.config, "default").path("global")
    path.parent.mkdir(parents=True)
    path.write_text("<!-- 2025-01-01 -->\n" + "w" * 50_000 + "\n", encoding="utf-8")
    out = tool(session, "memory_read", scope="global")
    assert len(out.content) <= 400 and out.meta["truncated"]
    assert out.meta["end_line"] == 4 and out.content.endswith("offset=5 for more]")
    out = tool(session, "memory_read", scope="global", offset=5)  # the line alone, cut
    assert len(out.content) <= 400 and out.meta["truncated"]
    assert out.content.startswith("> " + "w" * 100) and "of 50002 characters]" in out.content
    hits = tool(session, "memory_search", query="w" * 50_000)
    assert len(hits.content) <= 400 and hits.meta["truncated"]


def test_memory_search_pages_by_hits_within_the_cap(
    project: Path, helpers: SimpleNamespace
) -> None:
    session = capped_session(helpers, project, 600)
    svc = MemoryService(session.config, "default")
    for i in range(12):
        svc.write(f"deploy note {i:02d}: " + "step " * (i + 1), "agent", now=NOV)
    ranked = [h.content for h in svc.search("deploy step", limit=50)]
    assert len(ranked) == 12
    seen: list[str] = []
    offset = 0
    while True:
        out = tool(session, "memory_search", query="deploy step", limit=5, offset=offset)
        assert len(out.content) <= 600 and out.meta["total"] == 12
        hits = [h["content"] for h in out.meta["hits"]]
        assert 1 <= len(hits) <= 5
        assert hits == ranked[offset : offset + len(hits)]
        seen.extend(hits)
        offset += len(hits)
        if offset == 12:
            assert "offset=" not in out.content
            break
        assert out.content.endswith(f"[call memory_search with offset={offset} for the next hits]")
    assert seen == ranked
    past = tool(session, "memory_search", query="deploy step", offset=12)
    assert past.content == "12 memory entries match 'deploy step'; none after offset 12."
    with pytest.raises(Exception, match="offset: expected an integer >= 0"):
        tool(session, "memory_search", query="deploy", offset=-1)


def test_tool_schemas_document_paging() -> None:
    tools = {t.name: t for t in plugin.register_tools(veil=None)}
    read = tools["memory_read"].parameters["properties"]
    assert read["offset"]["minimum"] == 1 and read["limit"]["minimum"] == 1
    search = tools["memory_search"].parameters["properties"]
    assert search["offset"] == {
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "Best hits to skip (for the next page).",
    }
    assert "16 KiB" in tools["memory_write"].description
    json.dumps([t.schema() for t in tools.values()])
