"""Routes other plugins contribute through ``register_routes``: mounted, validated, documented;
and the memory-files plugin's routes when it is installed."""

from __future__ import annotations

import importlib.util

import pytest
from veil_http import create_app
from veil_http.testing import assert_error

from veil.core.errors import ConfigError, UnsafePath
from veil.core.types import Route, RouteRequest, RouteResponse
from veil.hookspecs import hookimpl

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}, "weight": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}


class _Notes:
    """A plugin with a JSON route, a raw-text route, an async route and a path parameter."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.requests: list[RouteRequest] = []

    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        def put_note(req: RouteRequest) -> RouteResponse:
            self.requests.append(req)
            if req.path_params["name"].startswith("."):
                raise UnsafePath(f"note name {req.path_params['name']!r} is not allowed")
            self.notes[req.path_params["name"]] = req.json["text"]
            return RouteResponse({"name": req.path_params["name"], "saved": True}, status=201)

        def put_raw(req: RouteRequest) -> RouteResponse:
            self.requests.append(req)
            self.notes[req.path_params["name"]] = req.body.decode("utf-8")
            return RouteResponse({"bytes": len(req.body)})

        async def get_note(req: RouteRequest) -> RouteResponse:
            text = self.notes.get(req.path_params["name"])
            if text is None:
                return RouteResponse({"error": {"code": "NO_NOTE", "message": "none"}}, 404)
            return RouteResponse(text, content_type="text/plain; charset=utf-8")

        return [
            Route(
                "/notes/{name}",
                "POST",
                put_note,
                summary="Save a note",
                request_schema=NOTE_SCHEMA,
                response_schema={"type": "object", "properties": {"name": {"type": "string"}}},
                errors=(400,),
            ),
            Route(
                "/notes/{name}/raw",
                "put",
                put_raw,
                summary="Save raw text",
                request_schema={"type": "string"},
            ),
            Route(
                "/notes/{name}",
                "GET",
                get_note,
                summary="Read a note",
                response_schema={"type": "string", "contentMediaType": "text/plain"},
                errors=(404,),
            ),
        ]


def test_plugin_routes_are_mounted_validated_and_documented(make_client, make_veil):
    notes = _Notes()
    client, veil = make_client(make_veil(plugins=[("notes", notes)]))
    r = client.post("/notes/todo", json={"text": "ship it", "weight": 2})
    assert r.status_code == 201 and r.json() == {"name": "todo", "saved": True}
    req = notes.requests[-1]
    assert req.method == "POST" and req.path_params == {"name": "todo"}
    assert req.json == {"text": "ship it", "weight": 2}
    assert req.veil is veil

    r = client.get("/notes/todo", params={"x": "1"})
    assert r.status_code == 200 and r.text == "ship it"
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert client.get("/notes/missing").status_code == 404

    # the declared schema is enforced before the handler runs
    n = len(notes.requests)
    err = assert_error(client.post("/notes/x", json={"text": 5}), 422, "VALIDATION_ERROR")
    assert err["message"] == "body.text: 5 is not of type 'string'"
    assert_error(client.post("/notes/x", json={"text": "a", "other": 1}), 422, "VALIDATION_ERROR")
    assert_error(client.post("/notes/x", content=b"{oops"), 400, "INVALID_JSON")
    assert_error(client.post("/notes/x"), 422, "VALIDATION_ERROR")  # required body missing
    assert len(notes.requests) == n
    # a VeilError from the handler keeps its status and code
    assert_error(client.post("/notes/.hidden", json={"text": "a"}), 400, "INVALID_PATH")

    r = client.put("/notes/raw1/raw", content="line one\n\u00e9t\u00e9\n".encode())
    assert r.json() == {"bytes": len("line one\n\u00e9t\u00e9\n".encode())}
    assert notes.notes["raw1"] == "line one\n\u00e9t\u00e9\n"
    assert_error(client.delete("/notes/todo"), 405, "METHOD_NOT_ALLOWED")

    doc = client.get("/openapi.json").json()
    post = doc["paths"]["/notes/{name}"]["post"]
    assert post["tags"] == ["notes"] and post["summary"] == "Save a note"
    assert post["requestBody"]["content"]["application/json"]["schema"] == NOTE_SCHEMA
    assert post["requestBody"]["required"] is True
    assert set(post["responses"]) == {"200", "400", "403", "404", "413", "421", "422"}
    get = doc["paths"]["/notes/{name}"]["get"]
    assert list(get["responses"]["200"]["content"]) == ["text/plain"]
    raw = doc["paths"]["/notes/{name}/raw"]["put"]
    assert list(raw["requestBody"]["content"]) == ["text/plain"]
    assert raw["parameters"] == [
        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    ]


def test_plugin_route_bodies_respect_the_size_limit(make_client, make_veil):
    client, _ = make_client(make_veil(plugins=[("notes", _Notes())]), max_body_bytes=10)
    assert_error(client.put("/notes/a/raw", content=b"x" * 11), 413, "PAYLOAD_TOO_LARGE")
    assert client.put("/notes/a/raw", content=b"x" * 10).status_code == 200


class _Clash:
    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        return [Route("/sessions/{other}", "GET", lambda req: RouteResponse({}))]


class _BadMethod:
    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        return [Route("/x", "TRACE", lambda req: RouteResponse({}))]


class _BadSchema:
    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        return [
            Route(
                "/x", "POST", lambda req: RouteResponse({}), request_schema={"type": "no-such-type"}
            )
        ]


def test_malformed_or_clashing_routes_fail_at_start_naming_the_plugin(make_veil):
    with pytest.raises(ConfigError, match="GET /sessions/.*'veil_http' and 'clash'"):
        create_app(make_veil(plugins=[("clash", _Clash())]))
    with pytest.raises(ConfigError, match="plugin 'bad': route TRACE /x: method"):
        create_app(make_veil(plugins=[("bad", _BadMethod())]))
    with pytest.raises(ConfigError, match="plugin 'schema': route POST /x: request_schema"):
        create_app(make_veil(plugins=[("schema", _BadSchema())]))


# -- the memory-files plugin (written separately; skipped when it is not installed) -----------

HAS_MEMORYFILES = importlib.util.find_spec("veil_memoryfiles") is not None


@pytest.mark.skipif(not HAS_MEMORYFILES, reason="veil_memoryfiles is not installed")
def test_memory_routes_round_trip_literally(make_client, make_veil, project):
    import veil_memoryfiles

    client, veil = make_client(make_veil(plugins=[("veil_memoryfiles", veil_memoryfiles)]))

    def stored(name: str) -> str:
        # where the engine keeps memory files: .veil/memory/ with SQLite, the database with
        # PostgreSQL (nothing on disk then)
        if veil.shared_files is not None:
            assert not (project / ".veil" / "memory").exists()
            return veil.shared_files.read(name).text
        return (project / ".veil" / "memory" / name).read_text(encoding="utf-8")

    text = "<!-- 2025-03-02 -->\nProject uses port 5051.\n\n\n   \n"
    r = client.put("/memory/MEMORY.md", content=text.encode("utf-8"))
    assert r.status_code == 200, r.text
    assert r.json()["bytes"] == len(text.encode("utf-8"))
    assert stored("MEMORY.md") == text
    r = client.get("/memory/MEMORY.md")
    assert r.status_code == 200 and r.text == text  # literal: no guards, no date comment added

    r = client.put("/agents/reviewer/memory/MEMORY.md", content=b"agent fact\n")
    assert r.status_code == 200
    assert stored("agents/reviewer/MEMORY.md") == "agent fact\n"
    assert client.get("/agents/reviewer/memory/MEMORY.md").text == "agent fact\n"

    # names that would leave .veil/memory/ are 400, encoded slashes included
    for bad in (
        "/memory/..%2Fsettings.json",
        "/memory/.hidden.md",
        "/memory/notes.txt",
        "/agents/..%2F..%2Fx/memory/MEMORY.md",
        "/agents/a%2Fb/memory/MEMORY.md",
    ):
        assert_error(client.put(bad, content=b"x"), 400, "INVALID_PATH")
        assert_error(client.get(bad), 400, "INVALID_PATH")
    assert not (project / ".veil" / "settings.json").exists()
    assert_error(client.get("/memory/NOPE.md"), 404, "MEMORY_FILE_NOT_FOUND")

    doc = client.get("/openapi.json").json()
    for path in ("/memory/{file}", "/agents/{name}/memory/{file}"):
        assert set(doc["paths"][path]) == {"get", "put"}
        assert doc["paths"][path]["put"]["tags"] == ["veil_memoryfiles"]
