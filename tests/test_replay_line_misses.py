"""Identifier and line misses of every replay policy, counted by hand on a recording written here
(issue 29: "The measure itself needs tests").

The recording (system ``sys``, task ``fix parsing``; a_i the assistant message of step i, o_i its
observation; 12 messages before step 6, in the order a0 o0 a1 o1 ... a5 o5)::

    a0 ls pkg                                   o0 pkg/parser.py | pkg/util_mod.py | setup.cfg
    a1 cat pkg/parser.py                        o1 import util_mod | def parse_line(text):
                                                   |     return util_mod.split_fields(text)
    a2 grep -n split_fields pkg/util_mod.py     o2 7:def split_fields(text, sep): | 8:    return text.split(sep)
    a3 cat setup.cfg                            o3 [metadata] | name = pkg_demo | version = 0.1
    a4 run parse_line from pkg_demo             o4 ok
    a5 edit pkg/util_mod.py split_fields        o5 done
    a6 final: split_fields in pkg/util_mod.py fixed; see setup.cfg

(``|`` separates lines). References, by hand (identifier tokens of a_t seen in an earlier
observation, none is in ``sys`` or ``fix parsing``), with the source of each (the latest earlier
message holding it) and the source's line that holds it:

    t1 pkg/parser.py      o0 "pkg/parser.py"
    t2 split_fields       o1 "    return util_mod.split_fields(text)"
       pkg/util_mod.py    o0 "pkg/util_mod.py"
    t3 setup.cfg          o0 "setup.cfg"
    t4 parse_line         o1 "def parse_line(text):"
       pkg_demo           o3 "name = pkg_demo"
    t5 pkg/util_mod.py    a2 "grep -n split_fields pkg/util_mod.py"   (a turn is a source too)
       split_fields       o2 "7:def split_fields(text, sep):"         (o2 comes after a2)
    t6 split_fields       a5 "edit pkg/util_mod.py split_fields"
       pkg/util_mod.py    a5 (the same line)
       setup.cfg          a3 "cat setup.cfg"

11 references in all. Baselines run with words as tokens (``len(text.split())``): sys 1, task 2,
a0 2, o0 3, a1 2, o1 6, a2 4, o2 6, a3 2, o3 7, a4 4, o4 1, a5 3, o5 1, the mask
``[observation masked]`` 2.
"""

from __future__ import annotations

import json

import pytest

from veil.default_plugins.replay.formats import ReplayStep, Trajectory
from veil.default_plugins.replay.measures import RecordedLines, line_misses, misses, references
from veil.default_plugins.replay.runner import (
    FullHistory,
    MaskingBlocks,
    MaskingBudget,
    ObservationMasking,
    PolicyResult,
    RecencyHysteresis,
    RecencyTruncation,
    replay,
    run_policies,
)

STEPS = [
    ("ls pkg", "pkg/parser.py\npkg/util_mod.py\nsetup.cfg"),
    (
        "cat pkg/parser.py",
        "import util_mod\ndef parse_line(text):\n    return util_mod.split_fields(text)",
    ),
    (
        "grep -n split_fields pkg/util_mod.py",
        "7:def split_fields(text, sep):\n8:    return text.split(sep)",
    ),
    ("cat setup.cfg", "[metadata]\nname = pkg_demo\nversion = 0.1"),
    ("run parse_line from pkg_demo", "ok"),
    ("edit pkg/util_mod.py split_fields", "done"),
    ("final: split_fields in pkg/util_mod.py fixed; see setup.cfg", None),
]


def recording(padding: int = 0) -> Trajectory:
    """The recording above; ``padding`` > 0 appends that many distinct filler lines (plain
    words, no identifier, no line repeated) to each observation, which changes no reference,
    source or source line, only the size."""
    steps = []
    for i, (assistant, observation) in enumerate(STEPS):
        if observation is not None and padding:
            filler = [f"filler {w} of output {chr(97 + i)}" for w in _words_for(padding)]
            observation = observation + "\n" + "\n".join(filler)
        steps.append(ReplayStep(i, assistant, assistant.split(" ", 1)[0], observation, None))
    return Trajectory("hand", "mini-swe-agent", "sys", "fix parsing", steps)


def _words_for(n: int) -> list[str]:
    # n distinct plain words ("alpha", "bravo", ... then "alpha bravo", ...): no digits
    base = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    out = []
    for k in range(n):
        out.append(" ".join(base[j] for j in range(len(base)) if (k + 1) >> j & 1))
    return out


def words(text: str) -> int:
    return len(text.split())


REFS = [
    set(),
    {"pkg/parser.py"},
    {"split_fields", "pkg/util_mod.py"},
    {"setup.cfg"},
    {"parse_line", "pkg_demo"},
    {"pkg/util_mod.py", "split_fields"},
    {"split_fields", "pkg/util_mod.py", "setup.cfg"},
]


def test_references_and_sources_by_hand():
    traj = recording()
    assert [references(traj, t) for t in range(7)] == REFS
    recorded = RecordedLines()
    sources = {}
    for t, step in enumerate(traj.steps):
        for ref in sorted(REFS[t]):
            sources[t, ref] = recorded.lines_with(ref)
        recorded.add(step.assistant)
        if step.observation is not None:
            recorded.add(step.observation)
    assert sources == {
        (1, "pkg/parser.py"): ["pkg/parser.py"],
        (2, "split_fields"): ["    return util_mod.split_fields(text)"],
        (2, "pkg/util_mod.py"): ["pkg/util_mod.py"],
        (3, "setup.cfg"): ["setup.cfg"],
        (4, "parse_line"): ["def parse_line(text):"],
        (4, "pkg_demo"): ["name = pkg_demo"],
        (5, "pkg/util_mod.py"): ["grep -n split_fields pkg/util_mod.py"],
        (5, "split_fields"): ["7:def split_fields(text, sep):"],
        (6, "split_fields"): ["edit pkg/util_mod.py split_fields"],
        (6, "pkg/util_mod.py"): ["edit pkg/util_mod.py split_fields"],
        (6, "setup.cfg"): ["cat setup.cfg"],
    }


def test_a_line_holds_only_whole_and_exact():
    recorded = RecordedLines()
    recorded.add("x = 1\n    return util_mod.split_fields(text)\ny = 2")
    refs = {"split_fields"}
    line = "    return util_mod.split_fields(text)"
    assert line_misses(refs, f"a\n{line}\nb", recorded) == set()
    assert line_misses(refs, f"first message\x00{line}", recorded) == set()  # any message
    assert line_misses(refs, f"{line}\x00last message", recorded) == set()
    # the identifier is there, the line is not: a longer line, a stripped one, a mention
    for text in (f"{line}  # edited", line.strip(), "see split_fields", line[:-1]):
        assert line_misses(refs, text, recorded) == {"split_fields"}, text
    assert line_misses(refs, f"{line}  # edited\n{line}", recorded) == set()  # 2nd occurrence
    assert misses(refs, "see split_fields") == set()
    assert line_misses(refs, "nothing", recorded) == {"split_fields"}  # identifier miss too
    # the source is the latest message holding the reference: a newer mention moves it there
    recorded.add("grep split_fields")
    assert line_misses(refs, line, recorded) == {"split_fields"}
    assert line_misses(refs, "grep split_fields", recorded) == set()


# Per policy: identifier misses and line misses per step, counted by hand for the prompt each
# one sends (the comments say what the prompt holds at the steps with a miss).
BY_HAND = {
    # everything earlier, whole
    "full": ([0] * 7, [0] * 7),
    # N = 2: at step t the oldest t - 2 observations are masked.
    # t3: o0 masked, setup.cfg nowhere else. t4: o0-o1 masked, parse_line nowhere else.
    # t5: o0-o2 masked; split_fields stands in a2 (identifier held) but its source line of o2
    # does not (line miss). t6: every source is a kept turn (a5, a3).
    "masking": ([0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0]),
    # G = 2, N = 2: masks 2 at a time: t3 masks nothing (1 due), t4-t5 mask o0-o1 (2-3 due),
    # t6 o0-o3. t4: parse_line only in o1. t5: o2 is kept, so split_fields' line stands.
    "masking-blocks": ([0, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0, 0]),
    # budget 14 words (system + task 3, 11 for history), newest first, stop at the first
    # message that does not fit. t2: o1 a1 o0 (14). t3: o2 a2 (13): setup.cfg gone.
    # t4: o3 a3: parse_line gone. t5: o4 a4 (8; o3 would make 15): both gone.
    # t6: o5 a5 o4 a4 (12): setup.cfg gone (a3 is not kept).
    "recency": ([0, 0, 0, 1, 1, 2, 1], [0, 0, 0, 1, 1, 2, 1]),
    # budget 14, cut to 70% (9.8 words) when over: t2 over (16): keep o1 (9): pkg/util_mod.py
    # gone. t3 over: keep o2: setup.cfg gone. t4 over, o3 alone is 10 > 9.8: head only, both
    # gone. t5: a4 o4 appended (8): both gone. t6: a4 o4 a5 o5 (12): setup.cfg gone.
    "recency-hysteresis": ([0, 0, 1, 1, 2, 2, 1], [0, 0, 1, 1, 2, 2, 1]),
    # masking N = 2 held to 14 words: t2 as recency (nothing masked yet). t3: a2 o2. t4: a3 o3.
    # t5: a4 o4. t6: M(o3) a4 o4 a5 o5 (14): setup.cfg's source a3 cut.
    "masking-budget": ([0, 0, 0, 1, 1, 2, 1], [0, 0, 0, 1, 1, 2, 1]),
}


def _baselines() -> list:
    return [
        FullHistory(),
        ObservationMasking(keep=2),
        MaskingBlocks(block=2, keep=2),
        RecencyTruncation(14, words),
        RecencyHysteresis(14, words),
        MaskingBudget(14, words, keep=2),
    ]


def test_every_baseline_by_hand():
    results = run_policies(recording(), _baselines(), 14, words)
    for name, (ident, lines) in BY_HAND.items():
        result = results[name]
        assert result.references == 11, name
        assert [s.misses for s in result.steps] == ident, name
        assert [s.line_misses for s in result.steps] == lines, name
        assert (result.misses, result.line_misses) == (sum(ident), sum(lines)), name
    # the prompts the counts above were made for (a spot check of the word counts)
    assert [s.prompt_tokens for s in results["recency"].steps] == [3, 8, 14, 13, 12, 8, 12]
    assert [s.prompt_tokens for s in results["recency-hysteresis"].steps] == [
        3, 8, 9, 9, 3, 8, 12
    ]  # fmt: skip


def test_the_json_carries_line_misses_beside_misses():
    out = replay([recording()], budget=8000, per_step=True)
    masking = out["files"][0]["masking"]  # N = 10: nothing is masked in 7 steps
    assert masking["misses"] == masking["line_misses"] == 0
    assert list(masking)[-2:] == ["line_misses", "per_step"]
    assert masking["per_step"][3] == {
        "prompt_tokens": masking["per_step"][3]["prompt_tokens"],
        "cached_tokens": masking["per_step"][3]["cached_tokens"],
        "misses": 0,
        "line_misses": 0,
    }
    assert out["total"]["masking"]["line_misses"] == 0
    assert PolicyResult.from_json(out["total"]["recency"]).line_misses == 0
    older = dict(out["total"]["recency"])
    del older["line_misses"]  # a result written before issue 29 reads back as 0
    assert PolicyResult.from_json(older).line_misses == 0


# --- veil, through a real veil session ----------------------------------------------------------


def _veil(budget: int, project=None):
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    # compaction off: the replay's stand-in summariser lists identifiers, which would hold
    # references this hand count does not expect; padding makes each observation about 410
    # tokens, so at the small budget only the newest one (protected) can stay whole
    traj = recording(padding=40)
    return traj, VeilReplayPolicy(traj, budget, compaction="none", project_dir=project)


def _whole_items_project(tmp_path):
    """A project whose eviction moves whole items (``context.levels`` off): the hand count
    below is for stubs, not excerpts (what is measured, the misses of the prompt sent, is the
    same rule for both)."""
    (tmp_path / ".veil").mkdir()
    (tmp_path / ".veil" / "settings.json").write_text(
        json.dumps({"context": {"levels": False}}), encoding="utf-8"
    )
    return tmp_path


class _Recorded:
    """veil's replay policy, keeping the messages it sends at each step."""

    name = "veil"

    def __init__(self, policy) -> None:
        self.policy = policy
        self.sent: list[list[dict]] = []

    @property
    def evictions(self) -> int:
        return self.policy.evictions

    def prompt_for_step(self, traj, t):
        messages, match_text = self.policy.prompt_for_step(traj, t)
        self.sent.append(messages)
        return messages, match_text


def _contents(messages: list[dict]) -> list[str]:
    """The contents veil sends apart from its system message, stubs and context notes."""
    return [
        m["content"]
        for m in messages[1:]
        if not m["content"].startswith(("[evicted", "[cold", "[veil context note"))
    ]


@pytest.mark.parametrize("budget", [100_000])
def test_veil_with_room_for_everything_misses_nothing(budget):
    traj, policy = _veil(budget)
    try:
        recorded = _Recorded(policy)
        result = run_policies(traj, [recorded], budget)["veil"]
    finally:
        policy.close()
    assert _contents(recorded.sent[6]) == ["fix parsing"] + [
        text for s in traj.steps[:6] for text in (s.assistant, s.observation)
    ]
    assert result.references == 11
    assert (result.misses, result.line_misses) == (0, 0)
    assert result.evictions == 0


def test_veil_at_a_small_budget_by_hand(tmp_path):
    """At 600 tokens (its system message alone is about 60, each padded observation about 410)
    veil's prompt holds, besides its system message, stubs and notes, the task, every assistant
    turn and the newest observation only: asserted first, since the hand count below is for
    that prompt. By hand, per step t (the prompt holds a0..a_{t-1} and o_{t-1}):

    t1 o0 holds pkg/parser.py's line. t2: split_fields' source line stands in o1;
    pkg/util_mod.py is in no turn nor o1: missed. t3: setup.cfg missed. t4: pkg_demo held by
    o3's line, parse_line (only in o1) missed. t5: a2 holds pkg/util_mod.py and is its source
    (held); it also names split_fields (identifier held) but that one's source is o2, evicted:
    a line miss only. t6: the sources are turns a5 and a3, both sent. Identifier misses
    0+0+1+1+1+0+0 = 3, line misses 0+0+1+1+1+1+0 = 4.

    Counted against the whole stored history instead of the prompt veil sent, the same steps
    would give 0 and 0: this test fails on that mistake.
    """
    budget = 600
    traj, policy = _veil(budget, _whole_items_project(tmp_path))
    try:
        recorded = _Recorded(policy)
        result = run_policies(traj, [recorded], budget)["veil"]
    finally:
        policy.close()
    for t in range(1, 7):
        sent = _contents(recorded.sent[t])
        expected = ["fix parsing", *(s.assistant for s in traj.steps[:t])]
        expected.append(traj.steps[t - 1].observation)
        assert sent == expected, (
            f"step {t}: veil's prompt at {budget} tokens is not the one this test's hand count "
            f"is for (task, every turn, the newest observation): recount it "
            f"({[s[:30] for s in sent]})"
        )
    assert result.references == 11
    assert result.over_budget_steps == 0
    assert [s.misses for s in result.steps] == [0, 0, 1, 1, 1, 0, 0]
    assert [s.line_misses for s in result.steps] == [0, 0, 1, 1, 1, 1, 0]
