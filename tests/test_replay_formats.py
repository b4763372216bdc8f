"""Readers of recorded trajectories (veil/default_plugins/replay/formats.py) on the real files
and on hand-made ones. Expected counts are computed here from the raw JSON, not by the readers."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from veil.core.errors import BadRequest
from veil.default_plugins.replay.formats import detect_format, load_trajectory

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TRAJ = DATA / "trajectories"


@pytest.fixture(scope="module")
def traj_dir() -> Path:
    if not TRAJ.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{TRAJ} is missing in CI")
        pytest.skip(f"reference data not present at {TRAJ}")
    return TRAJ


def _files(traj_dir: Path, folder: str) -> list[Path]:
    files = sorted((traj_dir / folder).iterdir())
    assert files, f"no files in {traj_dir / folder}"
    return files


# --- real files --------------------------------------------------------------------------------


def test_every_mini_swe_agent_file_parses_with_one_step_per_assistant_message(traj_dir):
    files = _files(traj_dir, "mini-swe-agent")
    assert len(files) == 23  # the data README lists 23 files
    for path in files:
        raw = json.loads(path.read_text())
        messages = raw["messages"]
        assistants = [m for m in messages if m["role"] == "assistant"]
        traj = load_trajectory(path)
        assert traj.format == "mini-swe-agent"
        assert traj.path == str(path)
        assert len(traj.steps) == len(assistants), path.name
        assert [s.index for s in traj.steps] == list(range(len(assistants)))
        # Layout of these files: system, user task, then (assistant, tool)* and a final exit.
        assert traj.system == messages[0]["content"]
        assert traj.task == messages[1]["content"]
        tools = [m["content"] for m in messages if m["role"] == "tool"]
        assert [s.observation for s in traj.steps[:-1]] == tools, path.name
        assert traj.steps[-1].observation is None  # the "exit" message is not an observation
        for step, message in zip(traj.steps, assistants, strict=True):
            command = json.loads(message["tool_calls"][0]["function"]["arguments"])["command"]
            assert step.action == command
            assert command in step.assistant
            assert (message["content"] or "") in step.assistant
            assert step.timestamp == message["extra"]["timestamp"]


def test_every_swe_agent_file_parses_with_one_step_per_trajectory_entry(traj_dir):
    files = _files(traj_dir, "swe-agent")
    assert len(files) == 4
    for path in files:
        raw = json.loads(path.read_text())
        entries = raw["trajectory"]
        traj = load_trajectory(path)
        assert traj.format == "swe-agent"
        assert len(traj.steps) == len(entries), path.name
        first_system = next(m for m in raw["history"] if m["role"] == "system")["content"]
        task = next(m for m in raw["history"] if m["role"] == "user" and not m.get("is_demo"))
        assert traj.system.startswith(first_system)
        assert traj.task == task["content"]
        assert traj.task.startswith("We're currently solving the following issue")
        for step, entry in zip(traj.steps, entries, strict=True):
            assert step.action == entry["action"].strip()
            assert step.action in step.assistant
            assert step.assistant.startswith(entry["response"].rstrip())
            assert step.observation == entry["observation"]
            assert step.timestamp is None  # SWE-agent records no wall-clock time per step
    # The gpt4 runs show a demonstration before the task: it belongs to the fixed preamble.
    demo = load_trajectory(traj_dir / "swe-agent" / "sweagent_gpt4_pydicom-1458.traj")
    assert "--- DEMONSTRATION ---" in demo.system
    assert "--- DEMONSTRATION ---" not in demo.task


def test_openhands_files_give_one_step_per_model_response(traj_dir):
    files = _files(traj_dir, "openhands")
    assert len(files) == 2
    for path in files:
        events = json.loads(path.read_text())
        # Independent count: agent actions that are model calls (these files make one tool call
        # per response, so every such event is its own response).
        agent_actions = [
            e
            for e in events
            if e.get("source") == "agent" and "action" in e and e["action"] != "change_agent_state"
        ]
        traj = load_trajectory(path)
        assert traj.format == "openhands"
        assert len(traj.steps) == len(agent_actions), path.name
    # Counted by hand from the files: ids 7, 9, 11, 13, 15 and ids 3, 5.
    gui = load_trajectory(traj_dir / "openhands" / "openhands_basic_gui_mode.json")
    assert len(gui.steps) == 5
    assert gui.system == ""
    assert gui.task.startswith("I want to create a VueJS app that allows me to:")
    first = gui.steps[0]
    assert first.action == "mkdir -p /workspace/todo-app"
    assert first.assistant.endswith("\n\nmkdir -p /workspace/todo-app")
    # The run observation has empty content, so its message stands in.
    assert first.observation == "Command `mkdir -p /workspace/todo-app` executed with exit code 0."
    expected = datetime(2025, 1, 20, 20, 29, 35, 40676, tzinfo=UTC).timestamp()
    assert first.timestamp == pytest.approx(expected)
    assert gui.steps[1].observation.startswith("--- /workspace/todo-app/index.html")
    assert "path: /workspace/todo-app/index.html" in gui.steps[1].action
    assert gui.steps[4].action == ""  # the closing message ran nothing
    assert gui.steps[4].observation is None
    game = load_trajectory(traj_dir / "openhands" / "openhands_claude35_basic_2048.json")
    assert len(game.steps) == 2
    assert game.task.startswith("Please create a simple 2048 game.")
    assert game.steps[1].action == "finish"


def test_format_is_detected_from_content_not_extension(traj_dir, tmp_path):
    mini = _files(traj_dir, "mini-swe-agent")[0]
    swe = _files(traj_dir, "swe-agent")[-1]
    oh = _files(traj_dir, "openhands")[-1]
    renamed = {
        tmp_path / "looks_like_swe.traj": "mini-swe-agent",
        tmp_path / "looks_like_openhands.json": "swe-agent",
        tmp_path / "looks_like_mini.traj.json": "openhands",
    }
    for (target, fmt), source in zip(renamed.items(), (mini, swe, oh), strict=True):
        shutil.copy(source, target)
        assert load_trajectory(target).format == fmt


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ('{"messages": [', "not valid JSON"),
        ("not json at all", "not valid JSON"),
        ('{"foo": 1}', "not a recorded trajectory"),
        ("[]", "not a recorded trajectory"),
        ("[1, 2, 3]", "not a recorded trajectory"),
        ('"a string"', "not a recorded trajectory"),
        ('{"messages": [{"content": "x"}]}', "messages[0].role"),
        ('{"messages": [{"role": "assistant", "content": 5}]}', "messages[0].content"),
        ('{"messages": [{"role": "system", "content": "s"}]}', "no recorded assistant message"),
        ('{"trajectory": ["oops"]}', "trajectory[0]"),
    ],
)
def test_bad_files_raise_bad_request_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "broken.traj.json"
    path.write_text(content)
    with pytest.raises(BadRequest) as caught:
        load_trajectory(path)
    assert str(path) in caught.value.message
    assert reason in caught.value.message


def test_missing_file_and_directory_raise_bad_request(tmp_path):
    with pytest.raises(BadRequest, match="no such file") as caught:
        load_trajectory(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in caught.value.message
    with pytest.raises(BadRequest, match="is a directory"):
        load_trajectory(tmp_path)


def test_binary_file_raises_bad_request(tmp_path):
    path = tmp_path / "x.traj"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BadRequest, match="not UTF-8"):
        load_trajectory(path)


# --- other shapes of the same formats ----------------------------------------------------------


def test_mini_swe_agent_v1_bash_blocks_and_user_observations(tmp_path):
    data = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task text"},
            {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls -la\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        ]
    }
    path = tmp_path / "old.traj.json"
    path.write_text(json.dumps(data))
    traj = load_trajectory(path)
    assert [s.action for s in traj.steps] == ["ls -la", ""]
    assert traj.steps[0].assistant == "THOUGHT: look\n\n```bash\nls -la\n```"  # already inside
    assert traj.steps[0].observation == "<returncode>0</returncode>\n<output>\na.py\n</output>"
    assert traj.steps[1].assistant == "done"
    assert traj.steps[1].observation is None
    assert traj.steps[0].timestamp is None


def test_openhands_parallel_tool_calls_form_one_step(tmp_path):
    response = {
        "id": "r1",
        "choices": [
            {
                "message": {
                    "content": "Two things at once.",
                    "tool_calls": [
                        {"function": {"name": "execute_bash", "arguments": '{"command": "ls"}'}},
                        {"function": {"name": "execute_bash", "arguments": '{"command": "pwd"}'}},
                    ],
                }
            }
        ],
    }
    meta = {"model_response": response}
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "do it"}},
        {"id": 1, "source": "agent", "action": "run", "args": {}, "tool_call_metadata": meta},
        {"id": 2, "source": "agent", "action": "run", "args": {}, "tool_call_metadata": meta},
        {"id": 3, "source": "agent", "observation": "run", "cause": 1, "content": "a.txt"},
        {"id": 4, "source": "agent", "observation": "run", "cause": 2, "content": "/work"},
        {"id": 5, "source": "agent", "action": "message", "args": {"content": "All done."}},
        {"id": 6, "source": "user", "action": "message", "args": {"content": "thanks"}},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    assert detect_format(events) == "openhands"
    traj = load_trajectory(path)
    assert len(traj.steps) == 2
    assert traj.task == "do it"
    assert traj.steps[0].action == "ls\npwd"
    assert traj.steps[0].assistant == "Two things at once.\n\nls\npwd"
    assert traj.steps[0].observation == "a.txt\n/work"
    assert traj.steps[1].assistant == "All done."
    assert traj.steps[1].observation == "thanks"  # a later user message follows that step
    assert traj.steps[1].timestamp is None


def test_a_replay_gives_the_same_figures_every_time(traj_dir, tmp_path):
    # Item ids appear in the prompt through pointer stubs and their hex digits tokenize to 6-9
    # tokens: with random ids two runs differed by a token here and there, and the eviction
    # passes after that point (and the misses) with them.
    from veil.default_plugins.replay.report import run_replay

    first = sorted((traj_dir / "mini-swe-agent").glob("*.traj.json"))[0]
    runs = [
        run_replay([str(first)], 3000, project_dir=tmp_path, compaction="none", max_steps=40)
        for _ in range(2)
    ]
    assert runs[0]["total"]["veil"]["evictions"] > 0  # stubs are in play
    assert runs[0] == runs[1]
