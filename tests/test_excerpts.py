"""The excerpt level (issue 29): an item out of the prompt that keeps some of its lines.

The core renders an excerpt (:mod:`veil.core.prompt.excerpts`), applies a plan's ``excerpts``
(:meth:`Session.apply_eviction`), shows it in the prompt, keeps it through a resume (the
``evict`` event), never collapses a step that shows one, and ``veil_hydrate`` brings the whole
item back."""

from __future__ import annotations

from veil.core import context_ops
from veil.core.prompt.context import build_prompt
from veil.core.prompt.excerpts import is_marker, normalised, render_excerpt, shown_lines
from veil.core.types import EvictionPlan
from veil.hookspecs import hookimpl

CONTENT = "\n".join(["line 0", "def parse(text):", "    return text", "", "x = parse(y)", "end"])


def test_render_keeps_lines_verbatim_and_marks_each_elided_run():
    # lines 1, 2 and 4 kept: run [0] before, [3] between, [5] after, each one marker
    assert render_excerpt(CONTENT, [4, 1, 2, 2], "#7") == "\n".join(
        [
            "[... 1 lines elided: #7 ...]",
            "def parse(text):",
            "    return text",
            "[... 1 lines elided: #7 ...]",
            "x = parse(y)",
            "[... 1 lines elided: #7 ...]",
        ]
    )


def test_render_of_no_line_or_every_line():
    assert render_excerpt(CONTENT, [], "#7") == "[... 6 lines elided: #7 ...]"
    assert render_excerpt(CONTENT, range(6), "#7") == CONTENT
    assert render_excerpt(CONTENT, [0, 99, -1], "#7") == "line 0\n[... 5 lines elided: #7 ...]"


def test_markers_are_recognised_and_shown_lines_leave_them_out():
    text = render_excerpt(CONTENT, [1, 4], "#12")
    assert [line for line in text.split("\n") if is_marker(line)] == [
        "[... 1 lines elided: #12 ...]",
        "[... 2 lines elided: #12 ...]",
        "[... 1 lines elided: #12 ...]",
    ]
    assert shown_lines(CONTENT, [4, 1]) == ["def parse(text):", "x = parse(y)"]
    assert not is_marker("[... a line of the file ...]")
    assert normalised([3, 3, 1, 9, -2], 5) == (1, 3)


class _FitNothing:
    """A ``fit_prompt`` that changes nothing: with one loaded the core collapses steps that
    left the prompt whole (as it does with veil_compaction's masking)."""

    @hookimpl
    def fit_prompt(self, session, messages, first_index):
        return None


def _session_with_results(make_veil, texts, plugins=()):
    from veil.core.turn import capture
    from veil.core.types import CaptureEvent, ToolResult

    veil = make_veil([], plugins=plugins)
    session = veil.new_session()
    for n, text in enumerate(texts):
        call_id = f"c{n}"
        msg = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        }
        session.append(msg)
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


def _sent(session, index):
    """The content the prompt sends for stored message ``index``."""
    prompt = build_prompt(session)
    [message] = [
        m
        for m in prompt.messages
        if m.get("role") == "tool" and m.get("tool_call_id") == f"c{(index - 1) // 2}"
    ]
    return message["content"]


def test_a_plan_excerpt_is_what_the_prompt_shows_until_hydrated(make_veil):
    veil, session = _session_with_results(make_veil, [CONTENT, "other result"])
    first = next(i for i in session.live_items if i.content == CONTENT)
    notes = session.apply_eviction(
        EvictionPlan(to_warm=[first.id], excerpts={first.id: (4, 1)}, reasons={first.id: "excerpt"})
    )
    assert notes == ["evicted 1 item(s)"]
    assert first.tier == "warm" and first.excerpt == (1, 4)
    expected = render_excerpt(CONTENT, [1, 4], f"#{first.message_index}")
    assert session.stubs[first.message_index] == expected
    assert _sent(session, first.message_index) == expected
    # the evict event keeps the lines, so a resumed session shows the same
    [event] = veil.store.events(session.id, ("evict",))
    [entry] = event["payload"]["items"]
    assert entry["excerpt"] == [1, 4] and entry["reason"] == "excerpt"
    # veil_hydrate brings it back whole: no stub, no excerpt
    context_ops.hydrate(session, f"#{first.message_index}")
    assert first.tier == "live" and first.message_index not in session.stubs
    assert _sent(session, first.message_index) == CONTENT


def test_a_warm_item_changes_lines_or_goes_back_to_a_plain_stub(make_veil):
    veil, session = _session_with_results(make_veil, [CONTENT])
    [item] = list(session.live_items)
    idx = item.message_index
    session.apply_eviction(EvictionPlan(to_warm=[item.id], excerpts={item.id: (1,)}))
    notes = session.apply_eviction(EvictionPlan(excerpts={item.id: (2, 4)}))
    assert notes == ["excerpted 1 item(s) again"]
    assert session.stubs[idx] == render_excerpt(CONTENT, [2, 4], f"#{idx}")
    # the same lines again: nothing to do, nothing logged
    before = len(veil.store.events(session.id, ("evict",)))
    assert session.apply_eviction(EvictionPlan(excerpts={item.id: (4, 2)})) == []
    assert len(veil.store.events(session.id, ("evict",))) == before
    session.apply_eviction(EvictionPlan(excerpts={item.id: ()}))
    assert item.excerpt is None
    assert session.stubs[idx] == f"[evicted {item.tokens} tokens #{idx}]"


def test_a_resumed_session_shows_the_same_excerpt(make_veil):
    veil, session = _session_with_results(make_veil, [CONTENT, "second"])
    first = next(i for i in session.live_items if i.content == CONTENT)
    session.apply_eviction(EvictionPlan(to_warm=[first.id], excerpts={first.id: (1, 4)}))
    shown = session.stubs[first.message_index]
    session.save_state()
    veil.store.flush()
    again = veil.load_session(session.id)
    assert again.stubs[first.message_index] == shown
    [back] = [i for i in again.paged_out.values() if i.id == first.id]
    assert back.excerpt == (1, 4)


def test_a_step_showing_an_excerpt_is_not_collapsed(make_veil):
    from veil.core.turn import capture
    from veil.core.types import CaptureEvent

    veil, session = _session_with_results(make_veil, [CONTENT, "second"], [_FitNothing()])
    first = next(i for i in session.live_items if i.content == CONTENT)
    call_index = first.message_index - 1
    capture(
        session,
        CaptureEvent("assistant", session.messages[call_index], 1, message_index=call_index),
    )
    [turn] = [i for i in session.live_items if i.message_index == call_index]

    def shown():
        return [m.get("content") for m in build_prompt(session).messages]

    # the turn leaves as a plain stub and its result as an excerpt: the step stays
    session.apply_eviction(EvictionPlan(to_warm=[turn.id, first.id], excerpts={first.id: (1,)}))
    assert render_excerpt(CONTENT, [1], f"#{first.message_index}") in shown()
    assert f"[evicted turn #{call_index}]" in shown()
    # the result becomes a plain stub too: now the whole step is left out (collapsed)
    session.apply_eviction(EvictionPlan(excerpts={first.id: ()}))
    assert not any(f"#{first.message_index}]" in (c or "") for c in shown())
    assert f"[evicted turn #{call_index}]" not in shown()
