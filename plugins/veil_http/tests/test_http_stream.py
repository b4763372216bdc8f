"""``POST /sessions/{id}/messages/stream``: server-sent events of one turn."""

from __future__ import annotations

import json
import threading

from veil_http.events import HUB, EventHub
from veil_http.streaming import sse
from veil_http.testing import assert_error

from veil.core.types import RenderEvent
from veil.hookspecs import hookimpl


def parse_sse(text: str) -> list[tuple[str, dict]]:
    """``[(event, data), ...]`` from a text/event-stream body."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def stream(client, sid: str, content: str) -> tuple[int, str, list[tuple[str, dict]]]:
    with client.stream("POST", f"/sessions/{sid}/messages/stream", json={"content": content}) as r:
        text = r.read().decode("utf-8")
        return r.status_code, r.headers["content-type"], parse_sse(text)


class _Narrator:
    """Emits the context-layer events a real turn can produce, after each tool batch."""

    @hookimpl
    def after_iteration(self, session, iteration):
        session.emit("eviction", items=[{"id": "item_1", "tier": "warm"}], threshold=0.7, report=[])
        session.emit("compaction", compactedCount=3, newSize=3)
        session.emit("warning", text="same error 3 times")


def test_stream_carries_tokens_tool_calls_evictions_and_done(make_client, make_veil):
    veil = make_veil(
        replies=[
            {"tool_calls": [{"name": "ls", "arguments": {"path": "."}, "id": "call_a"}]},
            "Two files: a.py and b.py.",
        ],
        plugins=[("narrator", _Narrator())],
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    status, ctype, events = stream(client, sid, "list the files")
    assert status == 200 and ctype.startswith("text/event-stream")
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done"
    first_tool = kinds.index("tool_call")
    assert kinds[first_tool : first_tool + 5] == [
        "tool_call",
        "tool_result",
        "eviction",
        "compaction",
        "warning",
    ]
    call = events[first_tool][1]
    assert call == {"name": "ls", "arguments": {"path": "."}, "toolCallId": "call_a"}
    result = events[first_tool + 1][1]
    assert result["toolCallId"] == "call_a" and result["isError"] is False
    assert events[first_tool + 2][1]["items"] == [{"id": "item_1", "tier": "warm"}]
    tokens = "".join(d["text"] for k, d in events if k == "token")
    assert tokens == "Two files: a.py and b.py."
    done = events[-1][1]
    assert done["status"] == "done" and done["final"] == "Two files: a.py and b.py."
    assert done["iterations"] == 2 and done["session"]["messageCount"] == 4
    assert HUB.listening(sid) == 0  # the request's listener is gone


class _Halter:
    @hookimpl
    def after_iteration(self, session, iteration):
        session.request_halt("15 attempts without progress")


def test_stream_reports_halt_then_done(make_client, make_veil):
    veil = make_veil(
        replies=[{"tool_calls": [{"name": "ls", "arguments": {}}]}], plugins=[("halter", _Halter())]
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    _, _, events = stream(client, sid, "go")
    assert [k for k, _ in events][-2:] == ["halt", "done"]
    assert events[-2][1] == {"reason": "15 attempts without progress"}
    assert events[-1][1]["status"] == "halted"


def test_stream_errors_before_streaming_are_json(make_client):
    client, _ = make_client()
    assert_error(
        client.post("/sessions/sess_nope/messages/stream", json={"content": "x"}),
        404,
        "SESSION_NOT_FOUND",
    )
    sid = client.post("/sessions").json()["id"]
    assert_error(client.post(f"/sessions/{sid}/messages/stream", json={}), 422, "VALIDATION_ERROR")
    client.post(f"/sessions/{sid}/close")
    assert_error(
        client.post(f"/sessions/{sid}/messages/stream", json={"content": "x"}),
        400,
        "SESSION_CLOSED",
    )


def test_a_failing_turn_ends_the_stream_with_an_error_event(make_client, make_veil):
    def explode(messages, tools):
        raise RuntimeError("model fell over")

    client, _ = make_client(make_veil(replies=[explode]))
    sid = client.post("/sessions").json()["id"]
    status, _, events = stream(client, sid, "hi")
    assert status == 200
    assert events[-1] == (
        "error",
        {"code": "INTERNAL_ERROR", "message": "internal error (RuntimeError)"},
    )


def test_streams_of_two_sessions_do_not_mix(make_client, make_veil):
    client, _ = make_client(make_veil(delay=0.05))
    a = client.post("/sessions").json()["id"]
    b = client.post("/sessions").json()["id"]
    out: dict[str, list] = {}

    def run(sid: str, text: str) -> None:
        out[sid] = stream(client, sid, text)[2]

    threads = [
        threading.Thread(target=run, args=(a, "alpha words here")),
        threading.Thread(target=run, args=(b, "beta other words")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sid, word in ((a, "alpha"), (b, "beta")):
        tokens = "".join(d["text"] for k, d in out[sid] if k == "token")
        assert tokens == f"echo: {word} " + ("words here" if word == "alpha" else "other words")
        assert out[sid][-1][1]["session"]["id"] == sid


def test_sse_format_and_hub_routing():
    assert sse("token", {"text": "a\nb"}) == 'event: token\ndata: {"text":"a\\nb"}\n\n'
    hub = EventHub()
    got: list[str] = []
    with hub.subscribe("s1", lambda e: got.append(e.kind)):
        assert hub.publish(RenderEvent("token", {}, "s1")) == 1
        assert hub.publish(RenderEvent("token", {}, "s2")) == 0
        assert hub.publish(RenderEvent("info", {}, None)) == 0

        def broken(event):
            raise RuntimeError("client gone")

        with hub.subscribe("s1", broken):
            assert hub.publish(RenderEvent("warning", {}, "s1")) == 1  # the broken one skipped
    assert got == ["token", "warning"]
    assert hub.listening("s1") == 0
