"""veil's memory layer inside someone else's agent loop (runnable: python examples/harness_example.py).

The "model" here is a tiny rule-based function so the example runs offline and deterministically;
swap in any chat-completions call. The loop owns its tools (here: one that prints a big log) and
asks veil what to send before every model call: older tool output leaves the prompt as pointer
stubs once the budget is tight, and the model can follow a pointer back with veil_hydrate.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from veil.harness import VeilHarness


def fake_model(messages: list[dict], step: int) -> dict:
    """Calls the log tool four times, then hydrates the first result, then answers."""
    if step < 4:
        return {
            "role": "assistant",
            "content": f"Reading log part {step}.",
            "tool_calls": [
                {
                    "id": f"c{step}",
                    "type": "function",
                    "function": {"name": "read_log", "arguments": json.dumps({"part": step})},
                }
            ],
        }
    if step == 4:
        stub = next(
            m["content"]
            for m in messages
            if m["role"] == "tool" and m["content"].startswith("[evicted")
        )
        pointer = stub.rstrip("]").rsplit(" ", 1)[1]  # "[evicted 812 tokens #3]" -> "#3"
        return {
            "role": "assistant",
            "content": "Loading the first part back.",
            "tool_calls": [
                {
                    "id": "c4",
                    "type": "function",
                    "function": {
                        "name": "veil_hydrate",
                        "arguments": json.dumps({"pointer": pointer}),
                    },
                }
            ],
        }
    return {"role": "assistant", "content": "The error is in part 0: KeyError 'port'."}


def read_log(part: int) -> str:
    """The host's own tool: 120 lines of a worker log (part 0 holds the error)."""
    line = f"[part {part}] worker started; " + ("KeyError: 'port'" if part == 0 else "ok") + "\n"
    return line * 120


def main() -> None:
    """Run the foreign loop for up to ten model calls and print what veil sent each time."""
    project = Path(tempfile.mkdtemp(prefix="veil-harness-"))
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"context": {"budgetTokens": 3000}})
    )
    harness = VeilHarness(project / ".veil" / "context.db", context_window=4000)
    hooks = harness.get_hooks()
    hooks["on_user_message"]("Find the error in the worker log.")
    for step in range(10):
        messages = hooks["build_prompt"]()
        tokens = sum(len(m.get("content") or "") for m in messages) // 4
        stubs = sum(1 for m in messages if (m.get("content") or "").startswith("[evicted"))
        print(f"step {step}: {len(messages)} messages, ~{tokens} tokens, {stubs} pointer stub(s)")
        reply = fake_model(messages, step)
        hooks["on_assistant_message"](reply)
        if not reply.get("tool_calls"):
            print("answer:", reply["content"])
            break
        for call in reply["tool_calls"]:
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            hooks["before_tool_call"](name, args, call["id"])
            if hooks["is_memory_tool"](name):
                output = hooks["call_tool"](name, args, call["id"])
            else:
                output = read_log(args["part"])
            hooks["after_tool_call"](name, args, call["id"], output)
    print(hooks["manifest"]().splitlines()[1])
    harness.close()


if __name__ == "__main__":
    sys.exit(main())
