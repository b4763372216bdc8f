"""The permission rules' vocabulary is declared by the plugins (issue 33: the core names no
tool): a third-party plugin that declares its tool a command tool gets ``tool(pattern)`` rules
checked when the settings load, and matched against the call's command in the agent loop,
exactly as ``bash(...)`` rules are; without the declaration the same rule is refused at load
time, naming the tools that take a pattern."""

from __future__ import annotations

import json
from typing import Any

import pytest

import veil
from veil.core.safety.permissions import PermissionVocabulary, installed_vocabulary
from veil.core.settings import load_config


class SqlPlugin:
    """A third-party plugin with a ``sql`` tool whose rules match its ``command`` argument."""

    def __init__(self, declares: Any = True) -> None:
        self.declares = declares
        self.ran: list[str] = []

    @veil.hookimpl
    def permission_vocabulary(self) -> Any:
        if self.declares is True:
            return PermissionVocabulary(command_tools=frozenset({"sql"}))
        return self.declares

    @veil.hookimpl
    def register_tools(self) -> list[veil.Tool]:
        def run(ctx: Any, args: dict[str, Any]) -> str:
            self.ran.append(args["command"])
            return "1 row"

        schema = {"type": "object", "properties": {"command": {"type": "string"}}}
        return [veil.Tool("sql", "Run a SQL statement.", schema, run)]


def _settings(project, **permissions) -> None:
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text(json.dumps({"permissions": permissions}))


def _sql(command: str, call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "sql", "arguments": {"command": command}}]}


def test_the_coding_tools_declare_the_vocabulary_the_rules_had():
    # the sets the core spelled before the move, typed out
    known = installed_vocabulary()
    assert known.path_tools == {"read", "write", "edit", "grep", "ls"}
    assert known.command_tools == {"bash"}
    assert known.edit_tools == {"write", "edit"}
    assert known.read_tool == "read"
    assert known.read_covered_tools == {"grep", "ls", "edit"}


def test_a_declared_command_tool_takes_rules_checked_at_load_and_matched_in_the_loop(
    make_veil, veil_project, veil_isolated_env, monkeypatch
):
    monkeypatch.delenv("VEIL_PERMISSIONS__MODE")  # the isolated env allows everything
    project = veil_project
    # the deny rule is the project's (a project may add deny rules); mode deny: only what an
    # allow rule covers runs (allow rules are the user's)
    _settings(project, mode="deny", deny=["sql(drop*)"])
    user = veil_isolated_env / "settings.json"
    user.write_text(json.dumps({"permissions": {"allow": ["sql(select:*)"]}}))
    plugin = SqlPlugin()
    v = make_veil(
        [
            _sql("select 1", "c1"),
            _sql("drop table t", "c2"),
            _sql("update t set a = 1", "c3"),
            "done",
        ],
        plugins=[("sql_plugin", plugin)],
    )
    session = v.new_session()
    assert v.run_turn(session, "query").status == "done"
    assert plugin.ran == ["select 1"]
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert results["c1"] == "1 row"
    assert results["c2"] == (
        "Permission denied: this sql call was not run. sql(drop table t) matches the deny rule "
        "'sql(drop*)' (permissions.deny)."
    )
    assert results["c3"].startswith(
        "Permission denied: this sql call was not run. permissions.mode is deny and no allow "
        'rule covers sql(update t set a = 1); to allow it, add "sql(update:*)"'
    )


def test_an_undeclared_tool_pattern_is_refused_at_load_naming_the_tools_that_take_one(
    veil_isolated_env, veil_project
):
    project = veil_project
    _settings(project, deny=["sql(drop*)"])
    with pytest.raises(veil.ConfigError) as caught:
        load_config(project, plugins=[("sql_plugin", SqlPlugin(declares=None))])
    assert "permissions.deny: 0: 'sql(drop*)': only bash, edit, grep, ls, read, write take a " in (
        caught.value.message
    )
    # declared, the same file loads
    loaded = load_config(project, plugins=[("sql_plugin", SqlPlugin())])
    assert loaded.settings.permissions.deny == ["sql(drop*)"]


def test_a_vocabulary_of_the_wrong_type_stops_loading_naming_the_plugin(
    veil_isolated_env, veil_project
):
    project = veil_project
    with pytest.raises(veil.ConfigError) as caught:
        load_config(project, plugins=[("sql_plugin", SqlPlugin(declares={"command": ["sql"]}))])
    assert caught.value.message.startswith(
        "plugin sql_plugin: permission_vocabulary must return a veil.PermissionVocabulary or "
        "None, got dict."
    )
