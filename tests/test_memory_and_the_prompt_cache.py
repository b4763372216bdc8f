"""``memory_write`` and the prompt cache (issue 29, "Also on the prompt path").

The README says the system message is byte-identical for the whole session. Before, a
``memory_write`` changed it at the next turn of a session loaded again (each HTTP turn, ``veil
-c``): the memory section was read again at every load. And over HTTP the first request of a
turn lost the previous turn's context note (it was kept in the process only), so the prefix the
provider had cached changed from that message on. Both are read here from what the provider
received: a scripted OpenAI-compatible server on 127.0.0.1 that records every request.
"""

from __future__ import annotations

import pytest

from veil.core.prompt.assemble import NOTE_PREFIX

pytest.importorskip("veil_memoryfiles")
pytest.importorskip("veil_http")

FACT = "The build runs with make check-all."
TURN_1 = [
    {"tool_calls": [{"name": "memory_write", "arguments": {"content": FACT}}]},
    "Noted.",
]


def layer_and_memory() -> list:
    """The context layer (so the manifest's counts come in the anchored context note) and the
    memory files."""
    import veil_compaction
    import veil_fsrs
    import veil_memoryfiles
    from veil_fsrs import evict_plugin

    return [
        ("veil_fsrs", veil_fsrs),
        ("veil_fsrs_evict", evict_plugin),
        ("veil_compaction", veil_compaction),
        ("veil_memoryfiles", veil_memoryfiles),
    ]


def notes(messages: list[dict]) -> list[tuple[int, str]]:
    """Where veil's context notes stand in a request, and their text."""
    return [
        (i, m["content"])
        for i, m in enumerate(messages)
        if m["role"] == "user" and str(m.get("content") or "").startswith(NOTE_PREFIX)
    ]


def check_cache_kept(requests: list, veil) -> None:
    """What every test here asserts of the three requests (two of turn 1, one of turn 2)."""
    from veil_memoryfiles.backend import files_for

    first, second, third = (r.body["messages"] for r in requests)
    # where the engine keeps it: on disk, or in the database with ``--veil-store=postgresql``
    project = veil.config.project_dir
    path = project / ".veil" / "memory" / "agents" / "default" / "MEMORY.md"
    memory = files_for(veil.config, veil).read_text(path) or ""
    assert FACT in memory  # the write happened
    # the system message never changed, though the memory file did
    assert first[0]["role"] == "system"
    assert first[0] == second[0] == third[0]
    assert FACT not in first[0]["content"]
    # turn 2 starts with all of turn 1's last request: its anchored note where it stood
    assert notes(second), second
    assert third[: len(second)] == second
    assert notes(third)[0] == notes(second)[0]


def test_a_session_loaded_again_after_memory_write_keeps_its_system_message(
    make_veil, scripted_server
):
    veil = make_veil(
        [*TURN_1, "Fine."],
        server=scripted_server,
        plugins=layer_and_memory(),
        context_window=32_000,
    )
    session = veil.new_session()
    assert veil.run_turn(session, "Remember how the build runs.").final == "Noted."
    again = veil.load_session(session.id)  # veil -c, or the next HTTP turn
    assert veil.run_turn(again, "And now?").final == "Fine."
    assert len(scripted_server.requests) == 3
    check_cache_kept(scripted_server.requests, veil)


def test_over_http_the_next_turn_keeps_the_system_message_and_the_notes(make_veil, scripted_server):
    from starlette.testclient import TestClient
    from veil_http import create_app

    veil = make_veil(
        [*TURN_1, "Fine."],
        server=scripted_server,
        plugins=layer_and_memory(),
        context_window=32_000,
    )
    with TestClient(create_app(veil), base_url="http://127.0.0.1:5051") as client:
        sid = client.post("/sessions").json()["id"]
        one = client.post(f"/sessions/{sid}/messages", json={"content": "Remember the build."})
        assert one.status_code == 200 and one.json()["final"] == "Noted.", one.text
        two = client.post(f"/sessions/{sid}/messages", json={"content": "And now?"})
        assert two.status_code == 200 and two.json()["final"] == "Fine.", two.text
    assert len(scripted_server.requests) == 3
    check_cache_kept(scripted_server.requests, veil)
