"""A loopback ``veil serve`` answers only requests addressed to this machine and made by no web
page (DNS rebinding, cross-site POSTs); tokens are long enough; a project's settings.json cannot
open the server to the network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from veil_http.hosts import host_name, origin_host, same_origin
from veil_http.serve import build_server
from veil_http.testing import assert_error

from veil.core.errors import ConfigError
from veil.core.settings import load_config

TOKEN = "tok-3f9a1c2e7b5d4a60"


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:5051", "localhost"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]:5051", "::1"),
        ("[::1]", "::1"),
        ("evil.example:5051", "evil.example"),
        (None, None),
        ("", None),
        ("::1", None),  # an IPv6 literal needs brackets in Host
        ("localhost:", None),
        ("localhost:50x1", None),
        ("evil.example@localhost", None),
        ("localhost/x", None),
        ("local host", None),
        ("[::1", None),
    ],
)
def test_host_header_names(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize(
    ("origin", "name"),
    [
        ("http://localhost:3000", "localhost"),
        ("https://127.0.0.1", "127.0.0.1"),
        ("http://[::1]:8080", "::1"),
        ("http://evil.example", "evil.example"),
        ("null", None),
        ("file://", None),
        ("chrome-extension://abc", None),
    ],
)
def test_origin_names(origin, name):
    assert origin_host(origin) == name


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:5051", "127.0.0.1", "127.0.0.1:9", "[::1]:5051", "LOCALHOST"]
)
def test_loopback_host_names_are_answered(make_client, host):
    client, _ = make_client()
    assert client.get("/health", headers={"Host": host}).status_code == 200
    assert client.post("/sessions", headers={"Host": host}).status_code == 201


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:5051", "127.0.0.1.nip.io", "0.0.0.0"]
)
def test_a_foreign_host_gets_421_with_a_json_error(make_client, host):
    client, veil = make_client()
    error = assert_error(
        client.post("/sessions", headers={"Host": host}), 421, "MISDIRECTED_REQUEST"
    )
    assert repr(host) in error["message"] and "DNS rebinding" in error["message"]
    assert veil.list_sessions(10) == []  # nothing ran


def test_a_rebinding_browser_request_is_refused_before_anything_runs(make_client):
    client, veil = make_client()
    sid = client.post("/sessions").json()["id"]
    browser = {
        "Host": "evil.example:5051",
        "Origin": "http://evil.example:5051",
        "Content-Type": "text/plain",  # a "simple" request: no CORS preflight
        "Sec-Fetch-Site": "same-origin",
    }
    r = client.post(
        f"/sessions/{sid}/messages", content='{"content": "run rm -rf ~"}', headers=browser
    )
    assert_error(r, 421, "MISDIRECTED_REQUEST")
    assert veil.model.calls == []


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "https://127.0.0.1.evil.example"]
)
def test_a_cross_site_request_with_the_right_host_gets_403(make_client, origin):
    client, veil = make_client()
    sid = client.post("/sessions").json()["id"]
    r = client.post(
        f"/sessions/{sid}/messages",
        content='{"content": "hi"}',
        headers={"Origin": origin, "Content-Type": "text/plain"},
    )
    error = assert_error(r, 403, "FORBIDDEN_ORIGIN")
    assert repr(origin) in error["message"]
    assert veil.model.calls == []


@pytest.mark.parametrize("origin", ["http://127.0.0.1:5051", "http://localhost:5051"])
def test_pages_of_this_server_may_call(make_client, origin):
    client, _ = make_client()  # addressed to 127.0.0.1:5051
    assert client.get("/health", headers={"Origin": origin}).status_code == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:3000",  # a project's dev server: repository code in the browser
        "http://127.0.0.1:8000",
        "http://[::1]",  # port 80, not 5051
        "https://127.0.0.1",  # port 443
    ],
)
def test_pages_of_other_local_servers_get_403(make_client, origin):
    client, veil = make_client()
    sid = client.post("/sessions").json()["id"]
    r = client.post(
        f"/sessions/{sid}/messages",
        content='{"content": "run the tests"}',
        headers={"Origin": origin, "Content-Type": "text/plain"},
    )
    error = assert_error(r, 403, "FORBIDDEN_ORIGIN")
    assert repr(origin) in error["message"] and "other local ports" in error["message"]
    assert veil.model.calls == []


@pytest.mark.parametrize(
    ("host", "origin", "same"),
    [
        ("127.0.0.1:5051", "http://127.0.0.1:5051", True),
        ("127.0.0.1:5051", "http://localhost:5051", True),
        ("127.0.0.1:5051", "http://localhost:3000", False),
        ("localhost", "http://localhost", True),  # both port 80
        ("localhost", "https://localhost", True),  # Host without a port: the scheme's default
        ("localhost:80", "https://localhost", False),  # 443 != 80
        ("[::1]:5051", "http://[::1]:5051", True),
        ("127.0.0.1:5051", "http://evil.example:5051", False),
        ("127.0.0.1:5051", "null", False),
        ("127.0.0.1:5051", "file:///tmp/x.html", False),
    ],
)
def test_same_origin_compares_host_and_port(host, origin, same):
    allowed = frozenset({"localhost", "127.0.0.1", "::1"})
    assert same_origin(origin, host, allowed) is same


def test_the_configured_host_is_answered_and_the_check_guards_before_the_token(
    make_client, make_veil
):
    client, _ = make_client(make_veil(settings={"http": {"host": "localhost"}}), token=TOKEN)
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/health", headers={**ok, "Host": "localhost:5051"}).status_code == 200
    assert_error(
        client.get("/health", headers={**ok, "Host": "evil.example"}), 421, "MISDIRECTED_REQUEST"
    )


def test_the_openapi_document_lists_421_and_403_on_loopback_only(make_client):
    client, _ = make_client()
    responses = client.get("/openapi.json").json()["paths"]["/sessions"]["post"]["responses"]
    assert {"403", "421"} <= set(responses)
    client, _ = make_client(host="0.0.0.0", token=TOKEN)
    doc = client.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert {"403", "421"}.isdisjoint(doc["paths"]["/sessions"]["post"]["responses"])


def test_beyond_loopback_the_token_guards_and_any_host_is_answered(make_client):
    client, _ = make_client(host="0.0.0.0", token=TOKEN)
    headers = {"Host": "veil.lan:5051", "Authorization": f"Bearer {TOKEN}"}
    assert client.get("/health", headers=headers).status_code == 200
    assert_error(client.get("/health", headers={"Host": "veil.lan"}), 401, "UNAUTHORIZED")


# -- token length ---------------------------------------------------------------------------------


def _write_settings(project: Path, data: dict) -> None:
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text(json.dumps(data))


@pytest.mark.parametrize("token", ["x", "fifteen-chars!!"])
def test_short_tokens_are_refused_at_start(project, monkeypatch, make_veil, token):
    assert len(token) < 16
    _write_settings(project, {"http": {"token": token}})
    with pytest.raises(ConfigError, match=r"settings\.json: http\.token: must be at least 16"):
        load_config(project)
    _write_settings(project, {})
    monkeypatch.setenv("VEIL_HTTP_TOKEN", token)
    with pytest.raises(ConfigError, match=r"VEIL_HTTP_TOKEN \(http\.token\): must be at least 16"):
        load_config(project)
    monkeypatch.delenv("VEIL_HTTP_TOKEN")
    from veil_http import create_app

    with pytest.raises(ConfigError, match=r"http\.token: must be at least 16"):
        create_app(make_veil(), token=token)


def test_a_sixteen_character_token_is_accepted(project, monkeypatch):
    monkeypatch.setenv("VEIL_HTTP_TOKEN", "0123456789abcdef")
    assert load_config(project).settings.http.token.get_secret_value() == "0123456789abcdef"


# -- what a project's settings.json may not do ---------------------------------------------------


def test_a_project_file_cannot_open_the_server_to_the_network(make_veil, monkeypatch):
    veil = make_veil(settings={"http": {"host": "0.0.0.0", "token": TOKEN}})
    with pytest.raises(ConfigError, match=r"settings\.json: http\.host: a project file may not"):
        build_server(veil)
    # the user asks for it on the command line, but the guarding token is the repository's own
    with pytest.raises(ConfigError, match=r"settings\.json: http\.token: this token comes with"):
        build_server(veil, "0.0.0.0", 0)
    monkeypatch.setenv("VEIL_HTTP_TOKEN", "user-token-0123456789")
    veil = make_veil(settings={"http": {"host": "0.0.0.0", "token": TOKEN}})
    assert build_server(veil, "0.0.0.0", 0).config.host == "0.0.0.0"
    monkeypatch.setenv("VEIL_HTTP__HOST", "0.0.0.0")  # the user's variable: allowed
    assert build_server(make_veil(), None, 0).config.host == "0.0.0.0"


def test_a_project_token_still_guards_a_loopback_server(make_veil):
    server = build_server(make_veil(settings={"http": {"token": TOKEN}}), None, 0)
    assert server.config.host == "127.0.0.1"


# -- the real server ----------------------------------------------------------------------------


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(VEIL_HOME=str(tmp_path / "home"), VEIL_DISABLE_PLUGINS="veil_repl", **extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_veil_serve_refuses_dns_rebinding_over_tcp(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "serve", "--port", str(port), "--project", str(project)],
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
                assert httpx.get(f"{base}/health", timeout=2).status_code == 200
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"veil serve did not start:\n{proc.stdout.read()}")
                time.sleep(0.2)
        browser = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        r = httpx.post(f"{base}/sessions", headers=browser, timeout=10)
        assert_error(r, 421, "MISDIRECTED_REQUEST")
        r = httpx.post(f"{base}/sessions", headers={"Origin": "http://evil.example"}, timeout=10)
        assert_error(r, 403, "FORBIDDEN_ORIGIN")
        assert httpx.get(f"{base}/sessions", timeout=10).json()["sessions"] == []
        assert httpx.get(f"http://localhost:{port}/health", timeout=10).status_code == 200
        own = {"Origin": f"http://localhost:{port}"}
        assert httpx.get(f"{base}/health", headers=own, timeout=10).status_code == 200
        other = {"Origin": f"http://localhost:{port + 1}"}
        r = httpx.post(f"{base}/sessions", headers=other, timeout=10)
        assert_error(r, 403, "FORBIDDEN_ORIGIN")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_veil_serve_refuses_a_short_token_without_traceback(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "serve", "--port", "0", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path, VEIL_HTTP_TOKEN="short"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "VEIL_HTTP_TOKEN (http.token): must be at least 16 characters, got 5" in proc.stderr
    assert "Traceback" not in proc.stderr
