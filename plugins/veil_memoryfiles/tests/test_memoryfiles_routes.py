"""HTTP routes called directly with RouteRequest objects: literal PUT, raw GET, refused names."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import veil_memoryfiles as plugin
from veil_memoryfiles.errors import MemoryFileNotFound
from veil_memoryfiles.routes import MARKDOWN, get_memory_file, put_memory_file

from veil.core.errors import BadRequest, UnsafePath
from veil.core.types import RouteRequest


def request(config: object, method: str, body: bytes = b"", **params: str) -> RouteRequest:
    return RouteRequest(
        method=method, path_params=params, query={}, body=body, veil=SimpleNamespace(config=config)
    )


def test_routes_are_declared_for_openapi() -> None:
    routes = plugin.register_routes(veil=None)
    assert sorted((r.method, r.path) for r in routes) == [
        ("GET", "/agents/{name}/memory/{file}"),
        ("GET", "/memory/{file}"),
        ("PUT", "/agents/{name}/memory/{file}"),
        ("PUT", "/memory/{file}"),
    ]
    for r in routes:
        assert r.summary and r.response_schema is not None and 400 in r.errors
        if r.method == "PUT":
            assert r.request_schema == {
                "type": "string",
                "description": "the whole file, raw UTF-8 Markdown",
            }
        else:
            assert r.request_schema is None and 404 in r.errors


def test_put_overwrites_literally_without_guards(project: Path, helpers: SimpleNamespace) -> None:
    helpers.write_settings(project, {"memory": {"maxLines": 2}})
    config = helpers.load_config(project)
    # duplicate entries, CRLF, no trailing newline, more lines than maxLines: all kept as sent
    body = (
        "# Mine\r\n<!-- 2025-01-01 -->\r\nsame\r\n<!-- 2025-01-01 -->\r\nsame\r\n中文 🚀".encode()
    )
    resp = put_memory_file(request(config, "PUT", body, file="MEMORY.md"))
    assert (resp.status, resp.content_type) == (200, "application/json")
    assert resp.body == {"file": ".veil/memory/MEMORY.md", "bytes": len(body), "lines": 6}
    path = project / ".veil" / "memory" / "MEMORY.md"
    assert path.read_bytes() == body
    assert not list(path.parent.glob("archive-*.md"))
    got = get_memory_file(request(config, "GET", file="MEMORY.md"))
    assert (got.body, got.content_type, got.status) == (body.decode(), MARKDOWN, 200)
    # an empty body empties the file (literal overwrite)
    put_memory_file(request(config, "PUT", b"", file="MEMORY.md"))
    assert path.read_bytes() == b""


def test_agent_routes_use_the_agent_folder(project: Path, helpers: SimpleNamespace) -> None:
    config = helpers.load_config(project)
    put_memory_file(request(config, "PUT", b"a\n", name="alice", file="archive-2026-11.md"))
    path = project / ".veil" / "memory" / "agents" / "alice" / "archive-2026-11.md"
    assert path.read_bytes() == b"a\n"
    got = get_memory_file(request(config, "GET", name="alice", file="archive-2026-11.md"))
    assert got.body == "a\n"
    with pytest.raises(MemoryFileNotFound) as info:
        get_memory_file(request(config, "GET", name="bob", file="archive-2026-11.md"))
    assert (info.value.http_status, info.value.code) == (404, "MEMORY_FILE_NOT_FOUND")
    assert ".veil/memory/agents/bob/archive-2026-11.md" in info.value.message


def test_missing_file_is_404(project: Path, helpers: SimpleNamespace) -> None:
    with pytest.raises(MemoryFileNotFound, match="no such memory file"):
        get_memory_file(request(helpers.load_config(project), "GET", file="MEMORY.md"))


def test_put_body_must_be_utf8(project: Path, helpers: SimpleNamespace) -> None:
    config = helpers.load_config(project)
    with pytest.raises(BadRequest, match=r"body: not valid UTF-8") as info:
        put_memory_file(request(config, "PUT", b"\xff\xfe", file="MEMORY.md"))
    assert info.value.http_status == 400
    assert not (project / ".veil" / "memory" / "MEMORY.md").exists()


@pytest.mark.parametrize(
    "params",
    [
        {"file": "../settings.json"},
        {"file": ".."},
        {"file": "/etc/passwd"},
        {"file": "x\x00.md"},
        {"file": "MEMORY.md.lock"},
        {"name": "..", "file": "MEMORY.md"},
        {"name": "a/b", "file": "MEMORY.md"},
        {"name": "alice", "file": "../../MEMORY.md"},
    ],
)
def test_unsafe_names_are_refused_with_400(
    project: Path, helpers: SimpleNamespace, params: dict[str, str]
) -> None:
    config = helpers.load_config(project)
    for handler, method in ((get_memory_file, "GET"), (put_memory_file, "PUT")):
        with pytest.raises(UnsafePath) as info:
            handler(request(config, method, b"x", **params))
        assert (info.value.http_status, info.value.code) == (400, "INVALID_PATH")
    assert not (project / ".veil").exists()


def test_put_then_memory_write_appends_after_the_put_content(
    project: Path, helpers: SimpleNamespace
) -> None:
    from datetime import datetime, timezone

    from veil_memoryfiles.service import MemoryService

    config = helpers.load_config(project)
    put_memory_file(request(config, "PUT", b"<!-- 2025-01-01 -->\nsame\n", file="MEMORY.md"))
    svc = MemoryService(config, "default")
    now = datetime(2025, 2, 1, tzinfo=timezone.utc)
    assert svc.write("same", "global", now=now).status == "skipped_duplicate"
    assert svc.write("other", "global", now=now).status == "written"
    assert (project / ".veil" / "memory" / "MEMORY.md").read_bytes() == (
        b"<!-- 2025-01-01 -->\nsame\n\n<!-- 2025-02-01 -->\nother\n"
    )
