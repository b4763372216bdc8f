"""Bearer token, the loopback rule of ``veil serve``, and no API key in any response."""

from __future__ import annotations

import json

import pytest
from veil_http.serve import build_server, check_bind
from veil_http.testing import assert_error

from veil.core.errors import ConfigError

TOKEN = "tok-3f9a1c2e7b5d4a60"
API_KEY = "sk-proj-Zq8w3e5r7t9y1u2i4o6p"


def test_every_request_needs_the_bearer_token(make_client):
    client, _ = make_client(token=TOKEN)
    for method, path in [
        ("GET", "/health"),
        ("GET", "/openapi.json"),
        ("POST", "/sessions"),
        ("GET", "/nowhere"),
    ]:
        r = client.request(method, path)
        assert_error(r, 401, "UNAUTHORIZED")
        assert r.headers["www-authenticate"].startswith("Bearer")
    for header in (f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer "):
        assert_error(client.get("/health", headers={"Authorization": header}), 401, "UNAUTHORIZED")
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/health", headers=ok).status_code == 200
    assert client.post("/sessions", headers=ok).status_code == 201
    assert_error(client.get("/nowhere", headers=ok), 404, "NOT_FOUND")
    doc = client.get("/openapi.json", headers=ok).json()
    assert doc["security"] == [{"bearer": []}]
    assert "401" in doc["paths"]["/health"]["get"]["responses"]


def test_token_comes_from_settings_or_environment(make_client, make_veil, monkeypatch):
    client, _ = make_client(make_veil(settings={"http": {"token": TOKEN}}))
    assert client.get("/health").status_code == 401
    assert client.get("/health", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200

    monkeypatch.setenv("VEIL_HTTP_TOKEN", "env-token-123456")
    client, _ = make_client(make_veil())
    assert client.get("/health").status_code == 401
    assert (
        client.get("/health", headers={"Authorization": "Bearer env-token-123456"}).status_code
        == 200
    )
    # an explicit empty token turns the check off (embedding behind another gate)
    client, _ = make_client(make_veil(), token="")
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]"])
def test_loopback_binds_without_token(host):
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "example.org"])
def test_other_addresses_need_a_token(host):
    with pytest.raises(ConfigError, match=f"refusing to bind {host}.*VEIL_HTTP_TOKEN"):
        check_bind(host, None)
    with pytest.raises(ConfigError):
        check_bind(host, "")
    check_bind(host, TOKEN)


def test_build_server_refuses_public_host_without_token_and_accepts_with(make_veil, monkeypatch):
    with pytest.raises(ConfigError, match="refusing to bind 0.0.0.0"):
        build_server(make_veil(), "0.0.0.0", 0)
    monkeypatch.setenv("VEIL_HTTP_TOKEN", TOKEN)
    server = build_server(make_veil(), "0.0.0.0", 0)
    assert server.config.host == "0.0.0.0" and server.config.port == 0
    default = build_server(make_veil(), None, None)
    assert (default.config.host, default.config.port) == ("127.0.0.1", 5051)


def test_a_project_host_is_refused_for_what_it_is_before_any_token_advice(make_veil, project):
    """A project's settings.json asking for 0.0.0.0 was first answered "set VEIL_HTTP_TOKEN";
    with the token set, it was then refused for coming from the project. The refusal that a
    token cannot lift comes first."""
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text('{"http": {"host": "0.0.0.0"}}')
    with pytest.raises(ConfigError) as refused:
        build_server(make_veil(), None, None)
    assert "http.host: a project file may not open veil serve beyond this machine" in str(
        refused.value
    )
    assert "VEIL_HTTP_TOKEN" not in str(refused.value)


def test_no_api_key_in_any_response(make_client, make_veil, project, monkeypatch):
    monkeypatch.setenv(
        "VEIL_ALLOW_PROJECT_PROVIDERS", "1"
    )  # a provider of the project file: the user allows it (issue 17)
    home = project.parent / "home"
    home.mkdir()
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "auth.json").write_text(
        json.dumps(
            {
                "providers": {"openai": {"type": "openai", "api_key": API_KEY}},
                "routing": {"default": "openai"},
            }
        )
    )
    veil = make_veil(replies=[f"your key is {API_KEY}, and half of it {API_KEY[:12]}"])
    assert veil.config.auth.providers["openai"].api_key.get_secret_value() == API_KEY
    client, _ = make_client(veil, token=TOKEN)
    ok = {"Authorization": f"Bearer {TOKEN}"}
    sid = client.post("/sessions", headers=ok).json()["id"]
    bodies = [
        client.get("/health", headers=ok).text,
        client.get("/plugins", headers=ok).text,
        client.get("/openapi.json", headers=ok).text,
        client.get(f"/sessions/{sid}", headers=ok).text,
        client.get("/sessions", headers=ok).text,
        client.post(f"/sessions/{sid}/messages", json={"content": "key?"}, headers=ok).text,
        client.get(f"/sessions/{sid}/context", headers=ok).text,
    ]
    for text in bodies:
        assert API_KEY not in text
        assert TOKEN not in text
    turn = json.loads(bodies[5])
    assert turn["final"].startswith("your key is [redacted:veil_known], and half")
    # the reply is redacted before it is stored (issue 17): the store never holds the key
    stored = veil.store.messages(sid)[-1][1]["content"]
    assert API_KEY not in stored and stored.startswith("your key is [redacted:veil_known]")
