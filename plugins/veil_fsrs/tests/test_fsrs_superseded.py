"""Superseded content (issue 29, item 2): what a tool call read, changed or ran
(veil_fsrs.superseded), which older results a newer one supersedes, the session state that
tracks it, and the levels planner's use of it (a stale copy leaves first, never whole)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import veil_fsrs
import veil_fsrs.evict_plugin
from veil_fsrs.levels import LOW_VALUE, SUPERSEDED, NameStats, line_info, plan_levels
from veil_fsrs.session_state import session_state
from veil_fsrs.settings import FsrsContextSettings
from veil_fsrs.superseded import Source, shell_source, source_of, superseded_by, supersedes

from veil.core.prompt.items import ItemBatch
from veil.core.prompt.tags import identifier_tokens
from veil.core.turn import capture
from veil.core.types import CaptureEvent, ContextItem

FSRS = (("veil_fsrs", veil_fsrs), ("veil_fsrs_evict", veil_fsrs.evict_plugin))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat src/a.py", Source(reads="src/a.py")),
        ("cd /repo && cat -n src/a.py", Source(reads="/repo/src/a.py")),
        ("cd /repo && nl -ba ./src/../src/a.py", Source(reads="/repo/src/a.py")),
        ("sed -n '10,40p' a.py", Source(reads="a.py", lines=(10, 40))),
        ("sed -n 7p a.py", Source(reads="a.py", lines=(7, 7))),
        ("nl -ba a.py | sed -n '5,9p'", Source(reads="a.py", lines=(5, 9))),
        ("head -n 50 a.py", Source(reads="a.py", lines=(1, 50))),
        ("head a.py", Source(reads="a.py", lines=(1, 10))),
        ("tail -20 a.py", Source(reads="a.py", lines=(-20, None))),
        ("python -m pytest tests/x.py  -q", Source(run="python -m pytest tests/x.py -q")),
        ("cd /r && python r.py", Source(run="/r$ python r.py")),
        ("grep -n foo a.py", Source(run="grep -n foo a.py")),
        ("sed -i 's/a/b/' a.py", Source(run="sed -i s/a/b/ a.py", writes=("a.py",))),
        ("echo x > out.txt", Source(run="echo x > out.txt", writes=("out.txt",))),
        ("echo x 2>&1 > /dev/null", Source(run="echo x 2 >& 1 > /dev/null")),
        ("mv a.py b.py", Source(run="mv a.py b.py", writes=("a.py", "b.py"))),
        ('echo "unterminated', Source(run='echo "unterminated')),
    ],
)
def test_shell_commands_say_what_they_read_changed_or_ran(command, expected):
    assert shell_source(command) == expected


def test_tool_arguments_say_what_they_read_or_changed():
    assert source_of("read_file", {"path": "a.py", "offset": 10, "limit": 5}) == Source(
        reads="a.py", lines=(10, 14)
    )
    assert source_of("Read", {"file_path": "/r/a.py"}) == Source(reads="/r/a.py")
    assert source_of("Edit", {"file_path": "/r/a.py", "old_string": "x"}) == Source(
        writes=("/r/a.py",)
    )
    editor = '{"command": "view", "path": "/r/a.py", "view_range": [1, 20]}'
    assert source_of("str_replace_editor", editor) == Source(reads="/r/a.py", lines=(1, 20))
    assert source_of("str_replace_editor", {"command": "str_replace", "path": "/r/a.py"}) == (
        Source(writes=("/r/a.py",))
    )
    assert source_of("bash", {"command": ["cat", "a.py"]}) == Source(reads="a.py")
    assert source_of("bash", "not json") is None
    assert source_of("web_search", {"query": "x"}) is None


def test_a_newer_result_supersedes_a_copy_it_covers_a_changed_file_and_the_same_run():
    whole, part = Source(reads="a.py"), Source(reads="a.py", lines=(10, 40))
    assert supersedes(whole, part) and supersedes(whole, whole)
    assert not supersedes(part, whole)  # lines 10-40 do not stand for the whole file
    assert supersedes(Source(reads="a.py", lines=(1, 50)), part)
    assert not supersedes(Source(reads="a.py", lines=(20, 50)), part)
    assert not supersedes(Source(reads="a.py", lines=(-20, None)), part)
    assert supersedes(Source(run="sed -i x a.py", writes=("a.py",)), whole)
    assert not supersedes(Source(reads="b.py"), whole)
    assert supersedes(Source(run="pytest -q"), Source(run="pytest -q"))
    assert not supersedes(Source(run="pytest -q"), Source(run="pytest -x"))


def test_each_superseded_result_points_at_the_newest_that_supersedes_it():
    sources = [
        ("r1", shell_source("cat a.py")),
        ("r2", shell_source("sed -n '1,5p' b.py")),
        ("r3", shell_source("python -m pytest -q")),
        ("r4", shell_source("sed -i 's/x/y/' a.py")),  # a.py changed: r1 is stale
        ("r5", shell_source("cat b.py")),  # covers r2
        ("r6", shell_source("python -m pytest -q")),  # the same run: r3
        ("r7", shell_source("cat a.py")),
        ("r8", shell_source("python -m pytest -q")),  # r6, so r3 -> r8 too
    ]
    assert superseded_by(sources) == {"r1": "r4", "r2": "r5", "r3": "r8", "r6": "r8"}
    # r1 points at r4, the change; r4 (a run of sed) is not a copy of a.py, and r7 supersedes
    # nothing older that is still a copy (r1 already left the list)


def _result(session, step: int, command: str, content: str):
    session.step = step
    call_id = f"call_{step}"
    arguments = json.dumps({"command": command})
    call = {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}
    session.append({"role": "assistant", "content": "", "tool_calls": [call]})
    idx = session.append({"role": "tool", "tool_call_id": call_id, "content": content})
    event = CaptureEvent(
        "tool_result",
        session.messages[idx],
        step,
        message_index=idx,
        tool_name="bash",
        tool_call_id=call_id,
        arguments={"command": command},
    )
    return capture(session, event)[0]


def test_the_session_state_reads_each_result_s_call_from_the_history(make_veil):
    veil = make_veil(plugins=FSRS)
    session = veil.new_session()
    first = _result(session, 1, "cat src/a.py", "def parse_value(text):\n    pass")
    run = _result(session, 2, "python -m pytest -q", "1 failed")
    second = _result(session, 3, "nl -ba src/a.py", "1 def parse_value(text):\n2     return 1")
    rerun = _result(session, 4, "python -m pytest -q", "1 passed")
    assert session_state(session).superseded() == {first.id: second.id, run.id: rerun.id}
    later = _result(session, 5, "cat src/a.py", "def parse_value(text):\n    return 1")
    assert session_state(session).superseded()[second.id] == later.id


def _item(name, content, *, index, step, tokens):
    return ContextItem(
        id=name,
        content=content,
        source="tool_result",
        kind="episodic",
        message_index=index,
        step=step,
        tokens=tokens,
    )


def _plan(items, budget, used, low_water, superseded=None):
    stats = NameStats()
    for item in items:
        stats.add(item, frozenset(identifier_tokens(item.content)))
    settings = {"protectedTurns": 0, "protectedResults": 1, "shallowReach": 0}
    return plan_levels(
        ItemBatch(items),
        np.full(len(items), 0.5),
        budget,
        used,
        settings=FsrsContextSettings.model_validate(settings),
        threshold=1.0,
        low_water=low_water,
        current_step=40,
        stats=stats,
        lines_of=line_info,
        pointer_tokens=9,
        superseded=superseded,
    )


def test_a_superseded_result_keeps_at_most_the_lines_that_differ():
    # small: two lines, the first holds src/x.py (owned by small: nothing newer holds it).
    # Its excerpt (line 0: 30 x 17/20 = 25.5 tokens + one marker of 12 = 37.5) costs more
    # than 0.6 x 30, so a current result is shown whole; a superseded one stays an excerpt.
    small = _item("small", "src/x.py is here\nok", index=1, step=1, tokens=30)
    filler = _item("filler", "y" * 50, index=3, step=2, tokens=400)
    now = _item("now", "z", index=5, step=40, tokens=500)
    current = _plan([small, filler, now], 900, 930, 0.98)
    assert current.to_warm == ["filler"] and current.excerpts == {}
    stale = _plan([small, filler, now], 900, 930, 0.98, superseded={"small": "now"})
    assert stale.to_warm == ["small", "filler"]
    assert stale.excerpts == {"small": (0,)}
    assert stale.reasons == {"small": SUPERSEDED, "filler": LOW_VALUE}
