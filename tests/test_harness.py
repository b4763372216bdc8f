"""veil as a library: VeilHarness in a foreign loop, and the runnable example."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from veil.harness import VeilHarness

ROOT = Path(__file__).resolve().parents[1]


def test_harness_mirrors_a_foreign_loop_and_pairs_calls(tmp_path):
    harness = VeilHarness(
        tmp_path / ".veil" / "context.db", context_window=4000, use_entry_points=False
    )
    hooks = harness.get_hooks()
    assert {t["function"]["name"] for t in hooks["tools"]} >= {"veil_recall", "veil_hydrate"}
    hooks["on_user_message"]("Count the files")
    hooks["on_assistant_message"](
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {"id": "x1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }
    )
    hooks["before_tool_call"]("ls", {}, "x1")
    hooks["after_tool_call"]("ls", {}, "x1", "a.py\nb.py")
    messages = hooks["build_prompt"]()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[-1] == {"role": "tool", "tool_call_id": "x1", "content": "a.py\nb.py"}
    assert not hooks["is_memory_tool"]("ls") and hooks["is_memory_tool"]("veil_remember")
    out = hooks["call_tool"]("veil_remember", '{"content": "two files", "kind": "fact"}', "x2")
    assert out.startswith("remembered as item_")
    assert hooks["call_tool"]("veil_recall", "{bad", "x3").startswith("veil_recall: invalid JSON")
    harness.close()
    # the store is durable: a new harness on the same path sees the session
    again = VeilHarness(tmp_path / ".veil" / "context.db", use_entry_points=False)
    assert len(again.veil.list_sessions()) == 2
    again.close()


def test_runnable_example_evicts_and_hydrates():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "harness_example.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "pointer stub(s)" in out and "answer: The error is in part 0" in out
    stubbed = [
        line for line in out.splitlines() if line.startswith("step") and " 0 pointer" not in line
    ]
    assert stubbed, out
