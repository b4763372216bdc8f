"""Text that UTF-8 cannot hold at the harness boundary (issue 31 item 5): a lone surrogate in a
tool result, a user message, a reply or tool-call arguments is stored with U+FFFD in its place,
as veil's own loop and CLI do, instead of raising ``UnicodeEncodeError`` to the host.

A host gets such text from a tool that decoded bytes with ``surrogateescape`` (Python's
``os.fsdecode`` of a file name, a subprocess read with ``errors="surrogateescape"``) or from a
JSON ``"\\ud800"`` escape."""

from __future__ import annotations

import json
import os

from veil.core.store import Store
from veil.harness import VeilHarness

LONE = "\udcff"  # what os.fsdecode gives for the byte 0xff
REPLACEMENT = "\ufffd"


def _harness(tmp_path):
    return VeilHarness(
        tmp_path / ".veil" / "context.db", context_window=4000, use_entry_points=False
    )


def _call(call_id: str, name: str = "ls", arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_lone_surrogate_in_a_tool_result_is_stored_as_a_replacement(tmp_path):
    name = os.fsdecode(b"report-\xff.txt")  # a real undecodable file name
    assert LONE in name
    harness = _harness(tmp_path)
    hooks = harness.get_hooks()
    hooks["on_user_message"]("List the reports")
    hooks["on_assistant_message"](
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]}
    )
    hooks["before_tool_call"]("ls", {}, "c1")
    hooks["after_tool_call"]("ls", {}, "c1", f"{name}\nsummary.txt")  # raised UnicodeEncodeError
    messages = hooks["build_prompt"]()
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"report-{REPLACEMENT}.txt\nsummary.txt",
    }
    session_id = harness.session.id
    harness.close()
    # stored as such: a new process reads the same text back
    store = Store(tmp_path / ".veil" / "context.db", write_behind=False)
    try:
        stored = [m["content"] for _, m in store.messages(session_id)]
    finally:
        store.close()
    assert f"report-{REPLACEMENT}.txt\nsummary.txt" in stored


def test_every_hook_takes_unclean_text(tmp_path):
    (tmp_path / ".veil").mkdir()
    settings = {"permissions": {"deny": ["write"]}}
    (tmp_path / ".veil" / "settings.json").write_text(json.dumps(settings))
    harness = _harness(tmp_path)
    hooks = harness.get_hooks()
    hooks["on_user_message"](f"Fix {LONE}")
    arguments = json.dumps({"path": "a\ud800.py"})  # the JSON escape, as a model may send it
    assert "\\ud800" in arguments
    calls = [_call("c1", "read", arguments), _call("c2", "write", arguments)]
    hooks["on_assistant_message"](
        {"role": "assistant", "content": f"Reading {LONE}", "tool_calls": calls}
    )
    args = json.loads(arguments)
    hooks["before_tool_call"]("read", args, "c1")
    hooks["after_tool_call"]("read", args, "c1", f"x = '{LONE}'", outcome=f"ok {LONE}")
    hooks["before_tool_call"]("write", args, "c2")
    decision = hooks["check_permission"]("write", arguments, "c2")
    assert not decision.allowed  # the deny rule
    hooks["deny_tool_call"]("write", args, "c2", decision)
    note = json.dumps({"content": "note \ud800", "kind": "fact"})
    assert hooks["call_tool"]("veil_remember", note, "c3").startswith("remembered as item_")
    tools = [{"type": "function", "function": {"name": f"tool{LONE}", "parameters": {}}}]
    messages = hooks["build_prompt"](tools)
    text = json.dumps(messages, ensure_ascii=False)
    text.encode("utf-8")  # nothing left that UTF-8 cannot hold
    assert f"Fix {REPLACEMENT}" in text and f"Reading {REPLACEMENT}" in text
    assert f"x = '{REPLACEMENT}'" in text
    harness.close()
