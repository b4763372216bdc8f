"""``veil serve`` is headless: no prompt_toolkit, runs with the REPL blocked and with
``VEIL_LOAD_PLUGINS=veil_http`` alone. Each check runs in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

# Runs `veil serve` through the real command line with uvicorn's run() replaced by a probe that
# reports what would have been served, then prints what the interpreter imported.
PROBE = r"""
import json, sys
import uvicorn

seen = {}

def fake_run(self, *args, **kwargs):
    app = self.config.app
    veil = app.state.veil
    seen["host"], seen["port"] = self.config.host, self.config.port
    seen["plugins"] = sorted(n for n, p in veil.pm.list_name_plugin() if p is not None)
    seen["paths"] = sorted(app.state.openapi["paths"])

uvicorn.Server.run = fake_run


def report():
    # main() ends with os._exit after the atexit handlers (veil.core.background.finish)
    seen["prompt_toolkit"] = sorted(m for m in sys.modules if m.split(".")[0] == "prompt_toolkit")
    print("PROBE " + json.dumps(seen), flush=True)


import atexit
atexit.register(report)
from veil.cli import main
main(sys.argv[1:])
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env["VEIL_HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def _probe(
    tmp_path: Path, args: list[str], pre: tuple[str, ...] = (), **env: str
) -> tuple[dict, subprocess.CompletedProcess]:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *pre, "serve", "--project", str(project), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path, **env),
        cwd=tmp_path,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1][len("PROBE ") :]), proc


def test_serve_never_imports_prompt_toolkit(tmp_path):
    seen, proc = _probe(tmp_path, ["--port", "0"])
    assert proc.returncode == 0, proc.stderr
    assert seen["prompt_toolkit"] == []
    assert (seen["host"], seen["port"]) == ("127.0.0.1", 0)
    assert "veil_http" in seen["plugins"] and "veil.coding_tools" in seen["plugins"]
    if importlib.util.find_spec("veil_repl") is not None:
        assert "veil_repl" in seen["plugins"]  # loaded, and still no prompt_toolkit
    assert "/sessions" in seen["paths"] and "/health" in seen["paths"]


def test_serve_runs_with_the_repl_blocked(tmp_path):
    seen, proc = _probe(tmp_path, ["--port", "0"], pre=("--disable-plugin", "veil_repl"))
    assert proc.returncode == 0, proc.stderr
    assert "veil_repl" not in seen["plugins"]
    assert seen["prompt_toolkit"] == []
    seen, _ = _probe(tmp_path, ["--port", "0"], VEIL_DISABLE_PLUGINS="veil_repl")
    assert "veil_repl" not in seen["plugins"] and "veil_http" in seen["plugins"]


def test_serve_with_only_the_http_plugin_has_no_plugin_routes(tmp_path):
    seen, proc = _probe(tmp_path, ["--port", "0"], VEIL_LOAD_PLUGINS="veil_http")
    assert proc.returncode == 0, proc.stderr
    # VEIL_LOAD_PLUGINS selects entry points; the default plugins load unless blocked by name
    assert seen["plugins"] == [
        "veil.beliefs",
        "veil.capture",
        "veil.coding_tools",
        "veil.doctor",
        "veil.elision",
        "veil.manifest",
        "veil.memory_tools",
        "veil.recall",
        "veil.replay",
        "veil_http",
    ]
    assert not any(p.startswith(("/memory", "/agents")) for p in seen["paths"])
    assert "context layer off" in proc.stderr  # no scorer / eviction plugin loaded


def test_serve_refuses_a_public_address_without_token(tmp_path):
    seen, proc = _probe(tmp_path, ["--host", "0.0.0.0", "--port", "0"])
    assert proc.returncode == 1
    assert "refusing to bind 0.0.0.0" in proc.stderr and "VEIL_HTTP_TOKEN" in proc.stderr
    assert "host" not in seen  # never started
    seen, proc = _probe(
        tmp_path, ["--host", "0.0.0.0", "--port", "0"], VEIL_HTTP_TOKEN="a-long-enough-token"
    )
    assert proc.returncode == 0, proc.stderr
    assert seen["host"] == "0.0.0.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_veil_serve_answers_over_tcp(tmp_path):
    """The real command, uvicorn and all, on a free loopback port."""
    project = tmp_path / "proj"
    project.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "serve", "--port", str(port), "--project", str(project)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(tmp_path, VEIL_DISABLE_PLUGINS="veil_repl"),
        cwd=tmp_path,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{base}/health", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"veil serve did not start:\n{proc.stdout.read()}")
                time.sleep(0.2)
        assert health.status_code == 200 and health.json()["ok"] is True
        created = httpx.post(f"{base}/sessions", timeout=10)
        assert created.status_code == 201
        names = [p["name"] for p in httpx.get(f"{base}/plugins", timeout=10).json()["plugins"]]
        assert "veil_repl" not in names and "veil_http" in names
        assert httpx.get(f"{base}/nowhere", timeout=5).json()["error"]["code"] == "NOT_FOUND"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
