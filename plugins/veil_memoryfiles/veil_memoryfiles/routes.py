"""HTTP routes for memory files: ``GET``/``PUT /memory/{file}`` and
``GET``/``PUT /agents/{name}/memory/{file}`` (seed 000 "tool/HTTP asymmetry"; issue 4).

``PUT`` overwrites the file literally with the request body (raw bytes, which must be UTF-8): no
cleanup guards, no date comment, no ``maxLines`` / ``maxFileBytes`` archive; it shares the atomic
write and the ``<file>.lock`` with ``memory_write``. Its size is bounded by the HTTP body limit
(``http.maxBodyBytes``, 1 MiB: 413 ``PAYLOAD_TOO_LARGE`` before anything is written). What it
writes is recorded as veil-written (issue 17): the caller of veil's own API chose it. With a
PostgreSQL store (``store.url``) the file is the store's (:mod:`.backend`), written in one
compare-and-swap instead of under a file lock. ``GET`` returns the file's raw text as
``text/markdown; charset=utf-8``. File names are plain ``*.md`` names (``MEMORY.md``,
``archive-2026-11.md``...); anything else answers 400 ``INVALID_PATH``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil import Route, RouteRequest, RouteResponse, UnsafePath, validate_agent_name
from veil_memoryfiles.backend import files_for
from veil_memoryfiles.entries import count_lines
from veil_memoryfiles.errors import MemoryFileNotFound
from veil_memoryfiles.paths import display_path, file_path

MARKDOWN = "text/markdown; charset=utf-8"

_PUT_RESPONSE = {
    "type": "object",
    "properties": {
        "file": {"type": "string", "description": "path relative to the project root"},
        "bytes": {"type": "integer", "minimum": 0},
        "lines": {"type": "integer", "minimum": 0},
    },
    "required": ["file", "bytes", "lines"],
}
_RAW_BODY = {"type": "string", "description": "the whole file, raw UTF-8 Markdown"}


def _param(req: RouteRequest, name: str) -> str:
    value = req.path_params.get(name)
    if not isinstance(value, str):
        raise UnsafePath(f"{name}: missing path parameter")
    return value


def _target(req: RouteRequest) -> tuple[Path, Path]:
    project = Path(req.veil.config.project_dir)
    name = _param(req, "file")
    if "name" in req.path_params:
        agent = validate_agent_name(_param(req, "name"))
        return project, file_path(project, "agent", agent, name)
    return project, file_path(project, "global", "", name)


def get_memory_file(req: RouteRequest) -> RouteResponse:
    """Return a memory file's raw text.

    Raises:
        UnsafePath: bad file or agent name (400). MemoryFileNotFound: no such file (404).
        MemoryFileInvalid: the file is not UTF-8 (422). UnsafeVeilPath: the file or a folder
        on the way is a symbolic link (409).
    """
    project, path = _target(req)
    text = files_for(req.veil.config, req.veil).read_text(path)
    if text is None:
        raise MemoryFileNotFound(f"{display_path(project, path)}: no such memory file")
    return RouteResponse(body=text, content_type=MARKDOWN)


def put_memory_file(req: RouteRequest) -> RouteResponse:
    """Overwrite a memory file with the raw body, literally (no guards), atomically, locked.

    Returns:
        JSON ``{"file", "bytes", "lines"}``.

    Raises:
        UnsafePath: bad file or agent name (400). BadRequest: body not UTF-8 (400).
        MemoryBusy: the file's lock is held too long (503). UnsafeVeilPath: a symbolic link
        on the way (409). (A body over ``http.maxBodyBytes`` is refused with 413 by the HTTP
        front end before this runs.)
    """
    project, path = _target(req)
    body: Any = req.body
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")
    text = files_for(req.veil.config, req.veil).overwrite(path, data)
    return RouteResponse(
        body={"file": display_path(project, path), "bytes": len(data), "lines": count_lines(text)}
    )


def memory_routes() -> list[Route]:
    """The four routes, with schemas and error codes for ``/openapi.json``."""
    routes = []
    for prefix, who in (("/memory", "the global scope"), ("/agents/{name}/memory", "an agent")):
        routes.append(
            Route(
                path=f"{prefix}/{{file}}",
                method="GET",
                handler=get_memory_file,
                summary=f"Read a memory file of {who} (raw Markdown)",
                response_schema=_RAW_BODY,
                errors=(400, 404, 409, 422),
            )
        )
        routes.append(
            Route(
                path=f"{prefix}/{{file}}",
                method="PUT",
                handler=put_memory_file,
                summary=f"Overwrite a memory file of {who} literally (no memory_write guards)",
                request_schema=_RAW_BODY,
                response_schema=_PUT_RESPONSE,
                errors=(400, 409, 413, 503),
            )
        )
    return routes
