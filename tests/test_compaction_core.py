"""The core's side of a compaction (issue 20): it folds what ``plan_compaction`` plans (here
veil_compaction's seed 000 rules, issue 33), fires ``before_compaction``, asks the ``summarise``
hook for the text only, refuses what issue 19 refuses, and stores the result."""

from __future__ import annotations

import pytest
from veil_compaction.testing import SeedPlanner

from veil.core.errors import CompactionRejected, NotAvailable
from veil.core.prompt import compaction
from veil.core.types import Summary
from veil.hookspecs import hookimpl


class _Summariser(SeedPlanner):
    """Answers ``summarise`` with a fixed text and records what it was given; plans as
    veil_compaction does (seed 000's rules)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[tuple[str, list[str], str | None, list[str]]] = []
        self.extracted: list[list[str]] = []

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        self.calls.append((mode, [m["content"] for m in messages], previous, instructions))
        return Summary(self.text, calls=1)

    @hookimpl
    def before_compaction(self, session, messages):
        self.extracted.append([m["content"] for m in messages])


def _history(session, exchanges: int, size: int = 400) -> None:
    for n in range(exchanges):
        session.append({"role": "user", "content": f"request {n} " + "x" * size})
        session.append({"role": "assistant", "content": f"answer {n} " + "y" * size})


def test_manual_compact_folds_by_seed_000s_rule_and_the_core_stores_the_text(make_veil):
    summariser = _Summariser("the first two exchanges")
    veil = make_veil(plugins=[("s", summariser)])
    session = veil.new_session()
    _history(session, 4)  # 8 messages of equal length: compactionCount 50 folds the first 4

    result = veil.compact(session.id, "keep the numbers")

    assert (result["compactedCount"], result["newSize"], result["alreadyUpToDate"]) == (
        4,
        4,
        False,
    )
    ((mode, folded, previous, instructions),) = summariser.calls
    assert mode == "default" and previous is None
    assert folded == [m["content"] for m in session.messages[:4]]
    assert instructions == ["", "keep the numbers"]  # customInstructions (none), the caller's
    stored = veil.store.get_session(session.id)
    assert (stored["compact_summary"], stored["compact_size"]) == ("the first two exchanges", 4)
    assert summariser.extracted == []  # seed 000 extracts memories for full compaction only


@pytest.mark.parametrize("text", ["\u200b \n\ufeff", "z" * 20000])
def test_the_core_refuses_an_invisible_or_larger_summary_and_writes_nothing(make_veil, text):
    veil = make_veil(plugins=[("s", _Summariser(text))])
    session = veil.new_session()
    _history(session, 4)
    with pytest.raises(CompactionRejected):
        veil.compact(session.id)
    stored = veil.store.get_session(session.id)
    assert (stored["compact_summary"], stored["compact_size"]) == (None, 0)
    assert (session.compact_summary, session.compact_size) == (None, 0)


@pytest.mark.parametrize(("after", "applied"), [(500, False), (499, True)])
def test_a_summary_must_make_the_prompt_smaller_not_the_same_size(
    make_veil, monkeypatch, after, applied
):
    """Issue 19's rule at its edge (issue 30): a summary that leaves what is sent at exactly
    the size it had (500 -> 500 tokens) is refused like a larger one; one token less is
    applied. The counts are set here, so the edge is the rule's, not a tokenizer's."""
    counts = iter([500, after])
    monkeypatch.setattr(compaction, "conversation_tokens", lambda *a, **k: next(counts))
    veil = make_veil(plugins=[("s", _Summariser("short"))])
    session = veil.new_session()
    _history(session, 4)
    if applied:
        result = veil.compact(session.id)
        assert (result["compactedCount"], result["newSize"]) == (4, 4)
        assert veil.store.get_session(session.id)["compact_summary"] == "short"
        return
    with pytest.raises(CompactionRejected, match=r"would not shrink the prompt \(500 -> 500"):
        veil.compact(session.id)
    stored = veil.store.get_session(session.id)
    assert (stored["compact_summary"], stored["compact_size"]) == (None, 0)


def test_full_compaction_extracts_exactly_what_it_folds_then_keeps_the_newest_steps(make_veil):
    summariser = _Summariser("earlier exchanges")
    veil = make_veil(plugins=[("s", summariser)], settings={"compaction": {"keepRecentTurns": 2}})
    session = veil.new_session()
    _history(session, 5)
    sent = list(session.messages)

    result = compaction.run_full(session, sent, list(range(len(sent))))

    # two steps kept (answers 3 and 4) with the requests before them: 6 messages folded
    assert result is not None and result.messages == sent[6:]
    assert (session.compact_summary, session.compact_size) == ("earlier exchanges", 6)
    ((mode, folded, _previous, instructions),) = summariser.calls
    assert (mode, instructions) == ("full", [])
    assert summariser.extracted == [folded] == [[m["content"] for m in sent[:6]]]
    assert compaction.failure_count(session) == 0


def test_without_a_summariser_there_is_nothing_to_compact(make_veil):
    veil = make_veil()
    session = veil.new_session()
    _history(session, 5)
    assert compaction.run_full(session, list(session.messages)) is None
    with pytest.raises(NotAvailable):
        veil.compact(session.id)
    assert session.compact_size == 0
