"""A ``fit_prompt`` implementation reports the results it masked by position (issue 33): the core
takes their items out of the live set from that answer, never from the text that replaced them."""

from __future__ import annotations

import pytest

from veil.core.errors import PluginResultInvalid
from veil.core.types import EvictionPlan
from veil.hookspecs import hookimpl


class Masker:
    """Replaces every tool result with ``text`` and reports the positions when ``report``."""

    def __init__(self, text: str, report: object = True) -> None:
        self.text = text
        self.report = report

    @hookimpl
    def fit_prompt(self, session, messages, first_index):
        positions = [k for k, m in enumerate(messages) if m.get("role") == "tool"]
        for k in positions:
            messages[k] = {**messages[k], "content": self.text}
        return positions if self.report is True else self.report


def _run(make_veil, project, masker):
    (project / "a.py").write_text("x = 1\n")
    veil = make_veil(
        [{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, "one file"],
        plugins=[masker],
        disable=["veil_compaction"],
    )
    session = veil.new_session()
    veil.run_turn(session, "Which files?")
    tool_index = next(i for i, m in enumerate(session.messages) if m["role"] == "tool")
    live = [i for i in session.live_items if i.message_index == tool_index]
    return veil, session, tool_index, live


def test_a_reported_position_takes_the_result_out_of_the_live_set(make_veil, project):
    veil, session, tool_index, live = _run(make_veil, project, Masker("(hidden by the test)"))
    assert live == []
    # the model saw the plugin's text, whatever it is
    assert veil.model.calls[1][-1]["content"] == "(hidden by the test)"


def test_the_seed_mask_text_unreported_leaves_the_result_live(make_veil, project):
    # the text alone no longer counts: the item stays live (the core matches no placeholder)
    veil, session, tool_index, live = _run(
        make_veil, project, Masker("[observation masked]", report=None)
    )
    assert [i.source for i in live] == ["tool_result"]
    assert veil.model.calls[1][-1]["content"] == "[observation masked]"


@pytest.mark.parametrize(
    ("answer", "got"),
    [("0", "str"), ([99], "a list holding 99"), ([True], "a list holding True")],
)
def test_an_answer_that_is_not_positions_names_the_plugin(make_veil, project, answer, got):
    with pytest.raises(PluginResultInvalid) as err:
        _run(make_veil, project, Masker("x", report=answer))
    assert err.value.message.startswith(f"plugin Masker: hook fit_prompt returned {got}")


class ReportOnly:
    """An eviction policy whose plan moves nothing but carries a report line that reads like a
    move: the prompt builder counts moves, it does not read the notes."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def score(self, session, items, task_tags, now):
        return [0.5] * len(items)

    @hookimpl
    def evict(self, session, items, scores, budget_tokens, used_tokens):
        self.calls += 1
        return EvictionPlan(report=["evicted nothing: a note that only reads like a move"])


def test_a_report_line_that_reads_like_a_move_runs_no_second_round(make_veil):
    # over the budget, so that a round that moved something would be followed by another
    policy = ReportOnly()
    veil = make_veil(
        ["ok", "done"],
        plugins=[policy],
        disable=["veil_fsrs"],
        settings={"context": {"budgetTokens": 40}},
    )
    session = veil.new_session()
    veil.run_turn(session, " ".join(f"word{i}" for i in range(400)))
    before = policy.calls
    veil.run_turn(session, "again")
    assert policy.calls - before == 1  # one prompt built, one eviction pass: nothing moved
