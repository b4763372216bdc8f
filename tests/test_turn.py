"""The turn driver (veil/core/turn.py): the only caller of capture / after_iteration / turn_end,
and the harness recording turns with it as veil's loop does (issue 20)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from veil.core import turn
from veil.harness import VeilHarness
from veil.hookspecs import hookimpl

ROOT = Path(__file__).resolve().parents[1]
DRIVEN_HOOKS = {"capture", "after_iteration", "turn_end"}


class TurnHooks:
    """Records ``after_iteration`` and ``turn_end`` as they are called, with the number of
    messages the session held then."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, int]] = []

    @hookimpl
    def after_iteration(self, session: Any, iteration: int) -> None:
        self.calls.append(("after_iteration", iteration, len(session.messages)))

    @hookimpl
    def turn_end(self, session: Any, final_message: Any) -> None:
        content = final_message.get("content") if final_message else None
        self.calls.append(("turn_end", content, len(session.messages)))


def call(call_id: str, name: str = "ls") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def harness_with(tmp_path: Path, hooks: TurnHooks) -> VeilHarness:
    harness = VeilHarness(tmp_path / ".veil" / "context.db", use_entry_points=False)
    harness.veil.pm.register(hooks, name="turn-hooks")
    return harness


def test_only_the_turn_driver_fires_the_turn_hooks():
    """No module of veil/ or plugins/ (tests aside) calls ``<pm>.hook.capture``,
    ``.hook.after_iteration`` or ``.hook.turn_end`` except veil/core/turn.py."""
    offenders = []
    sources = [*(ROOT / "veil").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]
    for path in sources:
        relative = path.relative_to(ROOT)
        if "tests" in relative.parts or relative == Path("veil/core/turn.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in DRIVEN_HOOKS
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "hook"
            ):
                offenders.append(f"{relative}:{node.lineno} hook.{node.attr}")
    assert len(sources) > 100  # the walk saw the tree
    assert offenders == []


def test_the_guard_sees_a_hook_call():
    """The pattern the guard looks for matches the way the hooks were called before."""
    tree = ast.parse("veil.pm.hook.after_iteration(session=s, iteration=1)")
    found = [
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "hook"
    ]
    assert found == ["after_iteration"]


def test_harness_ends_an_iteration_once_per_tool_batch_and_the_turn_at_the_final_answer(
    tmp_path, default_permissions
):
    hooks = TurnHooks()
    harness = harness_with(tmp_path, hooks)
    harness.on_user_message("List both folders")  # message 0
    harness.on_assistant_message(
        {"role": "assistant", "content": "Listing.", "tool_calls": [call("a"), call("b")]}
    )  # 1, step 1
    harness.before_tool_call("ls", {}, "a")
    harness.after_tool_call("ls", {}, "a", "x.py")  # 2
    assert hooks.calls == []  # one result of two: the batch is not over
    harness.before_tool_call("ls", {}, "b")
    harness.after_tool_call("ls", {}, "b", "y.py")  # 3: the batch's last result
    assert hooks.calls == [("after_iteration", 1, 4)]
    # a refused call's recorded result closes its batch too
    harness.on_assistant_message({"content": None, "tool_calls": [call("c", "bash")]})  # 4
    decision = harness.check_permission("bash", {"command": "rm -rf /"}, "c")
    assert not decision.allowed  # nobody to ask: refused
    harness.deny_tool_call("bash", {"command": "rm -rf /"}, "c", decision)  # 5
    assert hooks.calls[1:] == [("after_iteration", 2, 6)]
    harness.on_assistant_message({"role": "assistant", "content": "Two files."})  # 6, final
    assert hooks.calls[2:] == [("turn_end", "Two files.", 7)]
    harness.close()


def test_completes_batch_counts_each_call_once_and_only_the_newest_reply(tmp_path):
    harness = VeilHarness(tmp_path / ".veil" / "context.db", use_entry_points=False)
    session = harness.session
    session.append({"role": "user", "content": "go"})  # 0
    session.append({"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]})
    first = session.append({"role": "tool", "tool_call_id": "a", "content": "1"})  # 2
    again = session.append({"role": "tool", "tool_call_id": "a", "content": "1 again"})  # 3
    last = session.append({"role": "tool", "tool_call_id": "b", "content": "2"})  # 4
    late = session.append({"role": "tool", "tool_call_id": "b", "content": "2 again"})  # 5
    stray = session.append({"role": "tool", "tool_call_id": "zz", "content": "?"})  # 6
    answer = session.append({"role": "assistant", "content": "done"})  # 7
    assert [turn.completes_batch(session, i) for i in (first, again, last, late, stray)] == [
        False,
        False,
        True,
        False,
        False,
    ]
    assert not turn.completes_batch(session, answer)  # not a tool message
    assert not turn.completes_batch(session, 0) and not turn.completes_batch(session, 99)
    harness.close()
