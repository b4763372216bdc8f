"""The session side of page-in: which evicted items it offers the eviction policy, and how
it applies ``EvictionPlan.to_live`` (tiers, stubs, event log)."""

from __future__ import annotations

from veil.core.types import EvictionPlan

PAGED_IN = "paged in"


def _session_with_results(make_veil, count: int):
    from veil.core.turn import capture
    from veil.core.types import CaptureEvent, ToolResult

    veil = make_veil([])
    session = veil.new_session()
    for n in range(count):
        call_id = f"c{n}"
        msg = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        }
        session.append(msg)
        text = f"contents of src/mod_{n}.py: def func_{n}(): pass"
        tool_msg = {"role": "tool", "tool_call_id": call_id, "content": text}
        idx = session.append(tool_msg)
        capture(
            session,
            CaptureEvent(
                "tool_result",
                tool_msg,
                n + 1,
                message_index=idx,
                tool_name="read",
                tool_call_id=call_id,
                result=ToolResult(text),
            ),
        )
    return veil, session


def test_the_session_pages_in_what_the_policy_brings_back(make_veil):
    veil, session = _session_with_results(make_veil, 3)
    first, second, third = list(session.live_items)
    session.apply_eviction(EvictionPlan(to_warm=[first.id, second.id]))
    assert session.page_in_candidates() == []  # closed outside the prompt builder
    session.page_in_open = True
    assert [i.id for i in session.page_in_candidates()] == [first.id, second.id]
    notes = session.apply_eviction(
        EvictionPlan(to_live=[first.id, "item_unknown"], reasons={first.id: PAGED_IN})
    )
    assert notes == ["paged in 1 item(s)"]
    assert first.tier == "live" and session.live_items.has_id(first.id)
    assert first.message_index not in session.stubs and second.message_index in session.stubs
    assert veil.store.get_item(first.id).tier == "live"
    assert [i.id for i in session.page_in_candidates()] == [second.id]
    [event] = veil.store.events(session.id, ("evict",))[-1:]
    assert event["payload"]["items"] == [
        {
            "id": first.id,
            "tier": "live",
            "reason": PAGED_IN,
            "toolCallId": first.tool_call_id,
            "messageIndex": first.message_index,
        }
    ]
    # the kept messages send the paged-in content again, in place
    from veil.core.prompt.assemble import kept_messages

    sent = kept_messages(session)
    assert sent[1]["content"].startswith("contents of src/mod_0.py")
    assert sent[3]["content"] == session.stubs[second.message_index]


def test_items_demoted_or_forgotten_by_hand_are_not_offered(make_veil):
    from veil.core.context_ops import demote, forget, hydrate

    veil, session = _session_with_results(make_veil, 3)
    first, second, third = list(session.live_items)
    demote(session, first.id)
    session.apply_eviction(EvictionPlan(to_warm=[second.id, third.id]))
    session.page_in_open = True
    assert [i.id for i in session.page_in_candidates()] == [second.id, third.id]
    forget(session, second.id)
    hydrate(session, third.id)
    assert session.page_in_candidates() == []


def test_page_in_off_offers_nothing(make_veil):
    veil, session = _session_with_results(make_veil, 2)
    session.config.settings.context.page_in = False
    first = next(iter(session.live_items))
    session.apply_eviction(EvictionPlan(to_warm=[first.id]))
    session.page_in_open = True
    assert session.page_in_candidates() == []


def test_items_whose_message_was_compacted_away_are_not_offered(make_veil):
    veil, session = _session_with_results(make_veil, 3)
    first, second, third = list(session.live_items)
    session.apply_eviction(EvictionPlan(to_warm=[first.id, third.id]))
    session.page_in_open = True
    session.compact_size = first.message_index + 1  # compaction summarised the first step
    assert [i.id for i in session.page_in_candidates()] == [third.id]


def test_a_resumed_session_offers_what_passes_evicted_and_nothing_else(make_veil):
    from veil.core.context_ops import demote, forget

    veil, session = _session_with_results(make_veil, 5)
    a, b, c, d, e = list(session.live_items)
    demote(session, a.id)  # by hand: never offered
    session.apply_eviction(EvictionPlan(to_warm=[b.id, c.id, d.id]))
    session.apply_eviction(EvictionPlan(to_live=[c.id]))  # paged in again: live
    forget(session, d.id)
    session.mask_items({e.message_index})  # observation masking: never offered
    resumed = veil.load_session(session.id)
    resumed.page_in_open = True
    assert [i.id for i in resumed.page_in_candidates()] == [b.id]
    assert resumed.stubs[b.message_index] == session.stubs[b.message_index]


def test_a_turn_naming_a_file_touches_the_live_items_that_point_at_it(make_veil):
    """touch_related: only items whose targets hold a named path count an access (one each);
    the live columns follow, and an item evicted earlier is no longer a row to touch."""
    from veil.core.context_ops import touch_related

    veil, session = _session_with_results(make_veil, 4)
    live = session.live_items
    before = {i.id: i.access_count for i in live}
    first = live[0]  # names src/mod_0.py
    session.apply_eviction(EvictionPlan(to_warm=[first.id], reasons={first.id: "low score"}))
    assert touch_related(session, ["src/mod_2.py", "src/mod_0.py", "src/absent.py"]) == 1
    assert touch_related(session, ["nothing_here.py"]) == 0
    after = {i.id: i.access_count for i in session.live_items}
    touched = [i for i in session.live_items if after[i.id] != before[i.id]]
    assert [i.targets[0] for i in touched] == ["src/mod_2.py"]
    assert after[touched[0].id] == before[touched[0].id] + 1
    row = session.live_items.row_of(touched[0].id)
    assert session.live_items.columns()["access_count"][row] == after[touched[0].id]


def test_a_malformed_plan_fails_before_anything_changes(make_veil):
    import pytest

    veil, session = _session_with_results(make_veil, 2)
    first, _ = list(session.live_items)
    plan = EvictionPlan(to_warm=[first.id])
    plan.reasons = None  # not a mapping
    with pytest.raises(TypeError):
        session.apply_eviction(plan)
    assert session.live_items.has_id(first.id) and first.tier == "live"
    assert session.stubs == {}
    veil.store.flush()  # nothing queued that could fail later
    assert veil.store.get_item(first.id).tier == "live"


def test_eviction_takes_every_copy_of_an_id_held_twice(make_veil):
    import dataclasses

    veil, session = _session_with_results(make_veil, 2)
    first, second = list(session.live_items)
    session.live_items.append(dataclasses.replace(first))  # the core never does this
    assert not session.live_items.ids_unique
    session.apply_eviction(EvictionPlan(to_warm=[first.id]))
    assert [i.id for i in session.live_items] == [second.id]
    veil.store.flush()
    assert veil.store.get_item(first.id).tier == "warm"


def test_the_eviction_render_event_goes_to_a_front_end_registered_later(make_veil):
    from veil.hookspecs import hookimpl

    veil, session = _session_with_results(make_veil, 3)
    first, second, third = list(session.live_items)
    session.apply_eviction(EvictionPlan(to_warm=[first.id]))  # no front end: no event built
    seen = []

    class FrontEnd:
        @hookimpl
        def render(self, event):
            if event.kind == "eviction":
                seen.append(event.data)

    veil.pm.register(FrontEnd(), name="test_front_end")
    session.apply_eviction(EvictionPlan(to_warm=[second.id], reasons={second.id: "low score"}))
    assert len(seen) == 1
    assert seen[0]["items"] == [
        {
            "id": second.id,
            "tier": "warm",
            "reason": "low score",
            "toolCallId": "c1",
            "messageIndex": second.message_index,
        }
    ]
    veil.store.flush()
    payloads = [e["payload"]["items"] for e in veil.store.events(session.id, ("evict",))]
    assert payloads[-1] == seen[0]["items"]  # the event log lists the same entries
    assert [entry["id"] for entry in payloads[0]] == [first.id]


def test_an_id_listed_twice_moves_once_and_cold_wins(make_veil):
    """A plan naming an item in both lists (and one twice in to_warm) moves each item once:
    one tier in the store, one event entry, one note, page-in only for what went warm."""
    veil, session = _session_with_results(make_veil, 3)
    first, second, third = list(session.live_items)
    notes = session.apply_eviction(
        EvictionPlan(to_warm=[first.id, second.id, second.id], to_cold=[first.id])
    )
    assert notes == ["evicted 2 item(s)"]
    assert (first.tier, second.tier) == ("cold", "warm")
    assert [i.id for i in session.live_items] == [third.id]
    expected = {"live": 1, "warm": 1, "cold": 1}
    assert veil.store.tier_counts(session.id) == expected  # queued moves counted once
    session.page_in_open = True
    assert [i.id for i in session.page_in_candidates()] == [second.id]
    veil.store.flush()
    assert veil.store.get_item(first.id).tier == "cold"
    assert veil.store.get_item(second.id).tier == "warm"
    [event] = veil.store.events(session.id, ("evict",))
    assert [(e["id"], e["tier"]) for e in event["payload"]["items"]] == [
        (second.id, "warm"),
        (first.id, "cold"),
    ]
    assert veil.store.tier_counts(session.id) == expected  # and once committed
