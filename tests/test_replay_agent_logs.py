"""``veil replay``'s readers of agents' own session logs (issue 31): Claude Code transcripts,
Codex rollouts, pi sessions, OpenHands V1 event folders and SWE-agent's ``history``, on the
fixtures of ``tests/data/agent_logs`` (see its README: logs the real agents wrote, and
hand-written ones that follow the formats' sources).

For the recorded logs, expected values are computed here from the raw records with the
simplest rule that holds for them (no rewind, no compaction); for the hand-written ones they
were worked out by hand from the file, line by line, and are spelled out in each test."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from veil.core.errors import BadRequest
from veil.default_plugins.replay.formats import EmptyTrajectory, load_trajectory
from veil.default_plugins.replay.sessions import (
    claude_project_folder,
    find_sessions,
    pi_project_folder,
)

LOGS = Path(__file__).parent / "data" / "agent_logs"
CLAUDE = LOGS / "claude-code" / "ee9c8b84-d5a6-4f4c-8e1e-f48608d25cd2.jsonl"
CLAUDE_SUB = (
    LOGS
    / "claude-code"
    / "ee9c8b84-d5a6-4f4c-8e1e-f48608d25cd2"
    / "subagents"
    / "agent-a4f92da391ef166bb.jsonl"
)
CLAUDE_BRANCHED = LOGS / "claude-code" / "branched.jsonl"
CODEX = next((LOGS / "codex" / "2026").glob("**/rollout-*.jsonl"))
CODEX_OLD = next((LOGS / "codex" / "2025").glob("**/rollout-*.jsonl"))
PI = next((LOGS / "pi").glob("2026-*.jsonl"))
PI_V1 = next((LOGS / "pi").glob("*_pi-v1-session.jsonl"))
PI_V2 = next((LOGS / "pi").glob("*_pi-v2-session.jsonl"))
OPENHANDS_V1 = LOGS / "openhands-v1" / "events"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if "text" in part)


# --- Claude Code -------------------------------------------------------------------------------


def test_claude_code_recorded_session_one_step_per_response_with_parallel_results():
    records = _lines(CLAUDE)
    traj = load_trajectory(CLAUDE)
    assert traj.format == "claude-code"
    assistants = [r for r in records if r["type"] == "assistant"]
    # Claude Code writes one record per content block; a response is one message.id.
    responses = list(dict.fromkeys(r["message"]["id"] for r in assistants))
    assert len(traj.steps) == len(responses) == 5
    users = [r for r in records if r["type"] == "user"]
    assert traj.task == users[0]["message"]["content"]
    assert traj.system == ""  # Claude Code does not write its system prompt to the transcript
    results = {
        b["tool_use_id"]: _text(b["content"]) if isinstance(b["content"], list) else b["content"]
        for r in users[1:]
        for b in r["message"]["content"]
    }
    # The parallel batch (Bash + Write): one result hangs off each record of the response.
    bash, write = (
        b for r in assistants for b in r["message"]["content"] if r["message"]["id"] == responses[1]
    )
    assert traj.steps[1].observation == f"{results[bash['id']]}\n{results[write['id']]}"
    assert traj.steps[1].action.startswith(bash["input"]["command"] + "\nWrite\n")
    assert traj.steps[0].assistant.startswith("Let me read calc.py.\n\nRead\nfile_path: ")
    assert traj.steps[-1].observation is None
    # usage as logged: input + cache creation + cache read of each response
    usage = {r["message"]["id"]: r["message"]["usage"] for r in assistants}
    assert [s.recorded_prompt_tokens for s in traj.steps] == [
        usage[m]["input_tokens"]
        + usage[m]["cache_creation_input_tokens"]
        + usage[m]["cache_read_input_tokens"]
        for m in responses
    ]
    other = Counter(r["type"] for r in records if r["type"] not in ("user", "assistant"))
    assert (
        traj.records.skipped
        == dict(other)
        == {
            "queue-operation": 2,
            "attachment": 2,
            "last-prompt": 1,
        }
    )
    assert traj.records.unknown == {}
    assert traj.records.calls_without_result == traj.records.results_without_call == []


def test_claude_code_sub_agent_transcript_is_read_from_its_sidechain():
    records = _lines(CLAUDE_SUB)
    assert all(r.get("isSidechain") for r in records if "uuid" in r)
    traj = load_trajectory(CLAUDE_SUB)
    responses = {r["message"]["id"] for r in records if r["type"] == "assistant"}
    assert len(traj.steps) == len(responses) == 5
    assert traj.task == "Read calc.py and report what add returns."  # the Agent call's prompt


def test_claude_code_rewind_compaction_sidechain_and_unpaired_calls():
    """branched.jsonl, by hand: u1 a1 a2 r1 | abandoned a3 r2 | u2 (rewound onto r1) | s1 a
    sidechain | a4 a5 (one response, parallel) r3 r4 | cb boundary, cs its summary | a6 (t5,
    never answered) r5 (answers t9, unknown) | a7 | a8 an API error Claude Code wrote itself |
    a half-written line."""
    traj = load_trajectory(CLAUDE_BRANCHED)
    assert traj.task == "Fix add in calc.py"
    assert [s.action for s in traj.steps] == [
        "cat calc.py",
        "pytest -q\nRead\nfile_path: tests/test_calc.py",
        "git diff",
        "",
    ]
    assert traj.steps[0].assistant == "Reading.\n\ncat calc.py"
    # the prompt typed after the rewind is what the model read next
    assert traj.steps[0].observation == (
        "def add(a, b):\n    return a - b\nActually, run the tests first."
    )
    # r3 hangs off a4, r4 off a5: both answer the one response
    assert traj.steps[1].observation == "1 failed\ndef test_add():\n    assert add(1, 2) == 3"
    assert traj.steps[2].observation == "orphan output"  # t9's result: shown, reported
    assert traj.steps[3].assistant == "Tests fail because add subtracts."
    assert "edited" not in "".join(s.observation or "" for s in traj.steps)  # abandoned branch
    assert [s.recorded_prompt_tokens for s in traj.steps] == [100 + 5 + 20, 10, 10, 10]
    assert traj.records.compactions == [2]
    assert traj.records.calls_without_result == ["t5"]
    assert traj.records.results_without_call == ["t9"]
    assert traj.records.skipped == {
        "summary": 1,
        "progress": 1,
        "other branch": 2,
        "sidechain": 1,
        "compact summary": 1,
        "api-request": 1,
        "future-thing": 1,
        "synthetic assistant message": 1,  # a8, an API error: the leaf, but not a response
        "line not JSON": 1,
    }
    assert traj.records.unknown == {"future-thing": 1, "line not JSON": 1}


# --- Codex -------------------------------------------------------------------------------------


def test_codex_recorded_rollout_steps_end_with_each_response():
    records = _lines(CODEX)
    traj = load_trajectory(CODEX)
    assert traj.format == "codex"
    usage_lines = [r for r in records if r["type"] == "token_usage_record"]
    assert len(traj.steps) == len(usage_lines) == 3  # Codex 0.171 logs one per response
    assert [s.recorded_prompt_tokens for s in traj.steps] == [
        r["payload"]["usage"]["input_tokens"] for r in usage_lines
    ]
    items = [r["payload"] for r in records if r["type"] == "response_item"]
    meta = records[0]["payload"]
    developer = [_text(i["content"]) for i in items if i.get("role") == "developer"]
    assert traj.system == "\n\n".join([meta["base_instructions"]["text"], *developer])
    users = [_text(i["content"]) for i in items if i.get("role") == "user"]
    assert traj.task == "\n\n".join(users)
    assert traj.task.endswith("The add function in calc.py is wrong. Fix it.")
    outputs = {i["call_id"]: i["output"] for i in items if i["type"].endswith("_output")}
    calls = [i for i in items if i["type"] in ("function_call", "custom_tool_call")]
    assert traj.steps[0].action == json.loads(calls[0]["arguments"])["cmd"]
    # the second response: an exec_command and a custom apply_patch call, answered in order
    assert traj.steps[1].action == (
        json.loads(calls[1]["arguments"])["cmd"] + "\n" + calls[2]["input"]
    )
    assert traj.steps[1].observation == (
        f"{outputs[calls[1]['call_id']]}\n{outputs[calls[2]['call_id']]}"
    )
    assert (
        traj.steps[2].assistant == "Fixed add() in calc.py." and traj.steps[2].observation is None
    )
    kinds = Counter(
        r["type"] for r in records if r["type"] not in ("session_meta", "response_item")
    )
    assert traj.records.skipped == dict(kinds)
    assert traj.records.unknown == {}
    assert traj.records.compactions == []


def test_codex_older_rollout_without_usage_compactions_and_unpaired_calls():
    """The hand-written rollout, by hand: no usage lines, so a step ends at a tool output or a
    user message; c4 is never answered, c9 answers nothing; `compacted` then a remote
    `compaction` item come before steps 2 and 3."""
    traj = load_trajectory(CODEX_OLD)
    assert traj.system == "You are Codex.\n\nSandbox: workspace-write"
    assert traj.task == "Fix the failing test"
    assert [s.action for s in traj.steps] == [
        "pytest -q",  # local_shell_call: the script of bash -lc
        "sed -i 's/a - b/a + b/' calc.py\n"  # shell's argv, quoted for a shell
        "*** Begin Patch\n*** Update File: NOTES.md\n+fixed add\n*** End Patch\n",
        "git status",
        "",
    ]
    assert [s.observation for s in traj.steps] == ["1 failed", "ok\nDone!", "stray\nthanks", None]
    assert traj.steps[2].assistant == "Fixed it.\n\ngit status"
    assert traj.records.compactions == [2, 3]
    assert traj.records.calls_without_result == ["c4"]
    assert traj.records.results_without_call == ["c9"]
    assert traj.records.skipped == {
        "turn_context": 1,
        "response_item future_item": 1,
        "something_new": 1,
        "event_msg": 1,
    }
    assert traj.records.unknown == {"response_item future_item": 1, "something_new": 1}


# --- pi ----------------------------------------------------------------------------------------


def test_pi_recorded_session_one_step_per_assistant_message():
    records = _lines(PI)
    traj = load_trajectory(PI)
    assert traj.format == "pi" and records[0]["version"] == 3
    messages = [r["message"] for r in records if r["type"] == "message"]
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(traj.steps) == len(assistants) == 4
    assert traj.task == _text(messages[0]["content"])
    results = [m for m in messages if m["role"] == "toolResult"]
    assert traj.steps[1].observation == "\n".join(_text(r["content"]) for r in results[1:3])
    assert traj.steps[1].action.startswith("ls -la && grep -n return calc.py\nwrite\n")
    assert [s.recorded_prompt_tokens for s in traj.steps] == [
        m["usage"]["input"] + m["usage"]["cacheRead"] + m["usage"]["cacheWrite"] for m in assistants
    ]
    assert [s.timestamp for s in traj.steps] == [m["timestamp"] / 1000 for m in assistants]
    assert traj.records.skipped == {"model_change": 1, "thinking_level_change": 1}


def test_pi_version_1_is_read_in_file_order():
    traj = load_trajectory(PI_V1)
    assert traj.task == "List the files"
    assert [(s.action, s.observation) for s in traj.steps] == [
        ("ls", "a.py\nb.py"),
        ("", None),
    ]
    assert traj.records.compactions == [1]
    assert traj.steps[0].recorded_prompt_tokens == 50 + 10


def test_pi_version_2_replays_the_branch_of_the_last_entry():
    """By hand: e5/e6 are the abandoned branch; e7 (branch summary), e9 (a user's `!pytest`)
    and e10 (an extension's message) are what the model read after e4; e8 failed (pi leaves it
    out); e11 compacts; c3 is never answered and c9 answers nothing."""
    traj = load_trajectory(PI_V2)
    assert traj.task == "Fix calc"
    assert [s.action for s in traj.steps] == ["read\npath: calc.py", "git diff", ""]
    assert traj.steps[0].assistant == "Looking\n\nread\npath: calc.py"
    assert traj.steps[0].observation == (
        "def add(a, b):\n    return a - b\n"
        "The following is a summary of a branch that this conversation came back from:\n\n"
        "<summary>\nTried editing; reverted.</summary>\n"
        "Ran `pytest`\n```\n1 failed\n```\n\nCommand exited with code 1\n"
        "lint ok"
    )
    assert traj.steps[1].observation == "stray"
    assert traj.steps[0].recorded_prompt_tokens == 150
    assert traj.records.compactions == [1]
    assert traj.records.calls_without_result == ["c3"]
    assert traj.records.results_without_call == ["c9"]
    assert traj.records.skipped == {
        "model_change": 1,
        "other branch": 2,
        "assistant (error)": 1,
        "label": 1,
        "unknown_entry_type": 1,
    }
    assert traj.records.unknown == {"unknown_entry_type": 1}


# --- OpenHands V1 and SWE-agent's history -----------------------------------------------------


def test_openhands_v1_events_folder_real_conversation():
    events = [json.loads(p.read_text()) for p in sorted(OPENHANDS_V1.glob("event-*.json"))]
    for folder in (OPENHANDS_V1, OPENHANDS_V1.parent):  # the events folder or the one above
        traj = load_trajectory(folder)
        assert traj.format == "openhands-v1"
        assert traj.system == events[0]["system_prompt"]["text"]
        assert traj.task == events[1]["llm_message"]["content"][0]["text"]
        # two tool calls (terminal, finish), then the answer to the user's second message
        assert [s.action for s in traj.steps] == [
            "pwd > tool_output.txt",
            "finish\nmessage: The current directory has been written to tool_output.txt.\n"
            "summary: Current directory saved to tool_output.txt",
            "",
        ]
        suffix = events[3]["observation"]["metadata"]["suffix"]
        assert traj.steps[0].observation == suffix  # empty output, the terminal's suffix
        assert traj.steps[1].observation == (
            "The current directory has been written to tool_output.txt.\n"
            + events[6]["llm_message"]["content"][0]["text"]
        )
        assert traj.steps[2].assistant == events[7]["llm_message"]["content"][0]["text"]
        assert traj.records.skipped == {}


def test_openhands_v1_parallel_actions_and_condensation(tmp_path):
    events_dir = tmp_path / "conv" / "events"
    events_dir.mkdir(parents=True)

    def call(cid: str, cmd: str) -> dict:
        return {"id": cid, "name": "terminal", "arguments": json.dumps({"command": cmd})}

    events = [
        {
            "kind": "MessageEvent",
            "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        },
        {
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [{"type": "text", "text": "two at once"}],
            "tool_call": call("c1", "ls"),
            "tool_name": "terminal",
            "tool_call_id": "c1",
            "llm_response_id": "r1",
        },
        {
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [],
            "tool_call": call("c2", "pwd"),
            "tool_name": "terminal",
            "tool_call_id": "c2",
            "llm_response_id": "r1",
        },
        {
            "kind": "ObservationEvent",
            "tool_call_id": "c1",
            "tool_name": "terminal",
            "observation": {"content": [{"type": "text", "text": "a.py"}]},
        },
        {"kind": "AgentErrorEvent", "tool_call_id": "c2", "tool_name": "terminal", "error": "boom"},
        {
            "kind": "Condensation",
            "forgotten_event_ids": [],
            "summary": "s",
            "llm_response_id": "r2",
        },
        {"kind": "ConversationStateUpdateEvent", "key": "x", "value": 1},
        {
            "kind": "ActionEvent",
            "source": "agent",
            "thought": [],
            "tool_call": call("c3", "git diff"),
            "tool_name": "terminal",
            "tool_call_id": "c3",
            "llm_response_id": "r3",
        },
        {
            "kind": "UserRejectObservation",
            "tool_call_id": "c3",
            "tool_name": "terminal",
            "rejection_reason": "no",
        },
        {"kind": "BrandNewEvent"},
    ]
    for k, event in enumerate(events):
        (events_dir / f"event-{k:05d}-{k:08x}-0000-0000-0000-000000000000.json").write_text(
            json.dumps(event)
        )
    traj = load_trajectory(tmp_path / "conv")
    assert [s.assistant for s in traj.steps] == ["two at once\n\nls\npwd", "git diff"]
    assert [s.observation for s in traj.steps] == ["a.py\nboom", "Action rejected: no"]
    assert traj.records.compactions == [1]
    assert traj.records.skipped == {"ConversationStateUpdateEvent": 1, "BrandNewEvent": 1}
    assert traj.records.unknown == {"BrandNewEvent": 1}


def test_swe_agent_history_only_is_read_from_its_tool_calls(tmp_path):
    history = [
        {"role": "system", "content": "You are SWE-agent."},
        {"role": "user", "content": "DEMO", "is_demo": True},
        {"role": "user", "content": "Fix issue 7"},
        {
            "role": "assistant",
            "content": "Look first.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "submit", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "content": "OBSERVATION:\nsetup.py", "tool_call_ids": ["call_a"]},
        {"role": "tool", "content": "stray", "tool_call_ids": ["call_z"]},
        {"role": "assistant", "content": "Done."},
    ]
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"history": history, "info": {}}))
    traj = load_trajectory(path)
    assert traj.format == "swe-agent"
    assert traj.system == "You are SWE-agent.\n\nDEMO"
    assert traj.task == "Fix issue 7"
    assert [s.assistant for s in traj.steps] == ["Look first.\n\nls\nsubmit", "Done."]
    assert traj.steps[0].observation == "OBSERVATION:\nsetup.py\nstray"
    assert traj.records.calls_without_result == ["call_b"]
    assert traj.records.results_without_call == ["call_z"]


def test_swe_agent_trajectory_keeps_its_steps_and_reports_the_history_pairs():
    path = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories"
    path = path / "swe-agent" / "sweagent_gpt4_testrepo-1c2844.traj"
    if not path.exists():
        pytest.skip(f"reference data not present at {path}")
    raw = json.loads(path.read_text())
    traj = load_trajectory(path)
    assert len(traj.steps) == len(raw["trajectory"])
    calls = [c["id"] for m in raw["history"] for c in m.get("tool_calls") or []]
    answered = {i for m in raw["history"] for i in m.get("tool_call_ids") or []}
    assert traj.records.calls_without_result == [c for c in calls if c not in answered]
    assert traj.records.results_without_call == []


# --- detection and errors ----------------------------------------------------------------------


def test_a_log_in_no_known_format_is_a_clear_error_naming_the_file_and_formats(tmp_path):
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"kind": "note", "text": "a"}\n{"kind": "note", "text": "b"}\n')
    with pytest.raises(BadRequest) as err:
        load_trajectory(odd)
    message = err.value.message
    assert message.startswith(f"{odd}: not a recorded trajectory in a known format; tried: ")
    for name in ("mini-swe-agent", "SWE-agent", "OpenHands", "Claude Code", "Codex", "pi"):
        assert name in message
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\nnor this\n")
    with pytest.raises(BadRequest, match=r"garbage.jsonl: not valid JSON or JSON Lines \(line 1"):
        load_trajectory(garbage)
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(BadRequest, match="is a directory and not an OpenHands V1 conversation"):
        load_trajectory(folder)


def test_a_log_without_a_model_response_is_an_empty_trajectory(tmp_path):
    only_header = tmp_path / "s.jsonl"
    only_header.write_text(PI.read_text().splitlines()[0] + "\n")
    with pytest.raises(EmptyTrajectory, match="pi recording holds no recorded assistant message"):
        load_trajectory(only_header)


def test_format_is_taken_from_the_content_not_the_name(tmp_path):
    for source, fmt in ((CLAUDE, "claude-code"), (CODEX, "codex"), (PI, "pi")):
        renamed = tmp_path / f"renamed-{fmt}.json"
        shutil.copy(source, renamed)
        assert load_trajectory(renamed).format == fmt


# --- --from: where each agent keeps a project's sessions ---------------------------------------


def test_project_folder_names_follow_the_agents(tmp_path):
    assert claude_project_folder("/home/me/my_app.v2") == "-home-me-my-app-v2"
    assert pi_project_folder("/home/me/my_app.v2") == "--home-me-my_app.v2--"
    long = "/" + "x" * 250
    # Claude Code cuts at 200 characters and appends base 36 of abs(Java hashCode(path)):
    # computed by hand here with the same recurrence, h = 31 h + c (mod 2^32, signed).
    h = 0
    for ch in long:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = abs(h - (1 << 32) if h >= 1 << 31 else h)
    digits = ""
    while h:
        h, r = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
    assert claude_project_folder(long) == "-" + "x" * 199 + "-" + digits


def test_find_sessions_looks_where_each_agent_keeps_them(tmp_path):
    project = (tmp_path / "proj").resolve()
    project.mkdir()
    home = tmp_path / "home"
    claude = home / ".claude" / "projects" / claude_project_folder(str(project))
    shutil.copytree(LOGS / "claude-code", claude)
    pi = home / ".pi" / "agent" / "sessions" / pi_project_folder(str(project))
    shutil.copytree(LOGS / "pi", pi)
    codex = home / ".codex" / "sessions"
    shutil.copytree(LOGS / "codex", codex)
    # one rollout of this project, one of another
    ours = next(codex.glob("2026/**/*.jsonl"))
    lines = ours.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["payload"]["cwd"] = str(project)
    ours.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    env = {"HOME": str(home)}

    found = find_sessions("claude-code", project, env)
    assert [p.name for p in found] == [
        "branched.jsonl",
        CLAUDE.name,
        CLAUDE_SUB.name,  # a sub-agent's transcript is a session too
    ]
    assert find_sessions("codex", project, env) == [ours]
    assert [p.name for p in find_sessions("pi", project, env)] == sorted(
        p.name for p in (LOGS / "pi").glob("*.jsonl")
    )
    # the variables the agents read move the folders
    moved = tmp_path / "claude-config"
    shutil.copytree(home / ".claude", moved)
    shutil.rmtree(home / ".claude")
    assert len(find_sessions("claude-code", project, {**env, "CLAUDE_CONFIG_DIR": str(moved)})) == 3
    with pytest.raises(BadRequest, match=r"--from claude-code: no session of .* found in "):
        find_sessions("claude-code", project, env)
    with pytest.raises(BadRequest, match="unknown agent 'aider'"):
        find_sessions("aider", project, env)
