"""Bad input gets a 4xx with ``{"error": {"code", "message"}}``, never a 500 or a traceback."""

from __future__ import annotations

from veil_http.testing import assert_error

from veil.core.types import Route, RouteResponse
from veil.hookspecs import hookimpl


def _session(client) -> str:
    return client.post("/sessions").json()["id"]


def test_malformed_json_is_400_invalid_json_with_position(make_client):
    client, _ = make_client()
    sid = _session(client)
    r = client.post(
        f"/sessions/{sid}/messages",
        content=b'{"content": "hi",',
        headers={"content-type": "application/json"},
    )
    err = assert_error(r, 400, "INVALID_JSON")
    assert "line 1 column 18" in err["message"]
    err = assert_error(
        client.post(f"/sessions/{sid}/messages", content=b"\xff\xfe{}"), 400, "INVALID_JSON"
    )
    assert "UTF-8" in err["message"]


def test_wrong_types_and_missing_fields_name_the_field(make_client):
    client, _ = make_client()
    sid = _session(client)
    cases = [
        ({"content": 5}, "body.content: Input should be a valid string"),
        ({}, "body.content: Field required"),
        ({"content": ""}, "body.content: String should have at least 1 character"),
        ({"content": "hi", "extra": 1}, "body.extra: Extra inputs are not permitted"),
    ]
    for payload, expected in cases:
        err = assert_error(
            client.post(f"/sessions/{sid}/messages", json=payload), 422, "VALIDATION_ERROR"
        )
        assert err["message"] == expected
    err = assert_error(
        client.post(f"/sessions/{sid}/messages", json=["content"]), 422, "VALIDATION_ERROR"
    )
    assert err["message"] == "body: expected a JSON object, got list"
    err = assert_error(
        client.post(f"/sessions/{sid}/recall", json={"query": "x", "limit": True}),
        422,
        "VALIDATION_ERROR",
    )
    assert err["message"].startswith("body.limit:")
    err = assert_error(
        client.post(f"/sessions/{sid}/recall", json={"query": "x", "limit": 0}),
        422,
        "VALIDATION_ERROR",
    )
    assert "greater than or equal to 1" in err["message"]
    err = assert_error(client.get("/sessions", params={"limit": "many"}), 422, "VALIDATION_ERROR")
    assert err["message"].startswith("query.limit:")
    assert_error(
        client.get(f"/sessions/{sid}/context", params={"tier": "hot"}), 422, "VALIDATION_ERROR"
    )
    assert veil_messages(client, sid) == 0  # nothing ran


def veil_messages(client, sid: str) -> int:
    return client.get(f"/sessions/{sid}").json()["messageCount"]


def test_oversized_body_is_413_declared_or_streamed(make_client):
    client, _ = make_client(max_body_bytes=100)
    sid = _session(client)
    big = {"content": "x" * 200}
    err = assert_error(client.post(f"/sessions/{sid}/messages", json=big), 413, "PAYLOAD_TOO_LARGE")
    assert "100 bytes" in err["message"]

    def chunks():  # no Content-Length: counted while it streams in
        for _ in range(10):
            yield b"x" * 30

    assert_error(
        client.post(f"/sessions/{sid}/messages", content=chunks()), 413, "PAYLOAD_TOO_LARGE"
    )
    # exactly at the limit is fine
    payload = b'{"content":"' + b"y" * (100 - 14) + b'"}'
    assert len(payload) == 100
    assert client.post(f"/sessions/{sid}/messages", content=payload).status_code == 200


def test_max_body_bytes_comes_from_settings(make_client, make_veil):
    veil = make_veil(settings={"http": {"maxBodyBytes": 64}})
    client, _ = make_client(veil)
    assert client.app.state.max_body_bytes == 64
    assert_error(client.post("/sessions", json={"model": "m" * 100}), 413, "PAYLOAD_TOO_LARGE")


def test_unknown_route_404_and_wrong_method_405_are_json(make_client):
    client, _ = make_client()
    err = assert_error(client.get("/nowhere"), 404, "NOT_FOUND")
    assert err["message"] == "no route GET /nowhere"
    r = client.put("/sessions")
    err = assert_error(r, 405, "METHOD_NOT_ALLOWED")
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
    assert "PUT" in err["message"]
    assert_error(client.delete("/health"), 405, "METHOD_NOT_ALLOWED")


class _Broken:
    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        def boom(req):
            raise RuntimeError("secret internals at /home/user/.veil")

        def odd(req):
            return RouteResponse(body={"value": float("nan"), "obj": object()})

        return [Route("/broken", "GET", boom), Route("/odd", "GET", odd)]


def test_unexpected_error_is_a_plain_500_without_traceback(make_client, make_veil):
    client, _ = make_client(make_veil(plugins=[("broken", _Broken())]))
    err = assert_error(client.get("/broken"), 500, "INTERNAL_ERROR")
    assert err["message"] == "internal error (RuntimeError); see the server log"
    assert "secret internals" not in client.get("/broken").text
    # values JSON cannot hold are rendered, not crashed on
    r = client.get("/odd")
    assert r.status_code == 200
    assert r.json()["value"] is None and r.json()["obj"].startswith("<object object")
