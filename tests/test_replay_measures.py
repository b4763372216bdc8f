"""Measures, baselines and the runner of ``veil replay`` (veil/default_plugins/replay/).

Token figures are computed here with tiktoken's cl100k_base directly, references by hand."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from veil.core.errors import BadRequest
from veil.core.models.offline import prepare_offline_env
from veil.default_plugins.replay.baselines import (
    MASKED_OBSERVATION,
    full_prompt,
    masking_budget_prompt,
    masking_prompt,
    recency_prompt,
)
from veil.default_plugins.replay.counting import TokenCounter
from veil.default_plugins.replay.formats import ReplayStep, Trajectory, load_trajectory
from veil.default_plugins.replay.measures import identifier_tokens, misses, references
from veil.default_plugins.replay.runner import (
    BASELINES,
    FullHistory,
    MaskingBlocks,
    MaskingBudget,
    ObservationMasking,
    RecencyHysteresis,
    RecencyTruncation,
    replay,
    run_baselines,
    run_policies,
)

TRAJ = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories"


@pytest.fixture(scope="module")
def enc():
    prepare_offline_env()
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.get_encoding("cl100k_base")


def ntok(enc, text: str) -> int:
    return len(enc.encode(text, disallowed_special=()))


# --- identifier tokens -------------------------------------------------------------------------


def test_identifier_tokens_follow_the_design_rule():
    text = (
        "Edit src/foo.py, then call getValue(x) with my_var on port 8000 and 123 items; "
        "v2 Hello README word pre-commit abc1234 and setup.py. Also __init__ and x.y"
    )
    # By hand: words without _ . / digit or inner capital are dropped (Edit, call, Hello, word,
    # pre-commit); 123 has 3 digits; v2 and x.y are shorter than 4 characters; abc1234 is one
    # token (no separate 1234); the sentence's final dot stays on setup.py.
    assert identifier_tokens(text) == {
        "src/foo.py",
        "getValue",
        "my_var",
        "8000",
        "README",
        "abc1234",
        "setup.py.",
        "__init__",
    }
    assert identifier_tokens("") == set()
    assert identifier_tokens("plain english words only here") == set()
    assert identifier_tokens("line 1472, col 12345") == {"1472", "12345"}


def _tiny() -> Trajectory:
    return Trajectory(
        path="tiny",
        format="mini-swe-agent",
        system="You are helpful. Use /bin/sh_tool.",
        task="Fix the bug in lib/util.py",
        steps=[
            ReplayStep(0, "ls lib", "ls lib", "lib/util.py\nlib/core_mod.py\nREADME_x", 0.0),
            ReplayStep(
                1,
                "cat lib/core_mod.py lib/util.py new_thing_1",
                "cat lib/core_mod.py",
                "def helper_fn(): pass  # line 1234",
                30.0,
            ),
            ReplayStep(
                2,
                "grep helper_fn lib/core_mod.py 1234 README_x unknown_tok /bin/sh_tool",
                "grep",
                None,
                60.0,
            ),
        ],
    )


def test_references_by_hand():
    traj = _tiny()
    assert references(traj, 0) == set()  # nothing observed yet
    # lib/util.py is in the task; new_thing_1 never appeared in an observation.
    assert references(traj, 1) == {"lib/core_mod.py"}
    # unknown_tok was never observed; /bin/sh_tool is in the system prompt.
    assert references(traj, 2) == {"helper_fn", "lib/core_mod.py", "1234", "README_x"}
    with pytest.raises(IndexError):
        references(traj, 3)


def test_misses_are_substring_absences():
    refs = {"helper_fn", "lib/core_mod.py", "1234"}
    assert misses(refs, "x = helper_fn()\x00see lib/core_mod.py:12") == {"1234"}
    assert misses(refs, "") == refs
    assert misses(set(), "anything") == set()
    assert misses({"12345"}, "no 1234 here") == {"12345"}
    assert misses({"1234"}, "line 12345") == set()  # substring match, as DESIGN.md says


# --- baselines ---------------------------------------------------------------------------------


def _long(n: int = 14) -> Trajectory:
    steps = [
        ReplayStep(
            i,
            f"step {i}: inspect pkg/mod_{i}.py",
            f"cat pkg/mod_{i}.py",
            f"<output>\ndef func_{i}(): return {1000 + i}\n</output>" if i < n - 1 else None,
            None,
        )
        for i in range(n)
    ]
    return Trajectory("long", "swe-agent", "You are a coding agent.", "Fix pkg.", steps)


def test_full_and_masking_token_sums_by_hand(enc):
    traj = _long()
    head = ntok(enc, traj.system) + ntok(enc, traj.task)
    a = [ntok(enc, s.assistant) for s in traj.steps]
    o = [ntok(enc, s.observation) if s.observation else 0 for s in traj.steps]
    mask = ntok(enc, MASKED_OBSERVATION)
    n = len(traj.steps)
    full_per_step = [head + sum(a[:t]) + sum(o[:t]) for t in range(n)]
    masking_per_step = []
    for t in range(n):
        total = head + sum(a[:t])
        for i in range(t):  # every earlier step has an observation here
            total += o[i] if i >= t - 10 else mask
        masking_per_step.append(total)

    results = run_baselines(traj, budget=100_000)
    assert results["full"].prompt_tokens == sum(full_per_step)
    assert results["full"].peak_prompt_tokens == full_per_step[-1]
    assert results["masking"].prompt_tokens == sum(masking_per_step)
    assert results["masking"].peak_prompt_tokens == max(masking_per_step)
    # With a budget this large recency keeps everything: same as full.
    assert results["recency"].prompt_tokens == sum(full_per_step)
    assert results["recency"].evictions is None

    # Concretely at step 13: observations of steps 0-2 are masked, 3-12 kept.
    observations = [m["content"] for m in masking_prompt(traj, 13) if m["role"] == "user"][1:]
    assert observations[:3] == [MASKED_OBSERVATION] * 3
    assert observations[3:] == [traj.steps[i].observation for i in range(3, 13)]
    assert len(full_prompt(traj, 13)) == 2 + 13 * 2


def test_recency_stops_at_the_first_message_that_does_not_fit(enc):
    traj = Trajectory(
        "r",
        "mini-swe-agent",
        "system prompt",
        "the task",
        [
            ReplayStep(0, "first", "", "x " * 50, None),
            ReplayStep(1, "ok", "", "big " * 40, None),  # assistant "ok" is tiny
            ReplayStep(2, "second assistant message", "", "last output here", None),
            ReplayStep(3, "final", "", None, None),
        ],
    )
    head = ntok(enc, "system prompt") + ntok(enc, "the task")
    newest = ntok(enc, "last output here") + ntok(enc, "second assistant message")
    big = ntok(enc, "big " * 40)
    assert ntok(enc, "ok") < big - 1  # "ok" would fit in the room left; it must not be taken
    budget = head + newest + big - 1
    prompt = recency_prompt(traj, 3, budget, TokenCounter())
    assert [m["content"] for m in prompt] == [
        "system prompt",
        "the task",
        "second assistant message",
        "last output here",
    ]
    # One more token of budget and the big observation fits too.
    prompt = recency_prompt(traj, 3, budget + 1, TokenCounter())
    assert [m["content"] for m in prompt][2:] == [
        "big " * 40,
        "second assistant message",
        "last output here",
    ]
    # A budget smaller than system + task leaves just those two.
    assert len(recency_prompt(traj, 3, 1, TokenCounter())) == 2


# --- masking held to the budget (masking-budget) -----------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def _masked_words() -> Trajectory:
    # Word counts (the injected counter): system "sys" and task "task" 1 each; step i's action
    # "a{i}" 1 and observation 5. "[observation masked]" is 2 words. Step 0's observation holds
    # mod_zeta.py, which step 1's action repeats and step 13's action refers to again.
    steps = [ReplayStep(i, f"a{i}", "", " ".join([f"o{i}"] * 5), None) for i in range(13)]
    steps[0].observation = "mod_zeta.py o0 o0 o0 o0"
    steps[1].assistant = "mod_zeta.py"
    steps.append(ReplayStep(13, "open mod_zeta.py", "", None, None))
    return Trajectory("masked-words", "mini-swe-agent", "sys", "task", steps)


def _contents(prompt: list[dict]) -> list[str]:
    return [m["content"] for m in prompt]


def test_masking_budget_within_the_budget_is_the_masking_prompt():
    traj = _masked_words()
    # Masking at step t: 2 + t actions + 5 x min(t, 10) + 2 x max(0, t - 10) words.
    # t=12: 2 + 12 + 50 + 4 = 68 <= 70, with observations 0 and 1 masked (full would be 74).
    prompt = masking_budget_prompt(traj, 12, 70, _words)
    assert prompt == masking_prompt(traj, 12)
    assert _contents(prompt)[2:6] == ["a0", MASKED_OBSERVATION, "mod_zeta.py", MASKED_OBSERVATION]
    assert sum(_words(c) for c in _contents(prompt)) == 68
    assert prompt != full_prompt(traj, 12)
    for t in range(13):  # 68 is the largest prompt before step 13: every one is masking's
        assert masking_budget_prompt(traj, t, 70, _words) == masking_prompt(traj, t)


def test_masking_budget_over_the_budget_cuts_the_oldest_first():
    traj = _masked_words()
    masked = _contents(masking_prompt(traj, 13))  # 2 + 13 + 50 + 6 = 71 words
    # Budget 70: walking back, steps 3-12 verbatim take 10 x 6 = 60 (62 with system + task),
    # then M2 64, a2 65, M1 67, a1 68, M0 70; a0 would make 71 > 70: only a0 is cut.
    prompt = _contents(masking_budget_prompt(traj, 13, 70, _words))
    assert prompt == ["sys", "task", *masked[3:]]
    assert sum(_words(c) for c in prompt) == 70
    # Budget 66: 62, M2 64, a2 65; M1 would make 67 > 66, so the walk stops there and a1
    # ("mod_zeta.py", 1 word, would fit in the word left) is not taken.
    prompt = _contents(masking_budget_prompt(traj, 13, 66, _words))
    assert prompt == ["sys", "task", "a2", MASKED_OBSERVATION, *masked[8:]]
    assert masked[8:10] == ["a3", traj.steps[3].observation]
    assert prompt[-1] == traj.steps[12].observation
    assert sum(_words(c) for c in prompt) == 65
    # A budget below system + task leaves just those two.
    assert _contents(masking_budget_prompt(traj, 13, 1, _words)) == ["sys", "task"]


def test_masking_budget_misses_a_reference_only_the_cut_message_held():
    traj = _masked_words()
    # References: step 1 and step 13 both name mod_zeta.py (seen in observation 0): 2 in all.
    # Masking masks observation 0 from step 11 on but keeps action 1 ("mod_zeta.py"): no miss.
    # At budget 66 masking-budget cuts action 1 at step 13 (see the test above): one miss;
    # at budget 70 it cuts only a0 and misses nothing.
    for budget, missed in ((66, 1), (70, 0)):
        policies = [ObservationMasking(), MaskingBudget(budget, _words)]
        results = run_policies(traj, policies, budget, _words)
        masking, held = results["masking"], results["masking-budget"]
        assert masking.references == held.references == 2
        assert masking.misses == 0
        assert held.misses == missed
        assert [s.misses for s in held.steps] == [0] * 13 + [missed]
        # masking: step 12 is 68 words, step 13 71; masking-budget never exceeds the budget
        assert masking.over_budget_steps == (2 if budget == 66 else 1)
        assert held.over_budget_steps == 0


def _real_file(name: str) -> Path:
    path = TRAJ / "mini-swe-agent" / name
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing in CI")
        pytest.skip(f"reference data not present at {path}")
    return path


def test_recency_never_exceeds_the_budget_on_a_real_session(enc):
    traj = load_trajectory(_real_file("sqlfluff__sqlfluff-2419.traj.json"))
    counter = TokenCounter()
    for budget in (3000, 8000):
        for t in range(len(traj.steps)):
            messages = recency_prompt(traj, t, budget, counter)
            assert sum(ntok(enc, m["content"]) for m in messages) <= budget
    results = run_baselines(traj, 8000)
    assert results["recency"].over_budget_steps == 0
    assert results["recency"].peak_prompt_tokens <= 8000
    assert results["full"].prompt_tokens > results["masking"].prompt_tokens


def test_masking_budget_is_masking_until_it_must_cut_on_a_real_session(enc):
    traj = load_trajectory(_real_file("sqlfluff__sqlfluff-2419.traj.json"))
    counter = TokenCounter()
    budget, cut = 3000, 0
    for t in range(len(traj.steps)):
        masked = masking_prompt(traj, t)
        held = masking_budget_prompt(traj, t, budget, counter)
        assert sum(ntok(enc, m["content"]) for m in held) <= budget
        if sum(ntok(enc, m["content"]) for m in masked) <= budget:
            assert held == masked
        else:  # system + task, then a tail of the masking prompt
            cut += 1
            assert held[:2] == masked[:2] and held[2:] == masked[len(masked) - len(held) + 2 :]
    assert cut > 0  # the session does exceed the budget under masking
    results = run_baselines(traj, budget, ["masking", "masking-budget"])
    assert results["masking"].over_budget_steps == cut
    assert results["masking-budget"].over_budget_steps == 0


def _naive_references(traj: Trajectory, t: int) -> set[str]:
    """DESIGN.md's reference rule written the slow, obvious way (an oracle for the runner)."""
    found = re.findall(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}", traj.steps[t].assistant)
    tokens = {
        w
        for w in found
        if w.isdigit()
        or any(c in "_./" or c.isdigit() for c in w)
        or any(c.isupper() for c in w[1:])
    }
    earlier = [s.observation for s in traj.steps[:t] if s.observation is not None]
    return {
        w
        for w in tokens
        if w not in traj.system and w not in traj.task and any(w in o for o in earlier)
    }


def test_references_and_misses_on_a_real_session():
    traj = load_trajectory(_real_file("pydicom__pydicom-901.traj.json"))
    expected = [_naive_references(traj, t) for t in range(len(traj.steps))]
    assert [references(traj, t) for t in range(len(traj.steps))] == expected
    results = run_baselines(traj, 8000)
    for result in results.values():
        assert result.references == sum(len(r) for r in expected)
    # Full history keeps every earlier observation, so it can never miss a reference.
    assert results["full"].misses == 0
    counter = TokenCounter()
    recency_missed = 0
    for t, refs in enumerate(expected):
        kept = "\x00".join(m["content"] for m in recency_prompt(traj, t, 8000, counter))
        recency_missed += sum(1 for r in refs if r not in kept)
    assert results["recency"].misses == recency_missed > 0
    assert results["masking"].misses > 0


def test_prompt_for_step_does_not_change_when_later_messages_do():
    traj = _long()
    changed = copy.deepcopy(traj)
    t = 11
    for step in changed.steps[t:]:
        step.assistant = "REWRITTEN " + step.assistant * 3
        step.observation = "REWRITTEN output"
    changed.steps.append(ReplayStep(len(changed.steps), "extra", "", "extra output", None))
    counter = TokenCounter()
    policies = [
        FullHistory(),
        ObservationMasking(),
        RecencyTruncation(60, counter),
        MaskingBlocks(),
        RecencyHysteresis(60, counter),
        MaskingBudget(60, counter),
    ]
    for policy in policies:
        for step in range(t + 1):
            assert policy.prompt_for_step(traj, step) == policy.prompt_for_step(changed, step)
    # And the later steps do see the change (the check above is not vacuous).
    assert FullHistory().prompt_for_step(traj, t + 1) != FullHistory().prompt_for_step(
        changed, t + 1
    )


# --- runner and the JSON contract --------------------------------------------------------------


class _HeadOnly:
    """A stand-in for veil: keeps system + task only, counts every step as one eviction."""

    name = "veil"

    def __init__(self, traj: Trajectory, budget: int) -> None:
        self.evictions = 0

    def prompt_for_step(self, traj: Trajectory, t: int):
        self.evictions = t
        messages = [
            {"role": "system", "content": traj.system + "\n[manifest: 3 items]"},
            {"role": "user", "content": traj.task},
        ]
        return messages, traj.system + "\x00" + traj.task


def test_replay_json_contract_with_and_without_veil(enc):
    tiny, long = _tiny(), _long()
    out = replay([tiny, long], [_HeadOnly], budget=8000)
    assert list(out) == ["files", "total"]
    assert [list(f) for f in out["files"]] == [["file", "format", "steps", "veil", *BASELINES]] * 2
    first = out["files"][0]
    assert (first["file"], first["format"], first["steps"]) == ("tiny", "mini-swe-agent", 3)
    # issue 3's keys first, then issue 18's cache measure and the steps over the budget, then
    # issue 29's line misses
    cache_keys = [
        "cached_tokens",
        "effective_tokens",
        "prefix_breaks",
        "over_budget_steps",
        "line_misses",
    ]
    issue3 = ["prompt_tokens", "peak_prompt_tokens", "references", "misses"]
    assert list(first["full"]) == issue3 + cache_keys
    assert list(first["veil"]) == [*issue3, "evictions", *cache_keys]
    # tiny: references 0 + 1 + 4 = 5; the head-only policy misses them all, full none.
    assert first["full"]["references"] == 5
    assert first["veil"]["misses"] == 5
    assert first["full"]["misses"] == 0
    assert first["veil"]["evictions"] == 2
    head_plus_manifest = ntok(enc, tiny.system + "\n[manifest: 3 items]") + ntok(enc, tiny.task)
    assert first["veil"]["prompt_tokens"] == 3 * head_plus_manifest
    assert first["veil"]["peak_prompt_tokens"] == head_plus_manifest
    # the same two messages every step: steps 1 and 2 reuse the whole prompt
    assert first["veil"]["cached_tokens"] == 2 * head_plus_manifest
    assert first["veil"]["prefix_breaks"] == 0

    total = out["total"]
    assert list(total) == ["steps", "veil", *BASELINES]
    assert total["steps"] == 3 + 14
    for name in ("veil", "full", "masking", "recency"):
        a, b = out["files"][0][name], out["files"][1][name]
        assert total[name]["prompt_tokens"] == a["prompt_tokens"] + b["prompt_tokens"]
        assert total[name]["peak_prompt_tokens"] == max(
            a["peak_prompt_tokens"], b["peak_prompt_tokens"]
        )
        assert total[name]["misses"] == a["misses"] + b["misses"]
    assert total["veil"]["evictions"] == 2 + 13
    json.dumps(out)  # plain JSON

    plain = replay([tiny], budget=8000)
    assert list(plain["files"][0]) == ["file", "format", "steps", *BASELINES]
    assert list(plain["total"]) == ["steps", *BASELINES]
    assert plain["files"][0]["full"] == first["full"]


@pytest.mark.parametrize("budget", [0, -5, 2.5, True, "8000"])
def test_bad_budget_is_a_bad_request(budget):
    with pytest.raises(BadRequest, match="budget"):
        run_baselines(_tiny(), budget)
    with pytest.raises(BadRequest, match="budget"):
        replay([_tiny()], budget=budget)


def test_a_policy_named_like_a_baseline_is_refused():
    class Impostor(_HeadOnly):
        name = "full"

    with pytest.raises(BadRequest, match="distinct"):
        replay([_tiny()], [Impostor], budget=8000)
