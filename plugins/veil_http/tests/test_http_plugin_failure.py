"""A plugin whose hook raises during a turn: the HTTP answer is a 500 whose JSON error names the
plugin and the hook (code ``PLUGIN_FAILED``), the streamed turn ends with the same error, and the
user's message stays stored (issue 20). Requests go through httpx (Starlette's TestClient)."""

from __future__ import annotations

import json

import pytest
from veil_http.testing import assert_error

from veil.hookspecs import hookimpl

MESSAGE = "plugin broken_capture failed in hook capture: KeyError: 'phase'"


class _BrokenCapture:
    @hookimpl
    def capture(self, session, event):
        if event.phase == "user":
            raise KeyError("phase")
        return None


def test_a_failing_hook_is_a_500_naming_plugin_and_hook(make_client, make_veil):
    veil = make_veil(["never sent"], plugins=[("broken_capture", _BrokenCapture())])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "what is here?"})
    err = assert_error(r, 500, "PLUGIN_FAILED")
    assert err["message"] == MESSAGE
    assert veil.model.calls == []  # stopped before any model call
    stored = [m for _, m in veil.store.messages(sid)]
    assert stored == [{"role": "user", "content": "what is here?"}]

    # the session is still there over HTTP, holding that message (camel-case JSON)
    got = client.get(f"/sessions/{sid}").json()
    assert (got["messageCount"], got["closed"]) == (1, False)


def test_a_failing_hook_ends_the_stream_with_the_same_error(make_client, make_veil):
    veil = make_veil(["never sent"], plugins=[("broken_capture", _BrokenCapture())])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    with client.stream(
        "POST", f"/sessions/{sid}/messages/stream", json={"content": "hi"}
    ) as response:
        assert response.status_code == 200
        text = "".join(response.iter_text())
    errors = [
        json.loads(line.removeprefix("data: "))
        for block in text.split("\n\n")
        if block.startswith("event: error")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]
    assert errors == [{"code": "PLUGIN_FAILED", "message": MESSAGE}]


class _Idle:
    """A plugin still being written: nothing marked ``@hookimpl`` yet."""

    def capture(self, session, event):
        return None


def test_plugins_lists_a_plugin_with_no_hook_with_a_warning(make_client, make_veil):
    client, _ = make_client(make_veil(plugins=[("idle", _Idle())]))
    listed = {p["name"]: p for p in client.get("/plugins").json()["plugins"]}
    assert listed["idle"]["hooks"] == []
    assert listed["idle"]["warnings"] == ["implements no veil hook"]
    assert listed["veil.beliefs"]["warnings"] == []


class _StrSections:
    @hookimpl
    def system_prompt_sections(self, session):
        return "Always answer in French."  # a str, not a PromptSection


def test_a_hook_result_of_the_wrong_type_is_a_500_naming_plugin_and_hook(make_client, make_veil):
    veil = make_veil(["never sent"], plugins=[("str_sections", _StrSections())])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "hi"})
    err = assert_error(r, 500, "PLUGIN_FAILED")
    assert err["message"] == (
        "plugin str_sections: hook system_prompt_sections returned str, expected a "
        "veil.core.types.PromptSection or a list of them"
    )
    assert veil.model.calls == []


class _DictRoutes:
    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        return [{"method": "GET", "path": "/hello"}]


def test_routes_of_the_wrong_type_name_the_plugin(make_veil):
    from veil_http.plugin_routes import collect_routes

    from veil.core.errors import PluginResultInvalid

    veil = make_veil(plugins=[("dict_routes", _DictRoutes())])
    with pytest.raises(PluginResultInvalid) as refused:
        collect_routes(veil)
    assert refused.value.message == (
        "plugin dict_routes: hook register_routes returned a list holding dict at [0], "
        "expected a list of veil.core.types.Route"
    )
