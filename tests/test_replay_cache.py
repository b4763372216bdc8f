"""The prompt-cache measure of ``veil replay`` and the two cache-aware baselines (issue 18).

Expected figures are computed here by hand: token counts with tiktoken's cl100k_base directly,
prompt shapes and cut points with word counts worked out in the comments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.errors import BadRequest
from veil.core.models.offline import prepare_offline_env
from veil.default_plugins.replay.baselines import (
    MASKED_OBSERVATION,
    masked_count,
    masking_prompt,
    recency_hysteresis_prompt,
    recency_prompt,
)
from veil.default_plugins.replay.cache import CacheTracker, effective_tokens, message_key
from veil.default_plugins.replay.formats import ReplayStep, Trajectory
from veil.default_plugins.replay.runner import (
    BASELINES,
    PolicyResult,
    RecencyHysteresis,
    replay,
    run_baselines,
    run_policies,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def enc():
    prepare_offline_env()
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.get_encoding("cl100k_base")


def ntok(enc, text: str) -> int:
    return len(enc.encode(text, disallowed_special=()))


def _three() -> Trajectory:
    return Trajectory(
        "three",
        "mini-swe-agent",
        "You are a careful coding agent.",
        "Fix the off-by-one in pkg/range_util.py",
        [
            ReplayStep(0, "ls pkg", "ls pkg", "pkg/range_util.py\npkg/__init__.py", None),
            ReplayStep(1, "cat pkg/range_util.py", "cat", "def span(a, b): return b - a", None),
            ReplayStep(2, "edit span to return b - a + 1", "sed", None, None),
        ],
    )


# --- the cache measure -------------------------------------------------------------------------


def test_full_history_caches_everything_but_the_new_messages(enc):
    traj = _three()
    s, task = ntok(enc, traj.system), ntok(enc, traj.task)
    a0, o0 = ntok(enc, "ls pkg"), ntok(enc, "pkg/range_util.py\npkg/__init__.py")
    a1, o1 = ntok(enc, "cat pkg/range_util.py"), ntok(enc, "def span(a, b): return b - a")
    # step 0: [sys, task]                    nothing cached (no previous prompt)
    # step 1: [sys, task, a0, o0]            sys + task cached
    # step 2: [sys, task, a0, o0, a1, o1]    sys + task + a0 + o0 cached
    prompts = [s + task, s + task + a0 + o0, s + task + a0 + o0 + a1 + o1]
    cached = [0, s + task, s + task + a0 + o0]
    full = run_baselines(traj, 8000, ["full"])["full"]
    assert [m.prompt_tokens for m in full.steps] == prompts
    assert [m.cached_tokens for m in full.steps] == cached
    assert full.cached_tokens == sum(cached)
    assert full.prefix_breaks == 0
    uncached = sum(prompts) - sum(cached)
    assert full.effective_tokens(0.1) == pytest.approx(uncached + 0.1 * sum(cached))
    out = full.to_json(0.25)
    assert out["effective_tokens"] == pytest.approx(uncached + 0.25 * sum(cached))
    assert out["cached_tokens"] == sum(cached) and out["prefix_breaks"] == 0


class _ChangingPolicy:
    """Sends [system, task, note]; ``changes`` says which message changes with the step."""

    def __init__(self, name: str, changes: str) -> None:
        self.name = name
        self.changes = changes

    def prompt_for_step(self, traj: Trajectory, t: int):
        system = traj.system + (f" step {t}" if self.changes == "system" else "")
        note = "note" + (f" step {t}" if self.changes == "note" else "")
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": traj.task},
            {"role": "user", "content": note},
        ]
        return messages, "\x00".join(m["content"] for m in messages)


def test_a_changed_system_message_is_a_prefix_break_and_caches_nothing(enc):
    traj = _three()
    results = run_policies(
        traj,
        [_ChangingPolicy("sys", "system"), _ChangingPolicy("tail", "note")],
        8000,
    )
    sys_result, tail = results["sys"], results["tail"]
    assert [m.cached_tokens for m in sys_result.steps] == [0, 0, 0]
    assert sys_result.prefix_breaks == 2  # steps 1 and 2; step 0 has no previous prompt
    assert sys_result.effective_tokens(0.1) == sys_result.prompt_tokens  # all paid in full
    # A change in the last message keeps system + task cached and is not a break.
    head = ntok(enc, traj.system) + ntok(enc, traj.task)
    assert [m.cached_tokens for m in tail.steps] == [0, head, head]
    assert tail.prefix_breaks == 0


def test_identity_covers_role_content_and_tool_calls_and_is_a_snapshot():
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    sys_msg = {"role": "system", "content": "s"}
    a = {"role": "assistant", "content": "run it", "tool_calls": [call]}
    tracker = CacheTracker()
    assert tracker.step([sys_msg, a], [1, 2]) == (0, False)
    # same content, other tool call arguments: only the system message is shared
    b = {**a, "tool_calls": [{**call, "function": {"name": "bash", "arguments": '{"x": 1}'}}]}
    assert tracker.step([sys_msg, b], [1, 2]) == (1, False)
    # same content, other role: not the same message
    assert tracker.step([sys_msg, {"role": "user", "content": "run it"}], [1, 2]) == (1, False)
    # a dict changed in place after it was sent does not change what was recorded
    sent = {"role": "user", "content": "original"}
    tracker.step([sys_msg, sent], [1, 5])
    sent["content"] = "rewritten"
    assert tracker.step([sys_msg, {"role": "user", "content": "original"}], [1, 5]) == (6, False)
    assert message_key({"role": "user", "content": "x"}) == message_key(
        {"role": "user", "content": "x", "extra": 1}
    )
    with pytest.raises(ValueError, match="sizes"):
        tracker.step([sys_msg], [1, 2])


def test_effective_tokens_formula():
    # 1,000 prompt tokens of which 800 cached at 0.1x: 200 + 80 = 280
    assert effective_tokens(1000, 800, 0.1) == pytest.approx(280)
    assert effective_tokens(1000, 0, 0.1) == 1000
    assert effective_tokens(1000, 1000, 0.0) == 0


# --- masking in blocks -------------------------------------------------------------------------


def _observed(n: int) -> Trajectory:
    steps = [
        ReplayStep(i, f"act {i}", f"cmd {i}", f"out_{i} value {1000 + i}", None) for i in range(n)
    ]
    return Trajectory("obs", "mini-swe-agent", "system text", "task text", steps)


def _observations(prompt: list[dict]) -> list[str]:
    return [m["content"] for m in prompt[2:] if m["role"] == "user"]


def test_masked_count_by_hand():
    assert [masked_count(d, 10) for d in (0, 9, 10, 11, 19, 20, 27)] == [0, 0, 10, 10, 10, 20, 20]
    assert [masked_count(d, 1) for d in (0, 3, 17)] == [0, 3, 17]
    with pytest.raises(ValueError, match="block"):
        masked_count(3, 0)


def test_masking_blocks_masks_ten_at_a_time():
    traj = _observed(32)
    # Step t sees t observations; due = t - 10 of them (older than the 10 newest).
    # t=19: 9 due, none masked; t=20: 10 due, all 10 masked; t=29: 19 due, 10 masked;
    # t=30: 20 due, 20 masked.
    for t, masked in ((10, 0), (19, 0), (20, 10), (29, 10), (30, 20), (31, 20)):
        obs = _observations(masking_prompt(traj, t, block=10))
        assert obs == [MASKED_OBSERVATION] * masked + [
            traj.steps[i].observation for i in range(masked, t)
        ], t
    # block=1 is seed 000's rule: exactly the masking baseline.
    for t in range(32):
        assert masking_prompt(traj, t, block=1) == masking_prompt(traj, t)
    obs = _observations(masking_prompt(traj, 19))
    assert obs[:9] == [MASKED_OBSERVATION] * 9 and MASKED_OBSERVATION not in obs[9:]


def test_masking_blocks_changes_its_prefix_once_per_ten_steps():
    traj = _observed(32)
    results = run_baselines(traj, 100_000, ["full", "masking", "masking-blocks"])

    def rewrites(result: PolicyResult) -> list[int]:
        # steps whose cached part is less than the whole previous prompt
        s = result.steps
        return [t for t in range(1, len(s)) if s[t].cached_tokens < s[t - 1].prompt_tokens]

    assert rewrites(results["full"]) == []
    assert rewrites(results["masking"]) == list(range(11, 32))  # one more masked every step
    assert rewrites(results["masking-blocks"]) == [20, 30]
    assert results["masking-blocks"].cached_tokens > results["masking"].cached_tokens
    assert results["masking-blocks"].prefix_breaks == results["masking"].prefix_breaks == 0


# --- recency with hysteresis -------------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def _sized() -> Trajectory:
    # system and task: 1 word each; every step: a 1-word action and a 10-word observation
    steps = [ReplayStep(i, f"a{i}", "", " ".join([f"o{i}"] * 10), None) for i in range(9)]
    return Trajectory("sized", "mini-swe-agent", "sys", "task", steps)


def test_recency_hysteresis_cuts_to_seventy_percent_then_appends():
    traj = _sized()
    # Budget 50. Step t's full prompt is 2 + 11t words: 46 at t=4, 57 at t=5 (over).
    # At t=5 the cut goes to 0.7 x 50 = 35: walking back o4 a4 o3 a3 o2 a2 takes 2 + 33 = 35,
    # o1 would make 45 > 35: start = index of a2 = 4 (history a0 o0 a1 o1 a2 ...).
    # t=6: 35 + 11 = 46, fits: append. t=7: 57, over: cut to a4..o6 (start 8), 35 again.
    # t=8: 46 fits.
    start, starts, sizes = 0, [], []
    for t in range(9):
        messages, start = recency_hysteresis_prompt(traj, t, 50, _words, start)
        starts.append(start)
        sizes.append(sum(_words(m["content"]) for m in messages))
        assert [m["content"] for m in messages[:2]] == ["sys", "task"]
    assert starts == [0, 0, 0, 0, 0, 4, 4, 8, 8]
    assert sizes == [2, 13, 24, 35, 46, 35, 46, 35, 46]
    # Plain recency fills the budget at every step instead: at t=5 it keeps a1..o4 (46).
    assert sum(_words(m["content"]) for m in recency_prompt(traj, 5, 50, _words)) == 46


def test_recency_hysteresis_policy_is_the_same_in_order_or_not():
    traj = _sized()
    in_order = RecencyHysteresis(50, _words)
    ordered = [in_order.prompt_for_step(traj, t) for t in range(9)]
    for t in (8, 3, 6):
        assert RecencyHysteresis(50, _words).prompt_for_step(traj, t) == ordered[t]


def test_recency_hysteresis_caches_between_cuts(enc):
    traj = _observed(40)
    budget = 150  # ~10 tokens a step: a cut every ~5 steps from step ~15 on
    results = run_baselines(traj, budget, ["recency", "recency-hysteresis"])
    hyst, rec = results["recency-hysteresis"], results["recency"]
    head = ntok(enc, traj.system) + ntok(enc, traj.task)
    cuts = 0
    for t in range(1, 40):
        prev, cur = hyst.steps[t - 1], hyst.steps[t]
        assert cur.prompt_tokens <= budget
        if cur.cached_tokens == prev.prompt_tokens:  # an append: the whole last prompt reused
            continue
        # a cut: only system + task survive as the prefix, and the prompt is <= 70% of budget
        cuts += 1
        assert cur.cached_tokens == head
        assert cur.prompt_tokens <= 0.7 * budget
    assert 0 < cuts < 39 - 10
    assert hyst.over_budget_steps == rec.over_budget_steps == 0
    assert hyst.cached_tokens > rec.cached_tokens
    assert hyst.prompt_tokens < rec.prompt_tokens


# --- the JSON contract -------------------------------------------------------------------------

POLICY_KEYS = [
    "prompt_tokens",
    "peak_prompt_tokens",
    "references",
    "misses",
    "cached_tokens",
    "effective_tokens",
    "prefix_breaks",
    "over_budget_steps",
    "line_misses",  # issue 29, added last
]


def test_json_contract_has_the_cache_keys_and_per_step_on_request(enc):
    traj = _three()
    out = replay([traj, _observed(5)], budget=8000, cache_price=0.5, per_step=True)
    first = out["files"][0]
    assert list(first) == ["file", "format", "steps", *BASELINES]
    assert list(out["total"]) == ["steps", *BASELINES]
    for name in BASELINES:
        assert list(first[name]) == [*POLICY_KEYS, "per_step"]
        assert list(out["total"][name]) == POLICY_KEYS
        assert [list(s) for s in first[name]["per_step"]] == [
            ["prompt_tokens", "cached_tokens", "misses", "line_misses"]
        ] * 3
    full = first["full"]
    s_t = ntok(enc, traj.system) + ntok(enc, traj.task)
    assert [s["cached_tokens"] for s in full["per_step"]][:2] == [0, s_t]
    assert sum(s["prompt_tokens"] for s in full["per_step"]) == full["prompt_tokens"]
    assert full["effective_tokens"] == pytest.approx(
        full["prompt_tokens"] - full["cached_tokens"] + 0.5 * full["cached_tokens"]
    )
    total = out["total"]["full"]
    both = [f["full"] for f in out["files"]]
    assert total["cached_tokens"] == sum(b["cached_tokens"] for b in both)
    assert total["effective_tokens"] == pytest.approx(sum(b["effective_tokens"] for b in both))
    assert "per_step" not in replay([traj], budget=8000)["files"][0]["full"]
    json.dumps(out)
    # a chosen subset of baselines, in the contract's order whatever the order asked
    some = replay([traj], budget=8000, baselines=["recency-hysteresis", "full"])
    assert list(some["files"][0]) == ["file", "format", "steps", "full", "recency-hysteresis"]
    assert PolicyResult.from_json(total).to_json(0.5) == total


@pytest.mark.parametrize("price", [-0.1, 1.5, float("nan"), "0.1", True])
def test_bad_cache_price_is_a_bad_request(price):
    with pytest.raises(BadRequest, match="cache_price"):
        replay([_three()], budget=8000, cache_price=price)


def test_unknown_baseline_is_a_bad_request_naming_it():
    with pytest.raises(BadRequest, match="unknown baseline 'masking-block'"):
        replay([_three()], budget=8000, baselines=["masking-block"])


def test_run_replay_without_veil_opens_no_session(tmp_path):
    from veil.default_plugins.replay.report import parse_policies, render_table, run_replay

    path = _write_traj(tmp_path)
    result = run_replay([str(path)], 8000, project_dir=tmp_path, policies=("full", "masking"))
    assert list(result["total"]) == ["steps", "full", "masking"]
    assert result["compaction"] is None and result["cache_price"] == 0.1
    assert not (tmp_path / ".veil").exists()
    text = render_table(result)
    assert "masking" in text and "cached" in text
    assert "compaction" not in text.split("steps in", 1)[1].splitlines()[0]  # no veil, no mode
    # the footer says what decided veil's compaction (a bare "compaction settings" read as a
    # setting's name to a new user)
    assert "veil's compaction: as settings say" in render_table(
        {**result, "compaction": "settings"}
    )
    assert "veil's compaction: none" in render_table({**result, "compaction": "none"})
    assert parse_policies("recency, veil") == ("veil", "recency")
    with pytest.raises(BadRequest, match="unknown policy 'vail'"):
        parse_policies("vail,full")


# --- the command line --------------------------------------------------------------------------


def _write_traj(folder: Path, steps: int = 14) -> Path:
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in calc/ops_core.py"},
    ]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": f"THOUGHT: look at part {i}\n\n```bash\ncat f_{i}.py\n```",
            }
        )
        messages.append(
            {
                "role": "user",
                "content": f"<returncode>0</returncode>\n<output>\ndef fn_{i}(): return {1000 + i}\n"
                + "x = 1\n" * 30
                + "</output>",
            }
        )
    path = folder / "tiny.traj.json"
    path.write_text(json.dumps({"messages": messages}))
    return path


def _veil(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(cwd), "replay", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def test_cli_plot_writes_a_png_and_per_step_prints_json(tmp_path):
    pytest.importorskip("matplotlib")
    path = _write_traj(tmp_path)
    png = tmp_path / "cache.png"
    proc = _veil(
        str(path), "--budget", "600", "--plot", str(png), "--cache-price", "0.2", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000  # panels drawn, not an empty canvas
    assert "recency-hysteresis" in proc.stdout and f"plot written to {png}" in proc.stdout
    assert "masking-budget" in proc.stdout

    proc = _veil(
        str(path),
        "--budget",
        "600",
        "--per-step",
        "--policies",
        "masking-budget,full,veil",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    entry = result["files"][0]
    assert list(entry)[3:6] == ["veil", "full", "masking-budget"]
    assert len(entry["veil"]["per_step"]) == len(entry["full"]["per_step"]) == 14
    assert len(entry["masking-budget"]["per_step"]) == 14
    for name in ("veil", "masking-budget"):
        assert entry[name]["over_budget_steps"] == 0
        assert entry[name]["peak_prompt_tokens"] <= 600
    assert entry["full"]["peak_prompt_tokens"] > 600  # the budget does bind here


def test_cli_bad_policy_and_price_are_clean_errors(tmp_path):
    path = _write_traj(tmp_path, steps=2)
    proc = _veil(str(path), "--policies", "nope", cwd=tmp_path)
    assert proc.returncode == 1 and "unknown policy 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _veil(str(path), "--cache-price", "2", cwd=tmp_path)
    assert proc.returncode == 2 and "--cache-price" in proc.stderr


def test_cli_skips_a_recording_with_no_step_and_says_so(tmp_path):
    """A folder of recordings often holds one whose agent stopped before its first message: the
    run goes on over the others, names the skipped file on stderr and in the JSON. A run where
    every file is skipped says so and succeeds, as the README says ("skipped"; issue 30)."""
    good = _write_traj(tmp_path, steps=3)
    empty = tmp_path / "stopped.traj.json"
    empty.write_text(json.dumps({"messages": [{"role": "system", "content": "s"}]}))
    proc = _veil(str(good), str(empty), "--json", "--policies", "full,masking", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert [entry["file"] for entry in result["files"]] == [str(good)]
    assert result["files"][0]["steps"] == result["total"]["steps"] == 3
    assert len(result["skipped"]) == 1 and result["skipped"][0]["file"] == str(empty)
    assert "holds no recorded assistant message" in result["skipped"][0]["reason"]
    assert f"veil replay: skipped {empty}" in proc.stderr

    proc = _veil(str(empty), "--policies", "full", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"veil replay: skipped {empty}" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout.strip() == "nothing to replay: 1 file(s) skipped, none holds a step"
    proc = _veil(str(empty), "--json", cwd=tmp_path)  # veil's policy too: no session opened
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["files"] == [] and result["total"]["steps"] == 0
    assert [entry["file"] for entry in result["skipped"]] == [str(empty)]
