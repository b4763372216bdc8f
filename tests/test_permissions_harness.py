"""Permission rules through VeilHarness (issue 21): the host asks veil's rules before running
its own tools; a refused call's result is recorded and stays paired with its call."""

from __future__ import annotations

import json

from veil.core.prompt.assemble import pairing_problems
from veil.harness import VeilHarness


def _harness(project, **kwargs) -> VeilHarness:
    return VeilHarness(
        project / ".veil" / "context.db", context_window=4000, use_entry_points=False, **kwargs
    )


def _assistant_calls(hooks, *calls):
    hooks["on_assistant_message"](
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for call_id, name, args in calls
            ],
        }
    )


def test_without_a_callback_bash_is_refused_and_the_refusal_recorded(project, default_permissions):
    harness = _harness(project)
    hooks = harness.get_hooks()
    hooks["on_user_message"]("clean up")
    args = {"command": "rm -rf build"}
    _assistant_calls(hooks, ("x1", "bash", args))
    hooks["before_tool_call"]("bash", args, "x1")
    decision = hooks["check_permission"]("bash", args, "x1")
    assert not decision.allowed
    assert "nobody could be asked" in decision.reason
    output = hooks["deny_tool_call"]("bash", args, "x1", decision)
    assert output.startswith("Permission denied: this bash call was not run.")
    messages = hooks["build_prompt"]()
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool == {"role": "tool", "tool_call_id": "x1", "content": output}
    assert pairing_problems(harness.session.messages) == []
    harness.close()


def test_reads_are_free_and_rules_of_the_settings_apply(project, default_permissions):
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["read(secrets/*)"]}})
    )
    harness = _harness(project)
    assert harness.check_permission("read", {"path": "src/a.py"}).allowed
    assert harness.check_permission("read", '{"path": "secrets/key.pem"}').verdict == "deny"
    harness.close()


def test_the_hosts_callback_is_asked_and_a_session_answer_is_remembered(
    project, default_permissions
):
    asked = []

    def ask(request):
        asked.append((request.tool, request.subject, request.session_rule, request.tool_call_id))
        return "session"

    harness = _harness(project, ask_permission=ask)
    assert harness.check_permission("bash", {"command": "pytest -q"}, "x1").allowed
    assert harness.check_permission("bash", {"command": "pytest tests/a.py"}, "x2").allowed
    assert asked == [("bash", "pytest -q", "bash(pytest:*)", "x1")]  # the second is covered
    assert harness.session.permission_grants == ["bash(pytest:*)"]
    harness.close()


def test_a_host_tool_of_its_own_is_asked_like_a_plugins(project, default_permissions):
    answers = iter(["deny"])
    harness = _harness(project, ask_permission=lambda request: next(answers))
    decision = harness.check_permission("deploy", {"env": "prod"}, "x1")
    assert decision.verdict == "deny" and "The user refused it" in decision.reason
    harness.close()


def test_a_deny_rule_on_a_memory_tool_holds_in_call_tool(project):
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["veil_remember"]}})
    )
    harness = _harness(project)
    out = harness.call_tool("veil_remember", {"content": "x", "kind": "fact"}, "x1")
    assert out.startswith("Permission denied: this veil_remember call was not run.")
    assert "matches the deny rule 'veil_remember'" in out
    assert harness.call_tool("veil_recall", {"query": "x"}, "x2") == "no stored context matches 'x'"
    harness.close()
