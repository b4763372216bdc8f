"""``POST /sessions/{id}/compact``: seed 000's response and error codes."""

from __future__ import annotations

from veil_http.testing import assert_error

from veil.core.types import CompactResult
from veil.hookspecs import hookimpl


class _HalfCompactor:
    """A stand-in for veil_compaction's defaultCompaction: summarises the first half of the
    not-yet-compacted messages (compactionCount 50, equal sizes) and records the instructions."""

    def __init__(self) -> None:
        self.instructions: list[str | None] = []

    @hookimpl
    def compact(self, session, request):
        if request.mode != "default":
            return None
        self.instructions.append(request.instructions)
        remaining = len(session.messages) - session.compact_size
        if remaining == 0:
            return CompactResult(
                compacted_count=0, new_size=session.compact_size, already_up_to_date=True
            )
        count = max(1, remaining // 2)
        session.compact_size += count
        session.compact_summary = f"summary of {session.compact_size} messages"
        session.save_state()
        return CompactResult(
            compacted_count=count, new_size=session.compact_size, summary=session.compact_summary
        )


def _session_with_messages(client, turns: int) -> str:
    sid = client.post("/sessions").json()["id"]
    for n in range(turns):
        assert (
            client.post(f"/sessions/{sid}/messages", json={"content": f"message {n}"}).status_code
            == 200
        )
    return sid


def test_compact_answers_seed_shape_and_advances(make_client, make_veil):
    compactor = _HalfCompactor()
    client, veil = make_client(make_veil(plugins=[("fake_compaction", compactor)]))
    sid = _session_with_messages(client, 5)  # 10 messages: 5 user, 5 assistant

    r = client.post(f"/sessions/{sid}/compact", json={"instructions": "keep the task list"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"sessionId", "compactedCount", "newSize", "alreadyUpToDate", "session"}
    assert body["sessionId"] == sid
    assert (body["compactedCount"], body["newSize"], body["alreadyUpToDate"]) == (5, 5, False)
    assert body["session"]["compactSize"] == 5
    assert body["session"]["compactSummary"] == "summary of 5 messages"
    assert compactor.instructions == ["keep the task list"]

    second = client.post(f"/sessions/{sid}/compact").json()  # no body: no instructions
    assert (second["compactedCount"], second["newSize"]) == (2, 7)
    assert compactor.instructions[-1] is None
    assert veil.store.get_session(sid)["compact_size"] == 7


def test_compact_already_up_to_date(make_client, make_veil):
    client, _ = make_client(make_veil(plugins=[("fake_compaction", _HalfCompactor())]))
    sid = client.post("/sessions").json()["id"]
    body = client.post(f"/sessions/{sid}/compact").json()
    assert body["alreadyUpToDate"] is True
    assert (body["compactedCount"], body["newSize"]) == (0, 0)


def test_compact_error_codes(make_client, make_veil, agent_writer):
    agent_writer("nocompact", {"defaultCompaction": {"enabled": False}})
    client, _ = make_client(make_veil(plugins=[("fake_compaction", _HalfCompactor())]))
    sid = client.post("/sessions", json={"agent": "nocompact"}).json()["id"]
    assert_error(client.post(f"/sessions/{sid}/compact"), 400, "COMPACTION_DISABLED")

    sid = _session_with_messages(client, 1)
    client.post(f"/sessions/{sid}/close")
    assert_error(client.post(f"/sessions/{sid}/compact"), 400, "SESSION_CLOSED")

    assert_error(client.post("/sessions/sess_missing/compact"), 404, "SESSION_NOT_FOUND")
    assert_error(
        client.post(f"/sessions/{sid}/compact", json={"instructions": 3}), 422, "VALIDATION_ERROR"
    )


def test_compact_without_compaction_plugin_is_501(make_client):
    client, _ = make_client()
    sid = client.post("/sessions").json()["id"]
    err = assert_error(client.post(f"/sessions/{sid}/compact"), 501, "NOT_AVAILABLE")
    assert "compaction" in err["message"]
