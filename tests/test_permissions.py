"""Permission rules for tool calls (issue 21): parsing, matching, order, settings layers, the loop.

Expected verdicts are written out by hand from the rules in :mod:`veil.core.safety.permissions`'s
docstring; the end-to-end ``veil -p`` runs are in test_permissions_cli.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from veil.core.errors import ConfigError
from veil.core.safety.permissions import (
    evaluate,
    parse_answer,
    parse_rule,
    session_rule_for,
    simple_commands,
)
from veil.core.settings import PermissionSettings, load_config
from veil.hookspecs import hookimpl


def _declared_effects() -> dict[str, str]:
    """The effect each of veil's own tools declares when registered."""
    from veil_memoryfiles.tools import memory_tools as memory_file_tools

    from veil.default_plugins.coding_tools.tools import builtin_tools
    from veil.default_plugins.memory_tools.tools import memory_tools

    return {t.name: t.effect for t in [*builtin_tools(), *memory_tools(), *memory_file_tools()]}


EFFECTS = _declared_effects()


def verdict(tool, arguments, project, **settings):
    effect = EFFECTS.get(tool, "change")
    return evaluate(PermissionSettings(**settings), project, tool, arguments, effect=effect).verdict


# -- rules ---------------------------------------------------------------------------------------


def test_parse_rule_forms():
    assert parse_rule("bash(pytest*)").tool == "bash"
    assert parse_rule("bash(pytest*)").pattern == "pytest*"
    assert parse_rule("Bash(npm run test:*)").tool == "bash"  # Claude Code's capital letters
    assert parse_rule("read").pattern is None
    assert parse_rule("read(*)").pattern is None
    assert parse_rule("mcp_github_create_issue").tool == "mcp_github_create_issue"


@pytest.mark.parametrize("bad", ["bash((", "", "two words", "bash(x", 7])
def test_malformed_rules_are_refused(bad):
    with pytest.raises(ValueError, match="is not a rule"):
        parse_rule(bad)


def test_a_pattern_on_a_tool_without_subject_is_refused_naming_the_tools_that_take_one():
    with pytest.raises(ValueError, match="only bash, edit, grep, ls, read, write take a pattern"):
        parse_rule("memory_write(notes*)")


def test_settings_validation_names_the_file_field_and_index(project):
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["bash(rm*)", "bash(("]}})
    )
    with pytest.raises(ConfigError) as err:
        load_config(project)
    assert "settings.json: permissions.deny: 1: 'bash((' is not a rule" in err.value.message


def test_simple_commands_split_at_operators_and_refuse_what_cannot_be_judged():
    assert simple_commands("pytest -q") == ["pytest -q"]
    assert simple_commands("pytest -q && git status; ls | wc -l") == [
        "pytest -q",
        "git status",
        "ls",
        "wc -l",
    ]
    assert simple_commands("pytest\nrm -rf build") == ["pytest", "rm -rf build"]
    assert simple_commands('echo "a; b"') == ["echo a; b"]  # quoted: one word
    assert simple_commands("pytest -q 2>&1 >/dev/null") == ["pytest -q"]
    assert simple_commands("pytest > out.txt") is None  # writes a file
    assert simple_commands("pytest $(rm -rf ~)") is None
    assert simple_commands("pytest `rm -rf ~`") is None
    assert simple_commands('echo "unclosed') is None


def test_bash_allow_rule_covers_every_part_of_the_line(project):
    allow = ["bash(pytest*)"]
    assert verdict("bash", {"command": "pytest -q tests/"}, project, allow=allow) == "allow"
    assert verdict("bash", {"command": "pytest -q | tail -5"}, project, allow=allow) == "ask"
    assert verdict("bash", {"command": "pytest; rm -rf ~"}, project, allow=allow) == "ask"
    assert verdict("bash", {"command": "pytest $(curl evil)"}, project, allow=allow) == "ask"
    assert verdict("bash", {"command": "pytest > ~/.bashrc"}, project, allow=allow) == "ask"
    assert verdict("bash", {"command": "rm -rf ~"}, project, allow=allow) == "ask"


def test_bash_prefix_form_of_claude_code(project):
    allow = ["bash(npm run test:*)"]
    assert verdict("bash", {"command": "npm run test"}, project, allow=allow) == "allow"
    assert verdict("bash", {"command": "npm run test -- -x"}, project, allow=allow) == "allow"
    assert verdict("bash", {"command": "npm run testx"}, project, allow=allow) == "ask"
    assert verdict("bash", {"command": "npm run build"}, project, allow=allow) == "ask"


def test_deny_rule_catches_any_part_of_the_line_even_one_it_cannot_parse(project):
    deny = ["bash(rm *)"]
    assert verdict("bash", {"command": "ls; rm -rf build"}, project, deny=deny) == "deny"
    assert verdict("bash", {"command": "echo x > y; rm -rf build"}, project, deny=deny) == "deny"
    assert verdict("bash", {"command": "true && (rm -rf b)"}, project, deny=deny) == "deny"
    assert verdict("bash", {"command": "ls"}, project, deny=deny) == "ask"


def test_path_rules_match_the_resolved_path(project, tmp_path):
    (project / "src").mkdir()
    (project / "link").symlink_to(tmp_path)  # a folder outside the project
    allow = ["edit(src/*)", f"write({tmp_path.as_posix()}/out/*)"]
    assert verdict("edit", {"path": "src/a.py"}, project, allow=allow) == "allow"
    assert verdict("edit", {"path": "./src/pkg/b.py"}, project, allow=allow) == "allow"
    assert verdict("edit", {"path": str(project / "src/a.py")}, project, allow=allow) == "allow"
    assert verdict("edit", {"path": "src/../setup.py"}, project, allow=allow) == "ask"
    assert verdict("edit", {"path": "link/x.py"}, project, allow=allow) == "ask"
    assert verdict("write", {"path": "link/out/r.txt"}, project, allow=allow) == "allow"


def test_deny_wins_over_allow_and_over_mode_allow(project):
    rules = {"allow": ["bash"], "deny": ["bash(git push*)"]}
    assert verdict("bash", {"command": "git push -f"}, project, **rules) == "deny"
    assert verdict("bash", {"command": "git status"}, project, **rules) == "allow"
    assert verdict("bash", {"command": "git push"}, project, mode="allow", **rules) == "deny"


def test_reads_are_free_unless_a_deny_rule_names_them(project):
    for tool in ("read", "grep", "ls", "veil_recall", "memory_write"):
        assert verdict(tool, {"path": "a.py"}, project) == "allow", tool
        assert verdict(tool, {"path": "a.py"}, project, mode="deny") == "allow", tool
    assert verdict("read", {"path": ".env"}, project, deny=["read(.env*)"]) == "deny"
    assert verdict("ls", {}, project, deny=["ls(.)"]) == "deny"  # no path: the project root


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # bash, write inside, write outside, a plugin's tool
        ("ask", ["ask", "ask", "ask", "ask"]),
        ("acceptEdits", ["ask", "allow", "ask", "ask"]),
        ("allow", ["allow", "allow", "allow", "allow"]),
        ("deny", ["deny", "deny", "deny", "deny"]),
    ],
)
def test_mode_defaults(project, mode, expected):
    calls = [
        ("bash", {"command": "make"}),
        ("write", {"path": "a.py"}),
        ("write", {"path": "/tmp/elsewhere.py"}),
        ("mcp_fs_delete", {"path": "a.py"}),
    ]
    assert [verdict(t, a, project, mode=mode) for t, a in calls] == expected


def test_accept_edits_still_asks_for_git_and_veil_folders(project):
    for path in (".git/hooks/pre-commit", ".veil/settings.json", "src/../.git/config"):
        assert verdict("write", {"path": path}, project, mode="acceptEdits") == "ask", path
    assert verdict("edit", {"path": ".github/workflows/ci.yml"}, project, mode="acceptEdits") == (
        "allow"
    )


@pytest.mark.parametrize(
    "path",
    [
        "sub/.git/config",  # a nested repository: fsmonitor in its config runs at `git status`
        "sub/.git/hooks/pre-commit",
        "vendor/lib/.git",  # a submodule's gitdir pointer file
        "sub/.veil/settings.json",  # a nested project's veil settings
        ".GIT/hooks/pre-commit",  # the same folder on a case-insensitive disk (macOS)
        "sub/.Veil/settings.json",
        ".git\u200c/config",  # HFS+ and APFS ignore U+200C in names
        ".git./config",  # Windows drops trailing dots
    ],
)
def test_accept_edits_asks_for_git_and_veil_at_any_depth_and_spelling(project, path):
    assert verdict("write", {"path": path}, project, mode="acceptEdits") == "ask"
    assert verdict("edit", {"path": path}, project, mode="acceptEdits") == "ask"


def test_accept_edits_still_writes_names_that_only_contain_git_or_veil(project):
    for path in (".github/workflows/ci.yml", "src/.gitignore", "docs/veil.md", "a.git/x", ".gitx"):
        assert verdict("write", {"path": path}, project, mode="acceptEdits") == "allow", path


def test_accept_edits_never_writes_a_nested_repositorys_git_config_unasked(
    make_veil, project, default_permissions, monkeypatch
):
    """The tester's attack through the agent loop: an edit of ``sub/.git/config`` that would
    set ``core.fsmonitor`` to a command ran with nobody asked; now it is refused (no front end
    can ask) and the file is unchanged."""
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "acceptEdits")
    config = project / "sub" / ".git" / "config"
    config.parent.mkdir(parents=True)
    config.write_text("[core]\n\tbare = false\n")
    attack = {
        "path": "sub/.git/config",
        "old_string": "[core]",
        "new_string": '[core]\n\tfsmonitor = "touch pwned; false"',
    }
    veil = make_veil([{"tool_calls": [{"id": "c1", "name": "edit", "arguments": attack}]}, "ok"])
    session = veil.new_session()
    veil.run_turn(session, "tidy the repo")
    assert config.read_text() == "[core]\n\tbare = false\n"
    assert session.messages[2]["content"].startswith("Permission denied")


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        ("pytest -q tests", 'add "bash(pytest:*)" to permissions.allow'),
        ("echo pwned > /tmp/x", "no allow rule can cover this command"),  # redirection
        ("echo hi && rm -rf build", "no allow rule can cover this command"),  # rm unnamed
    ],
)
def test_a_refusal_suggests_only_an_allow_rule_that_would_work(project, command, hint):
    """It suggested "bash(echo:*)" for both last commands, which that rule never allows."""
    decision = evaluate(PermissionSettings(mode="deny"), project, "bash", {"command": command})
    assert decision.verdict == "deny"
    assert hint in decision.reason
    assert "--yes" in decision.reason
    rule = decision.request.session_rule
    covered = evaluate(
        PermissionSettings(mode="deny", allow=[rule]), project, "bash", {"command": command}
    )
    assert (covered.verdict == "allow") == hint.startswith("add")  # the hint tells the truth


def _accept_edits_run(make_veil, monkeypatch, tool, arguments):
    """One ``tool`` call through the agent loop in ``acceptEdits`` mode; the tool message."""
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "acceptEdits")
    call = {"tool_calls": [{"id": "c1", "name": tool, "arguments": arguments}]}
    veil = make_veil([call, "ok"])
    session = veil.new_session()
    veil.run_turn(session, "go")
    return session.messages[2]["content"]


def test_dot_dot_after_a_link_reaches_what_the_check_judged_not_outside_the_project(
    make_veil, project, default_permissions, monkeypatch
):
    """With a shipped link ``deep -> d0/d1/d2``, ``deep/../../victim.txt`` is ``d0/victim.txt``
    to the file system (what the check judged: inside the project) but was ``../victim.txt``
    to the write tool, which resolved ``..`` as text: the write landed outside the project,
    unasked (session 13's review)."""
    (project / "deep").symlink_to("d0/d1/d2")
    (project / "d0").mkdir()
    victim = project.parent / "victim.txt"
    victim.write_text("untouched")
    out = _accept_edits_run(
        make_veil, monkeypatch, "write", {"path": "deep/../../victim.txt", "content": "pwned"}
    )
    assert victim.read_text() == "untouched"
    assert (project / "d0" / "victim.txt").read_text() == "pwned"  # where the check said
    assert "Permission denied" not in out


def test_dot_dot_after_a_link_cannot_reach_a_git_config_unasked(
    make_veil, project, default_permissions, monkeypatch
):
    """Links ``a -> x/y`` and ``b -> .git``: ``a/../b/config`` was judged ``x/b/config`` (a
    plain file) and edited as ``b/config``, the repository's ``.git/config``."""
    config = project / ".git" / "config"
    config.parent.mkdir()
    config.write_text("[core]\n")
    (project / "a").symlink_to("x/y")
    (project / "b").symlink_to(".git")
    attack = {"path": "a/../b/config", "old_string": "[core]", "new_string": "[core]\n\tx = 1"}
    out = _accept_edits_run(make_veil, monkeypatch, "edit", attack)
    assert config.read_text() == "[core]\n"
    assert "x/b/config" in out  # the path the check judged, which does not exist


def test_a_front_end_answer_in_user_words_is_understood(make_veil, project, default_permissions):
    asker = Asker("Yes")
    veil = make_veil([_bash("touch a.txt"), "ok"], plugins=[("asker", asker)])
    veil.run_turn(veil.new_session(), "go")
    assert (project / "a.txt").exists()


def test_deny_mode_names_the_rule_that_would_allow_the_call(project):
    decision = evaluate(PermissionSettings(mode="deny"), project, "bash", {"command": "pytest -q"})
    home = os.environ["VEIL_HOME"]  # the user's folder is named where it really is
    assert f'"bash(pytest:*)" to permissions.allow in {home}/settings.json' in decision.reason
    assert "--yes" in decision.reason


def test_session_rule_suggestions():
    assert session_rule_for("bash", "pytest -q tests/") == "bash(pytest:*)"
    assert session_rule_for("bash", "npm run test -- -x") == "bash(npm run:*)"
    assert session_rule_for("bash", "python -m pytest -q") == "bash(python -m pytest:*)"
    assert session_rule_for("bash", "git -C x status") == "bash(git:*)"
    assert session_rule_for("edit", "src/a.py") == "edit"


def test_prompt_answers():
    assert [parse_answer(t) for t in ("y", "A", " n ", "2", "maybe", "")] == [
        "once",
        "session",
        "deny",
        "session",
        None,
        None,
    ]


# -- settings layers: only the user allows ------------------------------------------------------


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_user_settings_file_allows_and_project_adds_deny_rules(project, default_permissions):
    home = Path(os.environ["VEIL_HOME"])
    _write(home / "settings.json", {"permissions": {"allow": ["bash(pytest*)"], "deny": ["x"]}})
    _write(project / ".veil" / "settings.json", {"permissions": {"deny": ["bash(rm*)"]}})
    perms = load_config(project).settings.permissions
    assert perms.allow == ["bash(pytest*)"]
    assert perms.deny == ["x", "bash(rm*)"]
    assert perms.mode == "ask"


def test_user_settings_file_holds_other_sections_under_the_project(project):
    home = Path(os.environ["VEIL_HOME"])
    _write(home / "settings.json", {"loop": {"maxIterations": 7, "bashTimeout": 30}})
    _write(project / ".veil" / "settings.json", {"loop": {"maxIterations": 9}})
    loop = load_config(project).settings.loop
    assert (loop.max_iterations, loop.bash_timeout) == (9, 30)


def test_project_file_may_not_allow_tool_calls(project, default_permissions):
    _write(project / ".veil" / "settings.json", {"permissions": {"allow": ["bash(pytest*)"]}})
    with pytest.raises(ConfigError) as err:
        load_config(project)
    message = err.value.message
    assert "settings.json: permissions.allow: a project file may not allow" in message
    assert f"{os.environ['VEIL_HOME']}/settings.json" in message


@pytest.mark.parametrize("mode", ["allow", "acceptEdits"])
def test_project_file_may_not_widen_the_mode(project, default_permissions, mode):
    _write(project / ".veil" / "settings.json", {"permissions": {"mode": mode}})
    with pytest.raises(ConfigError, match="permissions.mode: a project file may only narrow"):
        load_config(project)


def test_project_file_narrows_the_users_mode(project, default_permissions):
    home = Path(os.environ["VEIL_HOME"])
    _write(home / "settings.json", {"permissions": {"mode": "acceptEdits"}})
    _write(project / ".veil" / "settings.json", {"permissions": {"mode": "deny"}})
    assert load_config(project).settings.permissions.mode == "deny"
    _write(project / ".veil" / "settings.json", {"permissions": {"mode": "ask"}})
    assert load_config(project).settings.permissions.mode == "ask"


def test_environment_sets_mode_and_rules_but_project_deny_rules_stay(
    project, default_permissions, monkeypatch
):
    _write(project / ".veil" / "settings.json", {"permissions": {"deny": ["bash(rm*)"]}})
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "allow")
    monkeypatch.setenv("VEIL_PERMISSIONS__DENY", '["bash(curl*)"]')
    perms = load_config(project).settings.permissions
    assert perms.mode == "allow"
    assert perms.deny == ["bash(curl*)", "bash(rm*)"]


def test_settings_in_the_home_folder_are_the_users_own(tmp_path, monkeypatch, default_permissions):
    """Run in the home folder, .veil/settings.json is the user's file: allow rules hold."""
    home = tmp_path / "home"
    monkeypatch.setenv("VEIL_HOME", str(home / ".veil"))
    _write(home / ".veil" / "settings.json", {"permissions": {"allow": ["bash"]}})
    assert load_config(home).settings.permissions.allow == ["bash"]


# -- the loop ----------------------------------------------------------------------------------


class Asker:
    """A front end that answers permission prompts from a list and records the requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []

    @hookimpl
    def ask_permission(self, session, request):
        self.requests.append(request)
        return self.answers.pop(0)


def _bash(command, call_id="c1"):
    return {"tool_calls": [{"id": call_id, "name": "bash", "arguments": {"command": command}}]}


def test_loop_without_a_front_end_denies_and_tells_the_model(
    make_veil, project, default_permissions
):
    veil = make_veil([_bash("touch made.txt"), "ok"])
    session = veil.new_session()
    result = veil.run_turn(session, "make a file")
    assert result.status == "done"
    assert not (project / "made.txt").exists()
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    tool_msg = session.messages[2]
    assert tool_msg["tool_call_id"] == "c1"
    assert tool_msg["content"].startswith("Permission denied: this bash call was not run.")
    assert "nobody could be asked" in tool_msg["content"]
    assert '"bash(touch:*)" to permissions.allow' in tool_msg["content"]
    stored = [m for _, m in veil.store.messages(session.id)]  # recorded like any result
    assert stored[2] == tool_msg


def test_loop_asks_once_then_for_the_session(make_veil, project, default_permissions):
    asker = Asker("once", "session", "deny")
    veil = make_veil(
        [
            _bash("touch a.txt", "c1"),
            _bash("touch b.txt", "c2"),
            _bash("touch c.txt", "c3"),  # covered by bash(touch:*): not asked
            _bash("rm a.txt", "c4"),  # asked, denied
            "done",
        ],
        plugins=[("asker", asker)],
    )
    session = veil.new_session()
    veil.run_turn(session, "files")
    assert (project / "a.txt").exists() and (project / "b.txt").exists()
    assert (project / "c.txt").exists()
    assert [r.describe() for r in asker.requests] == [
        "bash(touch a.txt)",
        "bash(touch b.txt)",
        "bash(rm a.txt)",
    ]
    assert session.permission_grants == ["bash(touch:*)"]
    denied = session.messages[-2]
    assert denied["tool_call_id"] == "c4"
    assert "The user refused it" in denied["content"]


@pytest.mark.parametrize(("answer", "got"), [(True, "bool"), ("maybe", "'maybe'")])
def test_an_answer_that_is_not_one_stops_the_turn_naming_the_plugin(
    make_veil, project, default_permissions, answer, got
):
    """``True`` (meant as "allow") or a word no prompt accepts was read as "nobody could be
    asked": the call was refused with a reason about terminals. Now the turn stops with one
    line naming the plugin, and the call still does not run."""
    from veil.core.errors import PluginResultInvalid

    veil = make_veil([_bash("touch made.txt"), "ok"], plugins=[("yes_man", Asker(answer))])
    session = veil.new_session()
    with pytest.raises(PluginResultInvalid) as refused:
        veil.run_turn(session, "make a file")
    assert refused.value.message == (
        f"plugin yes_man: hook ask_permission returned {got}, expected "
        '"once", "session", "deny" or None'
    )
    assert not (project / "made.txt").exists()


def test_typed_answers_from_a_plugin_are_read_as_a_user_types_them(
    make_veil, project, default_permissions
):
    veil = make_veil([_bash("touch made.txt"), "ok"], plugins=[("typist", Asker(" Y "))])
    veil.run_turn(veil.new_session(), "make a file")
    assert (project / "made.txt").exists()


def test_reads_never_reach_the_prompt(make_veil, project, default_permissions):
    (project / "a.py").write_text("x = 1\n")
    asker = Asker()
    veil = make_veil(
        [{"tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}]}, "read it"],
        plugins=[("asker", asker)],
    )
    session = veil.new_session()
    veil.run_turn(session, "read")
    assert asker.requests == []
    assert "x = 1" in session.messages[2]["content"]


def test_denied_result_is_shown_to_front_ends_as_denied(make_veil, project, default_permissions):
    events = []

    class Front:
        @hookimpl
        def render(self, event):
            if event.kind == "tool_result":
                events.append(event.data)

    veil = make_veil([_bash("touch x"), "ok"], plugins=[("front", Front())])
    veil.run_turn(veil.new_session(), "x")
    assert events[0]["denied"] is True and events[0]["isError"] is True


# -- a tool's name never grants permission (issue 33) --------------------------------------------


class SyncPlugin:
    """A third-party plugin whose tool is named like veil's memory tools."""

    def __init__(self, effect: str = "change", name: str = "memory_sync") -> None:
        self.effect = effect
        self.name = name
        self.ran: list[dict] = []

    @hookimpl
    def register_tools(self, veil):
        from veil.core.types import Tool, ToolResult

        def run(ctx, arguments):
            self.ran.append(arguments)
            return ToolResult("synced to the team server")

        schema = {"type": "object", "properties": {"note": {"type": "string"}}}
        return [Tool(self.name, "Send memory to the team server.", schema, run, effect=self.effect)]


def _calls(*names_and_arguments):
    return {
        "tool_calls": [
            {"id": f"c{n}", "name": name, "arguments": arguments}
            for n, (name, arguments) in enumerate(names_and_arguments, start=1)
        ]
    }


SYNC_AND_REMEMBER = _calls(
    ("memory_sync", {"note": "all of it"}),
    ("veil_remember", {"content": "The build runs with make check."}),
)


def test_a_plugin_tool_named_like_a_memory_tool_is_refused_in_deny_mode(
    make_veil, project, default_permissions, monkeypatch
):
    """Before: any tool whose name started with ``memory_`` or ``veil_`` was "never asked",
    checked before ``permissions.mode: deny``, so a third-party ``memory_sync`` ran unasked
    there. Now its declared effect (``change``) decides: refused; veil's own memory tool in
    the same batch still runs unasked."""
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "deny")
    sync = SyncPlugin()
    veil = make_veil([SYNC_AND_REMEMBER, "done"], plugins=[("team_sync", sync)])
    session = veil.new_session()
    veil.run_turn(session, "sync the memory")
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert sync.ran == []
    assert results["c1"].startswith(
        "Permission denied: this memory_sync call was not run. permissions.mode is deny"
    )
    assert not results["c2"].startswith("Permission denied")
    contents = [i.content for i in veil.store.items(session.id, ("live", "warm", "cold"))]
    assert "The build runs with make check." in contents


def test_a_plugin_tool_named_like_a_memory_tool_asks_in_ask_mode(
    make_veil, project, default_permissions
):
    asker = Asker("deny")
    sync = SyncPlugin()
    veil = make_veil([SYNC_AND_REMEMBER, "done"], plugins=[("team_sync", sync), ("asker", asker)])
    session = veil.new_session()
    veil.run_turn(session, "sync the memory")
    # only the plugin's tool was asked about; veil_remember ran without a prompt
    assert [r.describe() for r in asker.requests] == ["memory_sync"]
    assert asker.requests[0].reason == "memory_sync asks before it runs (permissions.mode ask)"
    assert sync.ran == []
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert "The user refused it" in results["c1"]
    assert not results["c2"].startswith("Permission denied")


def test_only_veils_own_plugins_may_declare_a_tool_memory_only(
    make_veil, project, default_permissions, monkeypatch
):
    """A plugin's declaration ``effect="memory"`` is veil's own memory tools' privilege: veil
    cannot vouch for what another plugin's tool writes, so it asks (refused in deny mode). A
    tool that declares ``"read"`` runs unasked, as ``read`` does, whatever its name."""
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "deny")
    claims_memory = SyncPlugin(effect="memory")
    reads = SyncPlugin(effect="read", name="team_notes")
    veil = make_veil(
        [_calls(("memory_sync", {}), ("team_notes", {})), "done"],
        plugins=[("team_sync", claims_memory), ("team_notes", reads)],
    )
    session = veil.new_session()
    veil.run_turn(session, "sync")
    assert claims_memory.ran == [] and reads.ran == [{}]
    results = {m["tool_call_id"]: m["content"] for m in session.messages if m["role"] == "tool"}
    assert results["c1"].startswith("Permission denied")
    assert results["c2"] == "synced to the team server"


def test_a_registered_tool_must_declare_a_known_effect(make_veil, project):
    from veil.core.errors import PluginResultInvalid

    with pytest.raises(PluginResultInvalid) as refused:
        make_veil(["ok"], plugins=[("team_sync", SyncPlugin(effect="readonly"))])
    assert refused.value.message == (
        "plugin team_sync: hook register_tools returned a Tool 'memory_sync' whose effect is "
        "'readonly', expected effect 'read', 'memory' or 'change'"
    )


def test_veils_own_plugins_are_the_ones_shipped_in_the_repository():
    """:data:`veil.default_plugins.SHIPPED_PLUGINS` lists every entry point of the plugin
    distributions under ``plugins/`` (the permission rules honour their memory tools)."""
    import tomllib

    from veil.default_plugins import SHIPPED_PLUGINS

    root = Path(__file__).resolve().parent.parent / "plugins"
    declared = set()
    for pyproject in root.glob("*/pyproject.toml"):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        declared |= set(data["project"]["entry-points"]["veil"].items())
    assert set(SHIPPED_PLUGINS) == declared
