"""A ``read(...)`` deny rule keeps a file's contents from the model through every built-in tool.

A tester's report: with ``"deny": ["read(.env*)"]`` in ``~/.veil/settings.json``, ``grep`` over
the project returned ``.env:1:DB_NAME=...`` and ``read sub/.env.local`` returned the file (the
pattern did not match a nested name). Expected results are written out by hand from the rules
of :func:`veil.core.safety.permissions.path_matches` (gitignore's anchoring, as Claude Code
documents for its Read and Edit rules) and the tools' output formats.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veil.core.safety.permissions import evaluate, path_matches
from veil.core.settings import PermissionSettings, load_config
from veil.core.types import ToolContext
from veil.default_plugins.coding_tools import tools

MARKER = "prod_db_name_marker"


def covers(pattern: str, subject: str, project: Path, is_dir: bool = False) -> bool:
    return path_matches(pattern, subject, project, is_dir=is_dir)


# -- the matcher ---------------------------------------------------------------------------------


def test_a_pattern_without_a_slash_matches_a_name_at_any_depth(tmp_path):
    assert covers(".env*", ".env", tmp_path)
    assert covers(".env*", "sub/.env.local", tmp_path)  # the reported miss
    assert covers(".env*", "a/b/c/.envrc", tmp_path)
    assert not covers(".env*", "sub/my.env", tmp_path)
    assert covers("*.pem", "certs/deep/key.pem", tmp_path)
    assert not covers("*.pem", "key.pem.txt", tmp_path)
    assert covers("id_rsa", "home/.ssh/id_rsa", tmp_path)
    assert not covers("id_rsa", "id_rsa.pub", tmp_path)


def test_a_name_pattern_covers_what_lies_in_a_folder_of_that_name(tmp_path):
    assert covers("secrets", "lib/secrets/key.pem", tmp_path)
    assert covers("secrets", "secrets", tmp_path, is_dir=True)
    assert not covers("secrets", "lib/not_secrets/key.pem", tmp_path)
    assert covers(".env*", ".env.d/prod", tmp_path)


def test_a_trailing_slash_matches_folders_only(tmp_path):
    assert covers("build/", "build", tmp_path, is_dir=True)
    assert not covers("build/", "build", tmp_path, is_dir=False)  # a file named build
    assert covers("build/", "pkg/build/out.o", tmp_path)
    assert covers("config/secrets/", "config/secrets/a.yml", tmp_path)
    assert not covers("config/secrets/", "config/secrets", tmp_path, is_dir=False)


def test_a_pattern_with_a_slash_stays_anchored(tmp_path):
    assert covers("src/*", "src/a.py", tmp_path)
    assert covers("src/*", "src/pkg/b.py", tmp_path)  # "*" crosses folders, as before
    assert not covers("src/*", "lib/src/a.py", tmp_path)
    assert covers("./.env", ".env", tmp_path)  # "./" anchors a name at the root
    assert not covers("./.env", "sub/.env", tmp_path)
    assert covers("config/secrets", "config/secrets/a.yml", tmp_path)  # inside the folder
    assert not covers("config/secrets", "app/config/secrets", tmp_path)
    assert covers("**/.env", ".env", tmp_path)  # gitignore: leading **/ matches at the root too
    assert covers("**/.env", "a/b/.env", tmp_path)


def test_absolute_patterns_and_paths_outside_the_project(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    assert covers(f"{project.as_posix()}/.env", ".env", project)
    assert not covers(f"{project.as_posix()}/.env", "sub/.env", project)  # anchored by form
    assert covers("/etc/ssh", "/etc/ssh/ssh_host_key", project)
    assert covers("/tmp/*", "/tmp/x/y", project)
    assert not covers(".env*", "/elsewhere/.env", project)  # a name pattern is the project's


def test_the_project_root_is_matched_only_by_a_pattern_naming_it(tmp_path):
    assert covers(".", ".", tmp_path)
    assert not covers(".*", ".", tmp_path)
    assert not covers("?", ".", tmp_path)
    assert covers(tmp_path.resolve().as_posix(), ".", tmp_path)


# -- decisions: a read rule covers grep, ls and edit ---------------------------------------------


EFFECTS = {tool.name: tool.effect for tool in tools.builtin_tools()}
"""What each coding tool declares (read, grep, ls: ``"read"``; the others ``"change"``)."""


def verdict(tool, arguments, project, **settings):
    return evaluate(PermissionSettings(**settings), project, tool, arguments, effect=EFFECTS[tool])


def test_a_read_deny_rule_refuses_grep_ls_and_edit_of_a_path_it_covers(tmp_path):
    (tmp_path / "sub").mkdir()
    deny = ["read(.env*)"]
    for tool, args in [
        ("read", {"path": "sub/.env.local"}),
        ("grep", {"pattern": "x", "path": ".env"}),
        ("grep", {"pattern": "x", "path": "sub/.env.local"}),
        ("ls", {"path": "sub/.env.local"}),
        ("edit", {"path": ".env", "old_string": "a", "new_string": "b"}),
    ]:
        decision = verdict(tool, args, tmp_path, deny=deny, mode="allow")
        assert decision.verdict == "deny", (tool, args)
        assert decision.rule == "read(.env*)"
    grep = verdict("grep", {"pattern": "x", "path": ".env"}, tmp_path, deny=deny)
    assert grep.reason == (
        "grep(.env) matches the deny rule 'read(.env*)' (permissions.deny) "
        "(a read rule covers grep too)."
    )
    # a folder search runs (the tool leaves the files out); write is not a read
    assert verdict("grep", {"pattern": "x"}, tmp_path, deny=deny).verdict == "allow"
    assert verdict("ls", {"path": "sub"}, tmp_path, deny=deny).verdict == "allow"
    write = verdict("write", {"path": ".env", "content": ""}, tmp_path, deny=deny, mode="allow")
    assert write.verdict == "allow"


def test_read_alone_denies_every_reading_tool(tmp_path):
    for tool in ("read", "grep", "ls", "edit"):
        assert verdict(tool, {"path": "a.py"}, tmp_path, deny=["read"]).verdict == "deny", tool


# -- the tools themselves ------------------------------------------------------------------------


def secret_tree(root: Path) -> Path:
    """``.env`` and ``sub/.env.local`` hold the marker; ``app.py`` and ``sub/notes.txt`` name
    the variable without it; ``sub/.env.d/prod`` (inside a covered folder) holds it too."""
    (root / "sub" / ".env.d").mkdir(parents=True)
    (root / ".env").write_text(f"DB_NAME={MARKER}\n")
    (root / "sub" / ".env.local").write_text(f"DB_NAME={MARKER}\nDB_USER=admin\n")
    (root / "sub" / ".env.d" / "prod").write_text(f"DB_NAME={MARKER}\n")
    (root / "app.py").write_text("import os\nname = os.environ['DB_NAME']\n")
    (root / "sub" / "notes.txt").write_text("DB_NAME is read from the environment\n")
    return root


def deny_ctx(root: Path, deny: list[str]) -> ToolContext:
    (root / ".veil").mkdir(exist_ok=True)
    (root / ".veil" / "settings.json").write_text(json.dumps({"permissions": {"deny": deny}}))
    return ToolContext(session=_Session(root), tool_call_id="call_1")


class _Session:
    def __init__(self, root: Path) -> None:
        self.cwd = root
        self.config = load_config(root)


def call(ctx, name, args):
    return {t.name: t for t in tools.builtin_tools()}[name].handler(ctx, args)


def test_grep_of_a_folder_leaves_denied_files_out_and_says_how_many(tmp_path, engine):
    ctx = deny_ctx(secret_tree(tmp_path), ["read(.env*)"])
    result = call(ctx, "grep", {"pattern": "DB_NAME"})
    assert result.content == (
        "app.py:2:name = os.environ['DB_NAME']\n"
        "sub/notes.txt:1:DB_NAME is read from the environment\n\n"
        "[3 files left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert result.meta["engine"] == engine
    assert result.meta["matches"] == 2
    assert result.meta["denied"] == {"files": 3, "rules": ["read(.env*)"]}


def test_grep_left_out_count_does_not_depend_on_the_denied_files_contents(tmp_path, engine):
    """A count of matching denied files would answer "is this text in .env?" one regex at a
    time; the count is of the files the search left out, whatever they hold."""
    ctx = deny_ctx(secret_tree(tmp_path), ["read(.env*)"])
    hit = call(ctx, "grep", {"pattern": MARKER})
    miss = call(ctx, "grep", {"pattern": "not_in_any_file_zzz"})
    assert hit.content == (
        f"no matches for /{MARKER}/ in .\n\n"
        "[3 files left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert miss.content == hit.content.replace(MARKER, "not_in_any_file_zzz")


def test_grep_left_out_count_does_not_depend_on_the_glob(tmp_path, engine):
    """Counted under the model's ``glob``, "1 file left out" for ``secrets/pw-H*`` and 0 for
    ``secrets/pw-X*`` spelled out a denied file's name one letter at a time (session 13's
    review); the count is now of every covered file under the folder searched."""
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "pw-Hunter2.txt").write_text("x\n")
    (tmp_path / "a.txt").write_text("x\n")
    ctx = deny_ctx(tmp_path, ["read(secrets)"])
    right = call(ctx, "grep", {"pattern": "x", "glob": "secrets/pw-H*"})
    wrong = call(ctx, "grep", {"pattern": "x", "glob": "secrets/pw-X*"})
    assert right.content == wrong.content.replace("pw-X*", "pw-H*")
    assert right.meta["denied"] == wrong.meta["denied"] == {"files": 1, "rules": ["read(secrets)"]}


def test_grep_max_results_counts_only_files_it_may_show(tmp_path, engine):
    root = tmp_path
    (root / ".env").write_text("x\n" * 50)  # sorts first: would fill the limit
    (root / "a.txt").write_text("x\n")
    ctx = deny_ctx(root, ["read(.env*)"])
    result = call(ctx, "grep", {"pattern": "x", "max_results": 1})
    assert result.content == (
        "a.txt:1:x\n\n[1 file left out: permissions.deny covers it ('read(.env*)')]"
    )


def test_grep_and_read_refuse_a_denied_path_themselves(tmp_path, engine):
    ctx = deny_ctx(secret_tree(tmp_path), ["read(.env*)"])
    refused = call(ctx, "grep", {"pattern": "DB", "path": "sub/.env.local"})
    assert refused.is_error
    assert refused.content == (
        "grep: sub/.env.local: the deny rule 'read(.env*)' (permissions.deny) covers it; not shown"
    )
    read = call(ctx, "read", {"path": "sub/../.env"})
    assert read.is_error and MARKER not in read.content
    assert read.content.startswith("read: .env: the deny rule 'read(.env*)'")


def test_a_link_to_a_denied_file_is_left_out(tmp_path, engine):
    root = secret_tree(tmp_path)
    (root / "innocent.txt").symlink_to(root / ".env")
    ctx = deny_ctx(root, ["read(.env*)"])
    listed = call(ctx, "ls", {})
    assert listed.content == (
        "app.py\nsub/\n\n[2 entries left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert call(ctx, "grep", {"pattern": MARKER, "path": "innocent.txt"}).is_error
    searched = call(ctx, "grep", {"pattern": "DB_NAME="})  # links are not followed in a folder
    assert MARKER not in searched.content


def test_ls_leaves_denied_entries_out_and_does_not_enter_denied_folders(tmp_path):
    ctx = deny_ctx(secret_tree(tmp_path), ["read(.env*)"])
    deep = call(ctx, "ls", {"depth": 3})
    assert deep.content == (
        "app.py\nsub/\nsub/notes.txt\n\n"
        "[3 entries left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert deep.meta["denied"] == {"entries": 3, "rules": ["read(.env*)"]}
    only = call(ctx, "ls", {"path": "sub/.env.d"})
    assert only.is_error
    assert "deny rule 'read(.env*)'" in only.content


def test_an_ls_rule_of_its_own_leaves_entries_out_too(tmp_path):
    ctx = deny_ctx(secret_tree(tmp_path), ["ls(*.txt)"])
    assert call(ctx, "ls", {"path": "sub", "depth": 2}).content == (
        "sub/.env.d/\nsub/.env.d/prod\nsub/.env.local\n\n"
        "[1 entry left out: permissions.deny covers it ('ls(*.txt)')]"
    )


def test_without_deny_rules_nothing_is_left_out(tmp_path, engine):
    ctx = deny_ctx(secret_tree(tmp_path), [])
    result = call(ctx, "grep", {"pattern": MARKER})
    assert result.content == (
        f".env:1:DB_NAME={MARKER}\nsub/.env.d/prod:1:DB_NAME={MARKER}\n"
        f"sub/.env.local:1:DB_NAME={MARKER}"
    )
    assert "denied" not in result.meta


# -- through the agent loop ----------------------------------------------------------------------


def _calls(*calls):
    return {
        "tool_calls": [
            {"id": f"c{i}", "name": name, "arguments": args} for i, (name, args) in enumerate(calls)
        ]
    }


def test_the_model_never_receives_a_denied_files_contents(make_veil, project, veil_isolated_env):
    """The tester's session: the rule in the user's settings file, the model searching the
    whole project, reading the nested file, listing the folders."""
    (veil_isolated_env / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["read(.env*)"]}})
    )
    secret_tree(project)
    veil = make_veil(
        [
            _calls(
                ("grep", {"pattern": r"prod_db_\w+", "path": "."}),
                ("grep", {"pattern": "DB_NAME", "path": "sub"}),
                ("read", {"path": "sub/.env.local"}),
                ("grep", {"pattern": "DB", "path": "sub/.env.local"}),
                ("ls", {"path": ".", "depth": 3}),
                ("edit", {"path": ".env", "old_string": "DB_NAME=p", "new_string": "x"}),
            ),
            "done",
        ]
    )
    session = veil.new_session()
    assert veil.run_turn(session, "find the database name").final == "done"
    received = [m for m in veil.model.calls[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in received] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    for message in received:
        assert MARKER not in message["content"], message
    grep_all, grep_sub, read, grep_file, listing, edit = (m["content"] for m in received)
    assert grep_all == (
        "no matches for /prod_db_\\w+/ in .\n\n"
        "[3 files left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert grep_sub == (
        "sub/notes.txt:1:DB_NAME is read from the environment\n\n"
        "[2 files left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert read.startswith("Permission denied: this read call was not run. read(sub/.env.local)")
    assert grep_file.startswith("Permission denied: this grep call was not run.")
    assert "(a read rule covers grep too)" in grep_file
    assert listing == (
        "app.py\nsub/\nsub/notes.txt\n\n"
        "[3 entries left out: permissions.deny covers them ('read(.env*)')]"
    )
    assert edit.startswith("Permission denied: this edit call was not run.")
    assert (project / ".env").read_text() == f"DB_NAME={MARKER}\n"  # the edit did not run
    stored = [m for _, m in veil.store.messages(session.id)]
    assert not any(MARKER in json.dumps(m) for m in stored if m["role"] == "tool")


def test_allow_rules_match_the_whole_path_as_written_and_deny_rules_any_name(project):
    """Only deny rules read a slash-less pattern as a name at any depth: an allow rule that
    widened the same way would let edits run unasked in every folder named like it."""

    def verdict(path, **rules):
        return evaluate(PermissionSettings(**rules), project, "edit", {"path": path}).verdict

    assert verdict("src", allow=["edit(src)"]) == "allow"
    assert verdict("lib/src/x.py", allow=["edit(src)"]) == "ask"
    assert verdict("src/a/b.py", allow=["edit(src/*)"]) == "allow"
    assert verdict("lib/src/x.py", deny=["edit(src)"]) == "deny"
    assert verdict("sub/.env.local", allow=["edit(.env*)"]) == "ask"
    assert verdict("sub/.env.local", deny=["edit(.env*)"]) == "deny"


def test_allow_rules_reach_outside_the_project_or_into_git_and_veil_only_by_name(project):
    """``edit(*.json)`` and ``write(*.py)`` let calls run unasked on ``~/.veil/settings.json``
    (which would give the model the shell on the next run), ``.veil/settings.json``, a
    ``sitecustomize.py`` anywhere and ``.git/hooks/x.py`` (session 13's review)."""

    def verdict(tool, path, *allow):
        return evaluate(
            PermissionSettings(allow=list(allow)), project, tool, {"path": path}
        ).verdict

    home = Path("~").expanduser()
    assert verdict("edit", str(home / ".veil" / "settings.json"), "edit(*.json)") == "ask"
    assert verdict("edit", ".veil/settings.json", "edit(*.json)") == "ask"
    assert verdict("write", "/usr/lib/python3/sitecustomize.py", "write(*.py)") == "ask"
    assert verdict("write", ".git/hooks/x.py", "write(*.py)") == "ask"
    assert verdict("write", "sub/.GIT/hooks/x.py", "write(*.py)") == "ask"
    # what the rules say still runs: the project's files, and paths the rule names
    assert verdict("edit", "conf/app.json", "edit(*.json)") == "allow"
    assert verdict("edit", ".veil/memory/MEMORY.md", "edit(.veil/memory/*)") == "allow"
    assert verdict("write", "/tmp/scratch/a.py", "write(/tmp/scratch/*)") == "allow"
    assert verdict("edit", ".veil/settings.json", "edit") == "allow"  # every call, as written


@pytest.mark.parametrize(
    ("pattern", "subject"),
    [
        (".env*", ".ENV"),
        (".env*", "sub/.Env.local"),
        ("secrets", "SECRETS/key.pem"),
        ("config/prod.yml", "Config/prod.yml"),
        ("**/.env", "a/.ENV"),
        ("caf\u00e9.txt", "cafe\u0301.txt"),  # NFC pattern, NFD name: one file on macOS
        ("cafe\u0301.txt", "caf\u00e9.txt"),
    ],
)
def test_deny_patterns_ignore_case_and_unicode_form(project, pattern, subject):
    """macOS opens ``.ENV`` as ``.env`` and an NFD name as its NFC twin: a deny rule that
    compared bytes let ``read .ENV`` through there (session 13's review)."""
    assert path_matches(pattern, subject, project)
    assert (
        evaluate(
            PermissionSettings(deny=[f"read({pattern})"]), project, "read", {"path": subject}
        ).verdict
        == "deny"
    )
