"""``/context`` shows each loaded item's score and the five signals behind it (issue 3)."""

from __future__ import annotations

import pytest

veil_fsrs = pytest.importorskip("veil_fsrs", reason="the default scorer is not installed")
veil_repl = pytest.importorskip("veil_repl", reason="the REPL plugin is not installed")


def test_context_lists_items_with_score_and_signals(make_veil, project):
    import veil_fsrs.evict_plugin

    (project / "app.py").write_text("def main():\n    return 1\n")
    veil = make_veil(
        [{"tool_calls": [{"name": "read", "arguments": {"path": "app.py"}}]}, "It returns 1."],
        plugins=[
            ("veil_fsrs", veil_fsrs),
            ("veil_fsrs_evict", veil_fsrs.evict_plugin),
            ("veil_repl", veil_repl),
        ],
    )
    session = veil.new_session()
    veil.run_turn(session, "what does app.py return?")
    text = veil.slash_commands()["context"].handler(session, "")
    lines = text.splitlines()
    assert (
        "scored by veil_fsrs (signals: recency, frequency, relevance, structure, cognitive)"
        in lines
    )
    header = next(i for i, line in enumerate(lines) if line.startswith("score "))
    assert lines[header].split()[:6] == ["score", "recen", "frequ", "relev", "struc", "cogni"]
    assert lines[0].startswith("last prompt: ")  # the summary comes first (issue 21)
    rows = lines[header + 1 :]
    assert len(rows) == len(session.live_items) == 4  # user, 2 assistant turns, 1 tool result
    scores = [float(r.split()[0]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    # the same numbers the hooks give, for the tool result (recency 1.0 right after capture)
    tool = next(i for i in session.live_items if i.source == "tool_result")
    row = next(r for r in rows if tool.id in r)
    sig = veil.pm.hook.score_signals(
        session=session, items=session.live_items, task_tags=session.task_tags, now=session.clock()
    )
    pos = [i.id for i in session.live_items].index(tool.id)
    shown = [float(x) for x in row.split()[1:6]]
    assert shown == [
        round(float(sig[n][pos]), 2)
        for n in ("recency", "frequency", "relevance", "structure", "cognitive")
    ]
    assert shown[3] == 1.0  # the result points at app.py: structure signal


def test_context_says_which_items_show_an_excerpt(make_veil, project):
    import veil_fsrs.evict_plugin

    from veil.core.types import EvictionPlan

    (project / "app.py").write_text("".join(f"line_{n} = {n}\n" for n in range(40)))
    veil = make_veil(
        [{"tool_calls": [{"name": "read", "arguments": {"path": "app.py"}}]}, "Forty lines."],
        plugins=[
            ("veil_fsrs", veil_fsrs),
            ("veil_fsrs_evict", veil_fsrs.evict_plugin),
            ("veil_repl", veil_repl),
        ],
    )
    session = veil.new_session()
    veil.run_turn(session, "what is in app.py?")
    tool = next(i for i in session.live_items if i.source == "tool_result")
    lines_of_result = tool.content.count("\n") + 1
    session.apply_eviction(EvictionPlan(to_warm=[tool.id], excerpts={tool.id: (3, 4, 5)}))
    text = veil.slash_commands()["context"].handler(session, "")
    [line] = [x for x in text.splitlines() if x.startswith("excerpts ")]
    assert f"#{tool.message_index} 3/{lines_of_result}" in line
