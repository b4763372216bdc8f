"""``veil mcp --http``: a real server subprocess on 127.0.0.1 and the SDK's streamable HTTP
client; the host and bearer-token rules of ``veil serve``."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from veil_mcp.server import MCP_TOOLS

TOKEN = "t0k3n-for-the-mcp-tests-0123456789"
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def veil_mcp(project, *args: str, env: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "veil.cli", "mcp", "--project", str(project), *args]


@contextlib.contextmanager
def http_server(project, host: str = "127.0.0.1", token: str | None = None):
    """``veil mcp --http`` on a free port; yields its URL once it accepts connections."""
    port = free_port()
    env = dict(os.environ)
    if token:
        env["VEIL_HTTP_TOKEN"] = token
    proc = subprocess.Popen(
        veil_mcp(project, "--http", "--host", host, "--port", str(port)),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"veil mcp --http exited: {proc.stderr.read()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                raise AssertionError("veil mcp --http did not start")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_a_client_session_over_streamable_http(project):
    out = {}

    async def main():
        with anyio.fail_after(120):
            async with Client(url) as client:
                out["tools"] = (await client.list_tools()).tools
                out["write"] = await client.call_tool("memory_write", {"content": "Port 5051."})
                out["read"] = await client.call_tool("memory_read", {"scope": "agent"})

    with http_server(project) as url:
        anyio.run(main)
        rebinding = httpx.post(
            url, json=INITIALIZE, headers={**HEADERS, "Host": "evil.example"}, timeout=30
        )
    assert [t.name for t in out["tools"]] == list(MCP_TOOLS)
    assert json.loads(text(out["write"]))["status"] == "written"
    assert "Port 5051." in text(out["read"])
    # veil_http's host check (DNS rebinding), with veil's error body
    assert rebinding.status_code == 421
    assert rebinding.json()["error"]["code"] == "MISDIRECTED_REQUEST"
    assert "not this server: veil mcp --http on a loopback" in rebinding.json()["error"]["message"]


def test_with_a_token_every_request_needs_it(project):
    out = {}

    async def main(url):
        with anyio.fail_after(120):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                out["tools"] = (await session.list_tools()).tools

    # beyond loopback (all addresses), reached here through 127.0.0.1
    with http_server(project, host="0.0.0.0", token=TOKEN) as url:
        anyio.run(main, url)
        bare = httpx.post(url, json=INITIALIZE, headers=HEADERS, timeout=30)
        wrong = httpx.post(
            url, json=INITIALIZE, headers={**HEADERS, "Authorization": "Bearer nope"}, timeout=30
        )
    assert [t.name for t in out["tools"]] == list(MCP_TOOLS)
    assert bare.status_code == 401 and wrong.status_code == 401
    assert bare.json()["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (None, "refusing to bind 0.0.0.0: serving beyond this machine needs a bearer token"),
        ({"http": {"token": TOKEN}}, "http.token: this token comes with the repository"),
    ],
)
def test_beyond_loopback_without_the_users_token_it_refuses_to_start(project, settings, message):
    if settings is not None:
        (project / ".veil").mkdir()
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    done = subprocess.run(
        veil_mcp(project, "--http", "--host", "0.0.0.0", "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr


def test_host_and_port_need_http(project):
    done = subprocess.run(
        veil_mcp(project, "--port", "5052"),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "--host and --port go with --http" in done.stderr
