"""Small pieces: slash-keeping path decoding, the redactor, JSON rendering, error statuses."""

from __future__ import annotations

import json

from veil_http.api import Content, Operation, openapi_path
from veil_http.errors import Redactor, json_response
from veil_http.openapi import error_statuses
from veil_http.paths import SLASH_STANDIN, decode_keeping_slashes, restore_slashes


async def _noop(request):  # pragma: no cover - never called
    return None


def test_decode_keeping_slashes():
    assert decode_keeping_slashes("/memory/..%2Fsettings.json") == (
        f"/memory/..{SLASH_STANDIN}settings.json"
    )
    assert decode_keeping_slashes("/a%2fb/%C3%A9t%C3%A9%20x") == f"/a{SLASH_STANDIN}b/été x"
    assert decode_keeping_slashes("/plain/path") == "/plain/path"
    assert restore_slashes({"file": f"..{SLASH_STANDIN}x", "n": 3}) == {"file": "../x", "n": 3}


def test_redactor_removes_known_and_environment_secrets(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "envsecret-998877")
    monkeypatch.setenv("HARMLESS", "not-a-secret-value")
    redact = Redactor(["sk-abcdefghijklmnop", "short", "sk-abcdefghijklmnop-longer"])
    text = "a sk-abcdefghijklmnop-longer b sk-abcdefghijklmnop c envsecret-998877 short"
    known = "[redacted:veil_known]"
    assert redact(text) == f"a {known} b {known} c {known} short"
    assert redact("not-a-secret-value") == "not-a-secret-value"
    # error messages also lose key-shaped strings nobody configured
    assert "sk-zzzzzzzzzzzz" not in redact.message("provider said: bad key sk-zzzzzzzzzzzz")


def test_json_response_is_compact_utf8_and_nan_safe():
    r = json_response({"é": float("inf"), "n": [1, 2.5]}, 201)
    assert r.status_code == 201
    assert r.body.decode("utf-8") == '{"é":null,"n":[1,2.5]}'
    assert json.loads(r.body) == {"é": None, "n": [1, 2.5]}


def test_error_statuses_by_kind_of_route():
    body = Operation(
        "POST",
        "/s/{session_id}/x",
        _noop,
        "x",
        "",
        "t",
        request=Content("application/json", {}),
        errors=(501,),
    )
    assert error_statuses(body, bearer=False) == [400, 404, 413, 422, 501]
    text = Operation(
        "PUT",
        "/m/{file:path}",
        _noop,
        "m",
        "",
        "t",
        request=Content("text/plain", {"type": "string"}),
    )
    assert error_statuses(text, bearer=True) == [400, 401, 404, 413]
    assert text.path_params == ["file"] and openapi_path(text.path) == "/m/{file}"
    bare = Operation("GET", "/health", _noop, "h", "", "t")
    assert error_statuses(bare, bearer=False) == []
