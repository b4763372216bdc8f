"""``veil proxy`` through the real command line: a subprocess serving on a free loopback port,
an openai SDK session through it, and the binding rules of ``veil serve``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from veil.core.prompt.assemble import NOTE_PREFIX
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env["VEIL_HOME"] = str(tmp_path / "home")
    env["VEIL_ALLOW_PROJECT_PROVIDERS"] = "1"
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_veil_proxy_serves_a_client_session(tmp_path):
    replies = [{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, "Two files."]
    with ScriptedOpenAIServer(replies, context_window=8000) as upstream:
        project = tmp_path / "proj"
        project.mkdir()
        configure_project(project, upstream, "gpt-4o-mini")
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "veil.cli", "proxy", "--port", str(port)]
            + ["--project", str(project), "--upstream-model", "gpt-4o-mini"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(tmp_path),
            cwd=tmp_path,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 90
            while True:
                try:
                    models = httpx.get(f"{base}/v1/models", timeout=2)
                    break
                except httpx.TransportError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"veil proxy did not start:\n{proc.stdout.read()}")
                    time.sleep(0.2)
            assert models.json()["data"][0]["id"] == "gpt-4o-mini"
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
            tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
            history = [
                {"role": "system", "content": "You list files."},
                {"role": "user", "content": "What is here?"},
            ]
            first = client.chat.completions.create(model="anything", messages=history, tools=tools)
            call = first.choices[0].message.tool_calls[0]
            history += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "a.py\nb.py"},
            ]
            second = client.chat.completions.create(model="anything", messages=history, tools=tools)
            assert second.choices[0].message.content == "Two files."
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    sent = upstream.requests[1].body
    assert sent["model"] == "gpt-4o-mini"  # --upstream-model, whatever the client named
    own = [m for m in sent["messages"] if not str(m.get("content")).startswith(NOTE_PREFIX)]
    assert [m["role"] for m in own] == ["system", "user", "assistant", "tool"]
    assert own[0]["content"].startswith("You list files.")
    assert own[3] == {"role": "tool", "tool_call_id": call.id, "content": "a.py\nb.py"}


def test_veil_proxy_refuses_a_public_address_without_token(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "proxy", "--host", "0.0.0.0", "--port", "0"]
        + ["--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "refusing to bind 0.0.0.0" in proc.stderr and "VEIL_HTTP_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr
