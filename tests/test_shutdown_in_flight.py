"""What a request in flight gets when ``veil serve`` or ``veil proxy`` stops, and how a second
Ctrl-C ends it (issue 30): a real subprocess, a scripted provider that holds its answer back, an
httpx client. The request gets 503 with the server's JSON error body (``SHUTTING_DOWN``; the
proxy's in OpenAI's shape), never a 500; the server is gone within :data:`veil_http.serve.GRACEFUL_SHUTDOWN_S` plus a margin; a
second SIGINT during that wait ends it at once with exit code 130 (128 + SIGINT) and no
traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.test_processes import _free_port, _healthy, _listening, _new_session, _project, wait_for
from veil.testing.scripted_server import Reply, ScriptedOpenAIServer

COMMANDS = [
    ("serve", "/sessions/{sid}/messages", {"content": "go"}),
    (
        "proxy",
        "/v1/chat/completions",
        {"model": "test-model", "messages": [{"role": "user", "content": "go"}]},
    ),
]


def _run_until_signalled(tmp_path, command, path, body, signals):
    """Start ``veil COMMAND``, post ``body`` to ``path`` while the provider holds its answer,
    send ``signals`` (0.3 s apart) once the model call reached the provider; returns
    (the client's response or error, the process's exit code, its output, seconds to exit)."""
    held = threading.Event()
    answers: list = []
    with ScriptedOpenAIServer([Reply("late", wait=held)]) as server:
        root, env = _project(tmp_path, server)
        port = _free_port()
        argv = [sys.executable, "-m", "veil.cli", command, "--port", str(port)]
        proc = subprocess.Popen(
            [*argv, "--project", str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=root,
        )
        base = f"http://127.0.0.1:{port}"

        def post(url: str) -> None:
            try:
                answers.append(httpx.post(url, json=body, timeout=60))
            except httpx.HTTPError as exc:
                answers.append(exc)

        try:
            ready = (lambda: _healthy(base)) if command == "serve" else (lambda: _listening(port))
            wait_for(lambda: ready() or proc.poll() is not None, 120, f"veil {command}")
            assert proc.poll() is None, proc.stdout.read()
            url = base + path.format(sid=_new_session(base) if command == "serve" else "")
            poster = threading.Thread(target=post, args=(url,), daemon=True)
            poster.start()
            wait_for(lambda: len(server.requests) == 1, 60, "the model call to reach the server")
            started = time.monotonic()
            for i, sig in enumerate(signals):
                if i:
                    time.sleep(0.3)
                proc.send_signal(sig)
            out, _ = proc.communicate(timeout=30)
            took = time.monotonic() - started
            poster.join(30)
        finally:
            held.set()
            if proc.poll() is None:
                proc.kill()
    return (answers[0] if answers else None), proc.returncode, out, took


@pytest.mark.parametrize("command,path,body", COMMANDS)
def test_a_request_in_flight_at_shutdown_gets_503_with_a_json_error(tmp_path, command, path, body):
    from veil_http.serve import GRACEFUL_SHUTDOWN_S

    answer, code, out, took = _run_until_signalled(tmp_path, command, path, body, [signal.SIGTERM])
    assert isinstance(answer, httpx.Response), (answer, out)
    assert answer.status_code == 503, (answer.status_code, answer.text, out)
    error = answer.json()["error"]
    # each server's own error shape: veil serve's {"code", "message"}, OpenAI's in the proxy
    expected = {"serve": "SHUTTING_DOWN", "proxy": "shutting_down"}[command]
    assert error["code"] == expected and "shutting down" in error["message"], error
    assert code == 128 + signal.SIGTERM, out
    assert took < GRACEFUL_SHUTDOWN_S + 3, (took, out)
    assert "Traceback" not in out and "CancelledError" not in out, out


@pytest.mark.parametrize("command,path,body", COMMANDS)
def test_a_second_ctrl_c_ends_the_server_at_once_without_a_traceback(tmp_path, command, path, body):
    answer, code, out, took = _run_until_signalled(
        tmp_path, command, path, body, [signal.SIGINT, signal.SIGINT]
    )
    assert code == 128 + signal.SIGINT, out
    assert "Traceback" not in out and "CancelledError" not in out, out
    # the second Ctrl-C does not wait for the grace period (2 s) on top of the first
    assert took < 0.3 + 3, (took, out)
