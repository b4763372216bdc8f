"""The twelve memory tools through the agent loop (scripted model), with a real store."""

from __future__ import annotations

import json

import pytest

from veil.core.types import EvictionPlan
from veil.default_plugins.memory_tools.tools import memory_tools
from veil.hookspecs import hookimpl

NAMES = [
    "veil_recall",
    "veil_promote",
    "veil_demote",
    "veil_remember",
    "veil_pin",
    "veil_unpin",
    "veil_forget",
    "veil_hydrate",
    "veil_history",
    "veil_turn_meta",
    "veil_conflicts",
    "veil_resolve_conflict",
]


def call(name, **args):
    return {"tool_calls": [{"name": name, "arguments": args}]}


def tool_outputs(session):
    return [m["content"] for m in session.messages if m["role"] == "tool"]


def test_twelve_tools_with_strict_json_schemas():
    tools = memory_tools()
    assert [t.name for t in tools] == NAMES
    for t in tools:
        assert t.parameters["type"] == "object" and t.parameters["additionalProperties"] is False
        assert set(t.parameters["required"]) <= set(t.parameters["properties"])
        json.dumps(t.schema())


class EvictToolResults:
    """Evicts every tool result once it is older than the current step."""

    @hookimpl
    def score(self, session, items, task_tags, now):
        return [0.5] * len(items)

    @hookimpl
    def evict(self, session, items, scores, budget_tokens, used_tokens):
        ids = [
            i.id
            for i in items
            if i.source == "tool_result"
            and i.step < session.step
            and not i.pinned
            and not i.loaded_by_hand
            and i.access_count == 0
        ]
        return EvictionPlan(to_warm=ids, reasons={i: "test" for i in ids})


def _notes_read_and_evicted(make_veil, project):
    """A session that read a 30-line file whose result was then evicted: (veil, session, item).
    A second read follows it: the newest step is never evicted (issue 19)."""
    (project / "notes.txt").write_text("alpha-bravo-charlie\n" * 30)
    (project / "other.txt").write_text("x\n")
    veil = make_veil(
        [call("read", path="notes.txt"), call("read", path="other.txt"), "first done"],
        plugins=[("ev", EvictToolResults())],
    )
    session = veil.new_session()
    veil.run_turn(session, "read the notes")
    return veil, session, veil.store.items(session.id, ("warm",))[0]


def test_hydrate_brings_an_evicted_result_back_in_place(make_veil, project):
    veil, session, item = _notes_read_and_evicted(make_veil, project)
    assert item.source == "tool_result" and "alpha-bravo-charlie" in item.content

    veil.model.add(call("veil_hydrate", pointer=item.id), "got it")
    veil.run_turn(session, "bring it back")
    out = tool_outputs(session)[-1]
    assert out.startswith(f"{item.id} is loaded again") and out.count("alpha-bravo-charlie") == 30
    back = veil.store.get_item(item.id)
    assert back.tier == "live" and back.access_count == 1
    assert [e["kind"] for e in veil.store.events(session.id, ("hydrate",))] == ["hydrate"]


def test_hydrate_follows_the_handle_a_stub_gives(make_veil, project):
    veil, session, item = _notes_read_and_evicted(make_veil, project)
    # the stub in the prompt names the tool message by its index in the session
    assert session.stubs[item.message_index] == (
        f"[evicted {item.tokens} tokens #{item.message_index}]"
    )
    assert session.messages[item.message_index]["role"] == "tool"
    handle = f"#{item.message_index}"
    veil.model.add(
        call("veil_hydrate", pointer=handle),
        call("veil_hydrate", pointer="#999"),
        call("veil_hydrate", pointer="#x1"),
        "got it",
    )
    veil.run_turn(session, "bring it back")
    first, missing, malformed = tool_outputs(session)[-3:]
    assert first.startswith(f"{item.id} is loaded again")
    assert first.count("alpha-bravo-charlie") == 30
    assert veil.store.get_item(item.id).tier == "live"
    assert item.message_index not in session.stubs
    assert "no item for message #999 in this session" in missing
    assert "'#x1' is not a message handle" in malformed


def test_pin_protects_and_unpin_releases(make_veil, project):
    (project / "a.txt").write_text("A\n")
    (project / "b.txt").write_text("B\n")  # read next: the newest step is never evicted
    veil = make_veil(
        [call("read", path="a.txt"), call("read", path="b.txt"), "ok"],
        plugins=[("ev", EvictToolResults())],
    )
    session = veil.new_session()
    veil.run_turn(session, "read a")
    item = veil.store.items(session.id, ("warm",))[0]
    veil.model.add(call("veil_pin", id=item.id), "pinned")
    veil.run_turn(session, "pin it")
    assert veil.store.get_item(item.id).pinned and veil.store.get_item(item.id).tier == "live"
    veil.model.add(call("veil_unpin", id=item.id), call("veil_pin", id="item_nope"), "done")
    veil.run_turn(session, "unpin")
    outs = tool_outputs(session)
    assert outs[-2] == f"{item.id} unpinned"
    assert "no item 'item_nope'" in outs[-1]


def test_remember_demote_promote_forget_turn_meta(make_veil):
    veil = make_veil(
        [
            call(
                "veil_remember", content="use uv for installs", kind="procedural", tags=["Tooling"]
            ),
            "ok",
        ]
    )
    session = veil.new_session()
    veil.run_turn(session, "remember this")
    item = next(i for i in session.live_items if i.source == "memory")
    assert item.kind == "procedural" and item.loaded_by_hand and "tooling" in item.tags

    veil.model.add(call("veil_demote", id=item.id, tier="cold"), "ok")
    veil.run_turn(session, "demote")
    assert veil.store.get_item(item.id).tier == "cold"
    veil.model.add(call("veil_promote", id=item.id), "ok")
    veil.run_turn(session, "promote")
    assert veil.store.get_item(item.id).tier == "live"
    veil.model.add(call("veil_turn_meta", kind="decision"), "ok")
    veil.run_turn(session, "mark")
    assert "current turn marked as decision (1 item(s))" in tool_outputs(session)[-1]
    veil.model.add(call("veil_forget", id=item.id), "ok")
    veil.run_turn(session, "forget")
    assert veil.store.get_item(item.id).tier == "cold"
    assert veil.store.get_item(item.id).content == "use uv for installs"  # nothing is lost
    assert [h.id for h in veil.recall("uv installs", 5, None, session)] == []


def test_recall_finds_evicted_content_by_keyword(make_veil, project):
    (project / "deploy.md").write_text(
        "The deploy script lives in tools/ship.sh and needs FOO_TOKEN.\n"
    )
    veil = make_veil([call("read", path="deploy.md"), "ok"], plugins=[("ev", EvictToolResults())])
    session = veil.new_session()
    veil.run_turn(session, "read the deploy doc")
    veil.model.add(call("veil_recall", query="deploy script token"), "found")
    veil.run_turn(session, "where is the deploy script?")
    out = tool_outputs(session)[-1]
    assert "tools/ship.sh" in out and "match(es)" in out


def test_history_searches_past_sessions(make_veil):
    veil = make_veil(["The flaky test is test_upload_retry."])
    veil.run_turn(veil.new_session(), "which test is flaky?")
    veil.model.add(call("veil_history", query="flaky upload", days=1), "ok")
    session = veil.new_session()
    veil.run_turn(session, "search history")
    out = tool_outputs(session)[-1]
    assert "test_upload_retry" in out


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("veil_recall", {}, "query: expected a non-empty string"),
        ("veil_recall", {"query": "x", "limit": 0}, "limit: expected an integer from 1 to 50"),
        ("veil_remember", {"content": "x", "kind": "gossip"}, "kind: expected one of"),
        ("veil_demote", {"id": "item_x", "tier": "hot"}, "tier: expected 'warm' or 'cold'"),
        ("veil_history", {"query": "x", "days": -1}, "days: expected a positive number"),
        ("veil_turn_meta", {"kind": "nap"}, "kind: expected one of"),
        ("veil_resolve_conflict", {"conflict_id": "c", "keep": "b"}, "no open conflict 'c'"),
    ],
)
def test_bad_arguments_name_the_field(make_veil, name, args, message):
    veil = make_veil([call(name, **args), "ok"])
    session = veil.new_session()
    veil.run_turn(session, "go")
    assert message in tool_outputs(session)[0]


def test_hydrate_rejects_handles_that_are_not_plain_message_numbers(make_veil, project):
    veil, session, item = _notes_read_and_evicted(make_veil, project)
    huge = "#" + "9" * 30
    veil.model.add(
        call("veil_hydrate", pointer=huge),
        call("veil_hydrate", pointer="#\uff13"),  # a full-width digit
        call("veil_hydrate", pointer="#+3"),
        call("veil_hydrate", pointer="#99999"),
        "done",
    )
    veil.run_turn(session, "try odd handles")
    outs = tool_outputs(session)[-4:]
    assert outs[0] == f"veil_hydrate: pointer: {huge!r} is not a message handle (#17, as in a stub)"
    assert "pointer: '#\uff13' is not a message handle" in outs[1]
    assert "pointer: '#+3' is not a message handle" in outs[2]
    assert outs[3] == "veil_hydrate: pointer: no item for message #99999 in this session"
    assert veil.store.get_item(item.id).tier == "warm"  # nothing came back


def test_an_item_of_another_session_comes_back_as_a_copy(make_veil, project):
    veil, other, item = _notes_read_and_evicted(make_veil, project)
    stub = other.stubs[item.message_index]
    session = veil.new_session()
    veil.model.add(call("veil_hydrate", pointer=item.id), call("veil_demote", id=item.id), "ok")
    veil.run_turn(session, "load the other session's notes")
    loaded, refused = tool_outputs(session)[-2:]
    assert loaded.count("alpha-bravo-charlie") == 30
    (copy,) = [i for i in session.live_items if "alpha-bravo-charlie" in i.content]
    assert copy.id != item.id and copy.session_id == session.id and copy.message_index is None
    assert veil.store.get_item(copy.id).tier == "live"
    # the other session's item, its tier and its stub are untouched
    assert veil.store.get_item(item.id).tier == "warm"
    assert veil.store.get_item(item.id).session_id == other.id
    assert other.stubs[item.message_index] == stub
    assert "belongs to another session" in refused
