"""Automatic full compaction: where it cuts, what it sends, memory extraction first, the compact
model role, the one-transaction rule."""

from __future__ import annotations

from veil_compaction import prompts
from veil_compaction.ledger import HEADING
from veil_compaction.masking import mask_observations
from veil_compaction.planning import choose_cut
from veil_compaction.summary import compaction_model
from veil_compaction.testing import ScriptedSummariser, step

from veil.core.errors import ProviderError
from veil.core.prompt import compaction
from veil.core.prompt.assemble import SUMMARY_PREFIX, pairing_problems, repair_pairing
from veil.core.prompt.compaction_cut import session_index
from veil.testing.scripted_model import ScriptedModel


def cut_history() -> list[dict]:
    return [
        {"role": "user", "content": "first"},  # 0
        *step(1),  # 1, 2
        *step(2, calls=2),  # 3, 4, 5
        {"role": "user", "content": "second"},  # 6
        *step(3),  # 7, 8
        {"role": "assistant", "content": "answer"},  # 9
    ]


def test_cut_keeps_the_newest_steps_with_their_request():
    history = cut_history()
    assert choose_cut(history, 1) == 9
    assert choose_cut(history, 2) == 6  # step 3 starts at 7; the user message 6 goes with it
    assert choose_cut(history, 3) == 3
    assert choose_cut(history, 4) == 0  # step 1 starts at 1, the user message 0 goes with it
    assert choose_cut(history, 9) == 0


def test_cut_keeps_fewer_steps_when_they_alone_are_too_large():
    history = cut_history()
    count = len  # one "token" per message
    assert choose_cut(history, 3, count, 7) == 3  # 7 messages kept: fits
    assert choose_cut(history, 3, count, 6) == 6  # 7 > 6 -> keep 2 steps: 4 messages
    assert choose_cut(history, 3, count, 3) == 9  # down to one step, whatever its size


def test_session_index_maps_a_cut_through_masking_and_repair():
    history = [
        {"role": "user", "content": "u0"},  # 0
        *step(1),  # 1, 2
        *step(2, calls=2),  # 3, 4, 5
        {"role": "user", "content": "u6"},  # 6
        {"role": "assistant", "content": "a7"},  # 7
    ]
    sent = mask_observations(history[1:], 1)
    assert session_index(history, 1, sent, 5) == 6  # before u6
    assert session_index(history, 1, sent, 2) == 3  # before step 2
    assert session_index(history, 1, sent, len(sent)) == len(history)
    # compact_size 2 points at an orphan result: repair drops it from what is sent
    sent = repair_pairing(history[2:])
    assert [m.get("content") for m in sent][:1] == [None] and len(sent) == len(history) - 3
    assert session_index(history, 2, sent, 3) == 6


def run_reads(open_project, project, events, reads=5, settings=None, **kw):
    (project / "big.txt").write_text(" ".join(f"w{n}" for n in range(400)))
    read = {"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]}
    main = ScriptedModel([read] * reads + ["done"], context_window=4096)
    compact = ScriptedSummariser(context_window=8192, reply_tokens=200)
    base = {
        "compaction": {"threshold": 0.5, "keepRecentTurns": 2, "observationMaskingTurns": 0},
        # the same file read again and again would be elided (lossless) instead of compacted
        "context": {"elideRepeats": False},
        **(settings or {}),
    }
    veil = open_project(main=main, compact=compact, settings=base, plugins=(("events", events),))
    session = veil.new_session()
    result = veil.run_turn(session, "read big.txt again and again")
    return veil, session, main, compact, result


def test_full_compaction_in_the_loop(open_project, project, events):
    veil, session, main, compact, result = run_reads(open_project, project, events)
    assert result.status == "done"
    compactions = events.of_kind("compaction")
    assert compactions, "the prompt went over 0.5 x 4096 tokens: a full compaction must run"
    assert all(e.data["mode"] == "full" for e in compactions)
    assert all(e.data["tokensAfter"] < e.data["tokensBefore"] for e in compactions)
    size = session.compact_size
    assert size == compactions[-1].data["newSize"] > 0
    assert session.messages[size]["role"] != "tool"  # a boundary
    # the model's summary, then what veil recorded from the tool calls
    assert session.compact_summary.startswith(compact.replies[-1] + "\n\n" + HEADING)
    assert "- Files read: big.txt" in session.compact_summary
    # the compact role answered the summaries (the main model's script has no spare reply)
    assert main.remaining == 0 and compact.requests
    assert all(r[0]["content"] == prompts.SUMMARY_SYSTEM for r in compact.requests)
    # every call after the first compaction starts with system + summary; all calls pair up
    first = next(
        i for i, c in enumerate(main.calls) if len(c) > 1 and "compacted" in c[1]["content"]
    )
    for call in main.calls:
        assert pairing_problems(call[1:]) == []
    after = main.calls[first]
    assert after[1]["content"].startswith(SUMMARY_PREFIX)
    # memory extraction saw exactly the summarised messages, before each compaction
    extracted = [m for part in events.extracted for m in part]
    assert extracted == session.messages[:size]
    # the full history stays in the store
    assert len(veil.store.messages(session.id)) == len(session.messages) == 2 + 2 * 5


def test_no_memory_extraction_when_memory_is_disabled(open_project, project, events):
    _, session, *_ = run_reads(
        open_project, project, events, settings={"memory": {"enabled": False}}
    )
    assert session.compact_size > 0 and events.extracted == []


def test_disabled_default_compaction_turns_full_compaction_off(open_project, project, events):
    (project / ".veil" / "agents" / "default").mkdir(parents=True)
    (project / ".veil" / "agents" / "default" / "agent.json").write_text(
        '{"defaultCompaction": {"enabled": false}}'
    )
    _, session, _, compact, _ = run_reads(open_project, project, events)
    assert session.compact_size == 0 and not compact.requests
    assert not events.of_kind("compaction")


def test_llm_error_mid_way_leaves_the_session_as_it_was(open_project, events):
    def boom(messages, tools):
        raise ProviderError("compact provider down")

    compact = ScriptedModel(["partial", boom], context_window=1024)
    veil = open_project(compact=compact, plugins=(("events", events),))
    session = veil.new_session()
    history = [{"role": "user", "content": "go"}] + [
        m for n in range(8) for m in step(n, size=1500)
    ]
    for message in history:
        session.append(message)
    assert compaction.run_full(session, list(history)) is None
    assert len(compact.calls) == 2  # chunked: the second call failed
    assert (session.compact_summary, session.compact_size) == (None, 0)
    row = veil.store.get_session(session.id)
    assert (row["compact_summary"], row["compact_size"]) == (None, 0)
    assert events.extracted, "extraction ran before the transaction"
    (warning,) = events.of_kind("warning")
    assert "compact provider down" in warning.data["text"]


def test_full_compaction_result_and_state(open_project, events):
    compact = ScriptedSummariser(reply_tokens=60)
    veil = open_project(compact=compact, plugins=(("events", events),))
    session = veil.new_session()
    # results long enough that the summary shrinks the prompt (a longer one is refused)
    history = [{"role": "user", "content": "go"}] + [m for n in range(6) for m in step(n, size=400)]
    for message in history:
        session.append(message)
    result = compaction.run_full(session, list(history))
    # keepRecentTurns 4 (default): steps 2..5 stay; step n takes 2 messages from index 1 + 2n
    assert session.compact_size == result.new_size == 5 == result.compacted_count
    assert result.messages == history[5:]
    assert events.extracted == [history[:5]]
    assert veil.store.get_session(session.id)["compact_size"] == 5


def test_compaction_model_role(open_project):
    veil = open_project(settings={"models": {"main": {"model": "m/main"}}})
    asked = []
    veil.llm.model_for = lambda role="main", model=None: asked.append((role, model))
    session = veil.new_session(model="m/session")
    compaction_model(session)
    assert asked == [("compact", "m/session")]  # compact role falls back to the session's main

    veil2 = open_project(
        settings={"models": {"main": {"model": "m/main"}, "compact": {"model": "m/compact"}}}
    )
    asked.clear()
    veil2.llm.model_for = lambda role="main", model=None: asked.append((role, model))
    compaction_model(veil2.new_session(model="m/session"))
    assert asked == [("compact", None)]
