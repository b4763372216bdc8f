"""Fixtures for the proxy's tests: a project pointed at a scripted upstream on 127.0.0.1, and the
proxy served by uvicorn on a free loopback port (a thread), so real clients (the openai and
anthropic SDKs, httpx) reach it over TCP as an agent would."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from veil.core.app import open_veil
from veil.core.settings import load_config
from veil.testing.scripted_server import ScriptedOpenAIServer


def layer_plugins() -> list[tuple[str, object]]:
    """The context layer as installed (scorer, eviction, compaction, convergence)."""
    import veil_compaction
    import veil_convergence
    import veil_fsrs
    from veil_fsrs import evict_plugin

    return [
        ("veil_fsrs", veil_fsrs),
        ("veil_fsrs_evict", evict_plugin),
        ("veil_compaction", veil_compaction),
        ("veil_convergence", veil_convergence),
    ]


def configure(
    project: Path,
    upstream: ScriptedOpenAIServer,
    window: int,
    model: str,
    auth: dict[str, Any] | None = None,
    provider: str = "openai",
) -> None:
    """Point ``project`` at ``upstream`` (auth.json provider ``scripted`` of type ``provider``,
    unless ``auth`` gives the whole file) with ``model`` as models.main, its context window
    ``window`` tokens."""
    veil_dir = project / ".veil"
    veil_dir.mkdir(parents=True, exist_ok=True)
    entry = upstream.provider()
    if provider == "anthropic":  # Anthropic's base URL has no /v1: the SDKs add /v1/messages
        entry = {**entry, "type": "anthropic", "base_url": upstream.url.removesuffix("/v1")}
    auth = auth or {"providers": {"scripted": entry}}
    (veil_dir / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    settings = {"models": {"main": {"model": model, "contextWindow": window}}}
    (veil_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


@dataclass
class ProxyRun:
    """A running proxy: ``url`` (``http://127.0.0.1:<port>``), its ``veil``, the ``upstream``."""

    url: str
    veil: Any
    upstream: ScriptedOpenAIServer
    server: Any


def serve_in_thread(app: Any) -> tuple[Any, str]:
    """Serve ``app`` with uvicorn on a free port of 127.0.0.1 (a daemon thread); returns the
    server and its base URL once it accepts connections."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    server.test_thread = thread
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture
def run_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``run_proxy(replies, window=4000, model="gpt-4o-mini", default=None, auth=None,
    upstream_window=None, provider="openai", **create_app_kwargs)`` (``upstream_window``: the
    window the upstream enforces when it is not the one veil is configured with; ``provider``:
    the auth.json type of the scripted upstream, ``anthropic`` to be spoken to natively)
    ->
    :class:`ProxyRun`; everything is stopped at the end of the test."""
    from veil_proxy import create_app

    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")
    monkeypatch.delenv("VEIL_HTTP_TOKEN", raising=False)
    runs: list[ProxyRun] = []

    def factory(
        replies: Any = (),
        *,
        window: int = 4000,
        model: str = "gpt-4o-mini",
        default: Any = None,
        auth: dict[str, Any] | None = None,
        upstream_window: int | None = None,
        provider: str = "openai",
        **kw: Any,
    ) -> ProxyRun:
        upstream = ScriptedOpenAIServer(
            replies, default=default, context_window=upstream_window or window
        ).start()
        project = tmp_path / f"project{len(runs)}"
        project.mkdir()
        configure(project, upstream, window, model, auth, provider)
        veil = open_veil(
            project,
            config=load_config(project),
            use_entry_points=False,
            extra_plugins=tuple(layer_plugins()),
        )
        server, url = serve_in_thread(create_app(veil, **kw))
        run = ProxyRun(url, veil, upstream, server)
        runs.append(run)
        return run

    yield factory
    for run in runs:
        run.server.should_exit = True
        run.server.test_thread.join(10)
        run.upstream.stop()
        run.veil.close()
