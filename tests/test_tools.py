"""Tests of the built-in coding tools (veil/default_plugins/coding_tools/tools.py).

Expected outputs are written out by hand from the tool contracts (numbered lines, notes, exit-code
footers); sizes (bytes, characters cut) are recomputed here from the inputs independently.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.core.settings import load_config
from veil.core.types import ToolContext, ToolResult
from veil.default_plugins.coding_tools import tools

NAMES = ["read", "write", "edit", "bash", "grep", "ls"]


def make_ctx(root: Path, loop: dict | None = None) -> ToolContext:
    """A fake session rooted at ``root``; ``loop`` goes to .veil/settings.json (camelCase keys)."""
    if loop:
        (root / ".veil").mkdir(exist_ok=True)
        (root / ".veil" / "settings.json").write_text(json.dumps({"loop": loop}))
    session = SimpleNamespace(cwd=root, config=load_config(root))
    return ToolContext(session=session, tool_call_id="call_1")


def call(ctx: ToolContext, name: str, args: object) -> ToolResult:
    tool = {t.name: t for t in tools.builtin_tools()}[name]
    return tool.handler(ctx, args)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return make_ctx(tmp_path)


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


# -- schemas and arguments ---------------------------------------------------------------------


def test_builtin_tools_have_closed_schemas_with_required_fields():
    found = tools.builtin_tools()
    assert [t.name for t in found] == NAMES
    required = {
        "read": ["path"],
        "write": ["path", "content"],
        "edit": ["path", "old_string", "new_string"],
        "bash": ["command"],
        "grep": ["pattern"],
        "ls": [],
    }
    for tool in found:
        params = tool.parameters
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert params["required"] == required[tool.name]
        assert set(params["required"]) <= set(params["properties"])
        json.dumps(tool.schema())  # serialisable as sent to the provider
        assert tool.schema()["function"]["name"] == tool.name


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("read", {}, "read: path: missing (required)"),
        ("read", {"path": 3}, "read: path: expected a string, got integer"),
        ("read", {"path": "a", "offset": 0}, "read: offset: must be >= 1, got 0"),
        ("read", {"path": "a", "offset": 1.5}, "read: offset: expected an integer, got 1.5"),
        ("read", {"path": "a", "x": 1}, "read: x: unknown field (expected: path, offset, limit)"),
        ("read", ["a"], "read: arguments: expected a JSON object, got array"),
        ("write", {"path": "a"}, "write: content: missing (required)"),
        ("edit", {"path": "a", "old_string": "x"}, "edit: new_string: missing (required)"),
        (
            "edit",
            {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"},
            "edit: replace_all: expected a boolean (true or false), got string",
        ),
        (
            "edit",
            {"path": "a", "old_string": "", "new_string": "y"},
            "edit: old_string: must not be empty (use write to create or overwrite a file)",
        ),
        (
            "bash",
            {"command": "true", "timeout": "5"},
            "bash: timeout: expected a number, got string",
        ),
        ("bash", {"command": "true", "timeout": 0}, "bash: timeout: must be > 0, got 0.0"),
        ("bash", {"command": "  "}, "bash: command: is empty"),
        ("grep", {"pattern": "a", "max_results": 0}, "grep: max_results: must be >= 1, got 0"),
        ("ls", {"depth": 0}, "ls: depth: must be >= 1, got 0"),
        ("ls", {"depth": 11}, "ls: depth: must be <= 10, got 11"),
    ],
)
def test_bad_arguments_become_error_results(ctx, name, args, message):
    result = call(ctx, name, args)
    assert result.is_error
    assert result.content == message
    assert result.meta["truncated"] is False


def test_null_optional_argument_means_absent(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    result = call(ctx, "read", {"path": "a.txt", "offset": None, "limit": None})
    assert result.content == "    1\tone"


# -- read --------------------------------------------------------------------------------------


def test_read_numbers_lines_and_reports_the_path(ctx, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\n\nx = 1\n")
    result = call(ctx, "read", {"path": "src/a.py"})
    assert result.content == "    1\timport os\n    2\t\n    3\tx = 1"
    assert not result.is_error
    assert result.meta["path"] == "src/a.py"
    assert result.meta["truncated"] is False
    assert result.meta["total_lines"] == 3


def test_read_range_says_how_to_continue(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("".join(f"l{i}\n" for i in range(1, 6)))
    result = call(ctx, "read", {"path": "f.txt", "offset": 2, "limit": 2})
    assert result.content == (
        "    2\tl2\n    3\tl3\n\n[showing lines 2-3 of 5; call read with offset=4]"
    )
    assert result.meta["truncated"] is True
    rest = call(ctx, "read", {"path": "f.txt", "offset": 4})
    assert rest.content == "    4\tl4\n    5\tl5"
    assert rest.meta["truncated"] is False


def test_read_default_limit_is_read_lines(tmp_path):
    (tmp_path / "big.txt").write_text("x\n" * 5400)
    result = call(make_ctx(tmp_path), "read", {"path": "big.txt"})
    lines = result.content.split("\n")
    assert lines[0] == "    1\tx"
    assert lines[1999] == " 2000\tx"
    assert lines[2000:] == ["", "[showing lines 1-2000 of 5400; call read with offset=2001]"]
    last = call(make_ctx(tmp_path), "read", {"path": "big.txt", "offset": 5400})
    assert last.content == " 5400\tx"


def test_read_lines_setting_changes_default_window(tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\nc")  # no final newline: still 3 lines
    result = call(make_ctx(tmp_path, {"readLines": 2}), "read", {"path": "f.txt"})
    assert (
        result.content == "    1\ta\n    2\tb\n\n[showing lines 1-2 of 3; call read with offset=3]"
    )


def test_read_stops_at_output_budget(tmp_path):
    # tool_output_chars 300 leaves 100 characters for lines once the 200-character note
    # reserve is taken; each numbered line is 5 + 1 + 20 = 26 characters plus a newline:
    # 3 lines take 26 * 3 + 2 = 80, a 4th would need 107.
    (tmp_path / "f.txt").write_text(("y" * 20 + "\n") * 10)
    result = call(make_ctx(tmp_path, {"toolOutputChars": 300}), "read", {"path": "f.txt"})
    body, note = result.content.split("\n\n")
    assert body.split("\n") == [f"    {i}\t" + "y" * 20 for i in (1, 2, 3)]
    assert note == "[showing lines 1-3 of 10; call read with offset=4]"
    assert len(result.content) <= 300


def test_read_cuts_long_lines(ctx, tmp_path):
    (tmp_path / "min.js").write_text("z" * 2500 + "\nshort\n")
    result = call(ctx, "read", {"path": "min.js"})
    first, second = result.content.split("\n")
    assert first == "    1\t" + "z" * 2000 + " [... line cut at 2000 of 2500 characters]"
    assert second == "    2\tshort"
    assert result.meta["truncated"] is True


def test_read_strips_crlf_and_replaces_bad_bytes(ctx, tmp_path):
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\xff\r\n")
    assert call(ctx, "read", {"path": "w.txt"}).content == "    1\tone\n    2\ttwo\ufffd"


def test_read_refuses_binary_files_and_folders(ctx, tmp_path):
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    binary = call(ctx, "read", {"path": "img.png"})
    assert binary.is_error
    assert binary.content == "read: img.png: binary file (16 bytes); not shown"
    (tmp_path / "pkg").mkdir()
    folder = call(ctx, "read", {"path": "pkg"})
    assert folder.is_error
    assert folder.content == "read: pkg: is a directory; use ls to list it"


def test_read_missing_file_and_offset_past_end(ctx, tmp_path):
    missing = call(ctx, "read", {"path": "nope/missing.py"})
    assert missing.is_error
    assert missing.content == "read: nope/missing.py: no such file"
    assert missing.meta["path"] == "nope/missing.py"
    (tmp_path / "f.txt").write_text("a\nb\n")
    past = call(ctx, "read", {"path": "f.txt", "offset": 3})
    assert past.is_error
    assert past.content == "read: offset: 3 is past the end of f.txt (2 lines)"


def test_read_empty_file_and_absolute_path_outside_root(ctx, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere") / "e.txt"
    other.write_text("")
    result = call(ctx, "read", {"path": str(other)})
    assert result.content == f"[{other.as_posix()} is empty]"
    assert result.meta["path"] == other.as_posix()
    assert not result.is_error


# -- write -------------------------------------------------------------------------------------


def test_write_creates_parents_and_reports_bytes_and_lines(ctx, tmp_path):
    result = call(ctx, "write", {"path": "a/b/c.txt", "content": "héllo\nwörld\n"})
    # h é(2) l l o \n = 7 bytes, w ö(2) r l d \n = 7 bytes
    assert result.content == "created a/b/c.txt: 14 bytes, 2 lines"
    assert (tmp_path / "a/b/c.txt").read_bytes() == "héllo\nwörld\n".encode()
    assert result.meta["path"] == "a/b/c.txt"
    assert os.listdir(tmp_path / "a/b") == ["c.txt"]  # no temporary file left


def test_write_overwrite_keeps_mode_and_leaves_no_temp_files(ctx, tmp_path):
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    result = call(ctx, "write", {"path": "run.sh", "content": "#!/bin/sh\necho hi"})
    assert result.content == "overwrote run.sh: 17 bytes, 2 lines"
    assert target.read_text() == "#!/bin/sh\necho hi"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert os.listdir(tmp_path) == ["run.sh"]


def test_new_file_mode_follows_umask(ctx, tmp_path):
    old = os.umask(0o027)
    try:
        call(ctx, "write", {"path": "n.txt", "content": "x"})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "n.txt").stat().st_mode) == 0o640


def test_write_failure_keeps_old_content_and_removes_temp(ctx, tmp_path, monkeypatch):
    target = tmp_path / "keep.txt"
    target.write_text("original")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tools.os, "replace", broken_replace)
    result = call(ctx, "write", {"path": "keep.txt", "content": "new"})
    assert result.is_error
    assert result.content == "write: keep.txt: cannot write: No space left on device"
    assert target.read_text() == "original"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_write_through_symlink_replaces_target_keeps_link(ctx, tmp_path):
    (tmp_path / "real.txt").write_text("a")
    (tmp_path / "link.txt").symlink_to("real.txt")
    call(ctx, "write", {"path": "link.txt", "content": "b"})
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "b"


def test_write_refuses_folder_and_unencodable_text(ctx, tmp_path):
    (tmp_path / "d").mkdir()
    assert call(ctx, "write", {"path": "d", "content": "x"}).content == "write: d: is a directory"
    bad = call(ctx, "write", {"path": "s.txt", "content": "\ud800"})
    assert bad.is_error
    assert bad.content == "write: content: cannot be encoded as UTF-8 (surrogates not allowed)"
    assert not (tmp_path / "s.txt").exists()


# -- edit --------------------------------------------------------------------------------------


def test_edit_replaces_a_unique_string(ctx, tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = call(ctx, "edit", {"path": "m.py", "old_string": "return 2", "new_string": "return 3"})
    assert result.content == "edited m.py: replaced 1 occurrence (first at line 5)"
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert result.meta["path"] == "m.py"
    assert os.listdir(tmp_path) == ["m.py"]


def test_edit_refuses_ambiguous_and_missing_strings(ctx, tmp_path):
    text = "x = 1\nx = 1\nx = 1\n"
    (tmp_path / "m.py").write_text(text)
    many = call(ctx, "edit", {"path": "m.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert many.is_error
    assert many.content == (
        "edit: m.py: old_string found 3 times; include more surrounding lines to make it "
        "unique, or set replace_all=true"
    )
    missing = call(ctx, "edit", {"path": "m.py", "old_string": "y = 1", "new_string": "y = 2"})
    assert missing.is_error
    assert missing.content.startswith("edit: m.py: old_string not found")
    same = call(ctx, "edit", {"path": "m.py", "old_string": "x", "new_string": "x"})
    assert same.content == "edit: new_string: is the same as old_string; nothing would change"
    assert (tmp_path / "m.py").read_text() == text
    nofile = call(ctx, "edit", {"path": "no.py", "old_string": "a", "new_string": "b"})
    assert nofile.content == "edit: no.py: no such file"


def test_edit_replace_all(ctx, tmp_path):
    (tmp_path / "m.py").write_text("a\nx = 1\nx = 1\nx = 1\n")
    result = call(
        ctx,
        "edit",
        {"path": "m.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True},
    )
    assert result.content == "edited m.py: replaced 3 occurrences (first at line 2)"
    assert (tmp_path / "m.py").read_text() == "a\nx = 2\nx = 2\nx = 2\n"
    assert result.meta["replacements"] == 3


def test_edit_keeps_crlf_line_endings_and_bom(ctx, tmp_path):
    target = tmp_path / "win.txt"
    target.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\n")
    result = call(
        ctx,
        "edit",
        {"path": "win.txt", "old_string": "alpha\nbeta", "new_string": "one\ntwo\nthree"},
    )
    assert not result.is_error, result.content
    assert target.read_bytes() == b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\ngamma\r\n"


def test_edit_keeps_lf_when_model_sends_crlf(ctx, tmp_path):
    target = tmp_path / "unix.txt"
    target.write_bytes(b"a\nb\nc\n")
    call(ctx, "edit", {"path": "unix.txt", "old_string": "a\r\nb", "new_string": "A\r\nB"})
    assert target.read_bytes() == b"A\nB\nc\n"


def test_edit_refuses_non_utf8_and_binary(ctx, tmp_path):
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    result = call(ctx, "edit", {"path": "latin.txt", "old_string": "caf", "new_string": "tea"})
    assert result.is_error
    assert (
        result.content == "edit: latin.txt: not valid UTF-8 (byte 3); edit keeps UTF-8 files only"
    )
    assert (tmp_path / "latin.txt").read_bytes() == b"caf\xe9\n"
    (tmp_path / "b.bin").write_bytes(b"ab\0cd")
    binary = call(ctx, "edit", {"path": "b.bin", "old_string": "ab", "new_string": "x"})
    assert binary.content == "edit: b.bin: binary file; edit changes text files only"


# -- bash --------------------------------------------------------------------------------------


def test_bash_exit_codes_and_outcome(ctx):
    ok = call(ctx, "bash", {"command": "echo hello"})
    assert ok.content == "hello\n[exit code: 0]"
    assert (ok.outcome, ok.meta["exit_code"], ok.is_error) == ("pass", 0, False)
    bad = call(ctx, "bash", {"command": "echo nope; exit 7"})
    assert bad.content == "nope\n[exit code: 7]"
    assert (bad.outcome, bad.meta["exit_code"]) == ("fail", 7)
    silent = call(ctx, "bash", {"command": "true"})
    assert silent.content == "(no output)\n[exit code: 0]"


def test_bash_interleaves_stderr_runs_in_cwd_with_stdin_closed(ctx, tmp_path):
    mixed = call(ctx, "bash", {"command": "echo a; echo b >&2; echo c"})
    assert mixed.content == "a\nb\nc\n[exit code: 0]"
    where = call(ctx, "bash", {"command": "pwd"})
    assert where.content == f"{tmp_path}\n[exit code: 0]"
    started = time.monotonic()
    stdin = call(ctx, "bash", {"command": "cat; echo done", "timeout": 5})
    assert stdin.content == "done\n[exit code: 0]"
    assert time.monotonic() - started < 4


def test_bash_timeout_kills_the_whole_group(ctx, tmp_path):
    started = time.monotonic()
    result = call(ctx, "bash", {"command": "sleep 30 & echo $! > child.pid; wait", "timeout": 1})
    elapsed = time.monotonic() - started
    assert elapsed < 5
    assert result.is_error
    assert result.outcome == "fail"
    assert result.meta["timed_out"] is True
    assert result.content == "(no output)\n[timed out after 1 s; process group killed]"
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 2
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(child)


def test_bash_timeout_is_capped_by_settings(tmp_path):
    ctx = make_ctx(tmp_path, {"bashTimeout": 1})
    started = time.monotonic()
    result = call(ctx, "bash", {"command": "sleep 30", "timeout": 100})
    assert time.monotonic() - started < 5
    assert result.content.endswith("[timed out after 1 s; process group killed]")


def test_bash_background_job_does_not_hold_the_call(ctx, tmp_path):
    started = time.monotonic()
    result = call(ctx, "bash", {"command": "sleep 30 & echo $! > bg.pid; echo started"})
    assert time.monotonic() - started < 5
    assert result.content == "started\n[exit code: 0]"
    child = int((tmp_path / "bg.pid").read_text())
    deadline = time.monotonic() + 2
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(child)


def test_bash_output_cap_keeps_head_and_tail(tmp_path):
    ctx = make_ctx(tmp_path, {"toolOutputChars": 1000})
    result = call(ctx, "bash", {"command": "seq 1 2000"})
    full = "".join(f"{i}\n" for i in range(1, 2001))
    body, footer = result.content.rsplit("[exit code: 0]", 1)
    assert footer == ""
    head, rest = body.split("\n[... ", 1)
    cut_text, tail = rest.split(" characters cut ...]\n", 1)
    assert full.startswith(head)
    assert full.endswith(tail)
    assert len(head) + int(cut_text) + len(tail) == len(full)
    assert len(result.content) <= 1000
    assert result.meta["truncated"] is True


def test_bash_output_cap_is_memory_bounded_for_huge_output(tmp_path):
    # 200-char cap: the buffer keeps 4 * 120 bytes at each end (120 = 200 minus the footer
    # room's share), so 50,001 characters of two-byte text go through the dropped-count path.
    ctx = make_ctx(tmp_path, {"toolOutputChars": 200})
    command = f"{sys.executable} -c \"print('\\u00e9' * 50000)\""
    result = call(ctx, "bash", {"command": command})
    body = result.content.rsplit("[exit code: 0]", 1)[0]
    head, rest = body.split("\n[... ", 1)
    cut_text, tail = rest.split(" characters cut ...]\n", 1)
    assert set(head) == {"é"}
    assert set(tail.rstrip("\n")) == {"é"} and tail.endswith("\n")
    assert len(head) + int(cut_text) + len(tail) == 50001


def test_bash_interrupt_kills_group_and_reraises(ctx, tmp_path, monkeypatch):
    seen = {}

    def interrupted_pump(proc, buffer, deadline):
        seen["pid"] = proc.pid
        time.sleep(0.2)
        raise KeyboardInterrupt

    monkeypatch.setattr(tools, "_pump", interrupted_pump)
    with pytest.raises(KeyboardInterrupt):
        call(ctx, "bash", {"command": "sleep 30"})
    assert process_gone(seen["pid"])


def test_cap_middle_exact_counts():
    text = "".join(chr(ord("a") + i % 26) for i in range(500))
    capped, cut = tools.cap_middle(text, 100)
    head, rest = capped.split("\n[... ", 1)
    number, tail = rest.split(" characters cut ...]\n", 1)
    assert int(number) == cut == 500 - len(head) - len(tail)
    assert text.startswith(head) and text.endswith(tail)
    assert len(capped) <= 100
    assert tools.cap_middle("short", 100) == ("short", 0)


# -- grep --------------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("import os\nx = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("# b\nimport re\nIMPORT_ALL = True\n")
    (tmp_path / "notes.txt").write_text("import nothing\n")
    (tmp_path / "z.py").write_text("print('no')\n")
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "ci.yml").write_text("run: import check\n")
    for noise in (".git", ".venv", "node_modules", "__pycache__", ".veil"):
        (tmp_path / noise).mkdir(exist_ok=True)
        (tmp_path / noise / "hidden.py").write_text("import hidden\n")
    (tmp_path / "blob.bin").write_bytes(b"import\0binary\n")
    return tmp_path


def test_grep_finds_matches_sorted_relative_skipping_noise(tree, engine):
    ctx = make_ctx(tree)
    result = call(ctx, "grep", {"pattern": r"^import \w+"})
    assert result.content == "a.py:1:import os\nnotes.txt:1:import nothing\nsub/b.py:2:import re"
    assert result.meta["engine"] == engine
    assert result.meta["matches"] == 3


def test_grep_searches_hidden_files_but_not_noise(tree, engine):
    result = call(make_ctx(tree), "grep", {"pattern": "import check|import hidden"})
    assert result.content == ".github/ci.yml:1:run: import check"


def test_grep_glob_ignore_case_and_path(tree, engine):
    ctx = make_ctx(tree)
    globbed = call(ctx, "grep", {"pattern": "import", "glob": "*.py"})
    assert globbed.content == "a.py:1:import os\nsub/b.py:2:import re"
    folded = call(ctx, "grep", {"pattern": "import_all", "ignore_case": True})
    assert folded.content == "sub/b.py:3:IMPORT_ALL = True"
    in_file = call(ctx, "grep", {"pattern": "import", "path": "sub/b.py"})
    assert in_file.content == "sub/b.py:2:import re"
    assert in_file.meta["path"] == "sub/b.py"
    none = call(ctx, "grep", {"pattern": "zzz", "path": "sub"})
    assert none.content == "no matches for /zzz/ in sub"
    assert not none.is_error


def test_grep_max_results_note(tree, engine):
    result = call(make_ctx(tree), "grep", {"pattern": "import", "max_results": 2})
    assert result.content == (
        ".github/ci.yml:1:run: import check\na.py:1:import os\n\n"
        "[stopped after 2 matches; narrow the pattern, path or glob, or raise max_results]"
    )
    assert result.meta["truncated"] is True


def test_grep_python_only_syntax_falls_back(tree):
    result = call(make_ctx(tree), "grep", {"pattern": r"(?<=import )re\b"})
    assert result.content == "sub/b.py:2:import re"
    assert result.meta["engine"] == "python"


def test_grep_errors(tree):
    ctx = make_ctx(tree)
    bad = call(ctx, "grep", {"pattern": "(unclosed"})
    assert bad.is_error
    assert bad.content.startswith("grep: pattern: invalid regular expression: missing )")
    missing = call(ctx, "grep", {"pattern": "x", "path": "nowhere"})
    assert missing.content == "grep: nowhere: no such file or directory"


# -- ls ----------------------------------------------------------------------------------------


def test_ls_default_depth_is_one_level(tree):
    result = call(make_ctx(tree), "ls", {})
    assert result.content == ".github/\na.py\nblob.bin\nnotes.txt\nsub/\nz.py"
    assert result.meta == {"path": ".", "truncated": False, "entries": 6}


def test_ls_depth_and_sub_folder(tree):
    ctx = make_ctx(tree)
    deep = call(ctx, "ls", {"depth": 2})
    assert deep.content == (
        ".github/\n.github/ci.yml\na.py\nblob.bin\nnotes.txt\nsub/\nsub/b.py\nz.py"
    )
    assert call(ctx, "ls", {"path": "sub"}).content == "sub/b.py"
    assert call(ctx, "ls", {"path": "a.py"}).content == "a.py"
    missing = call(ctx, "ls", {"path": "gone"})
    assert missing.is_error
    assert missing.content == "ls: gone: no such file or directory"
    (tree / "empty").mkdir()
    assert call(ctx, "ls", {"path": "empty"}).content == "[empty is empty]"


def test_ls_caps_the_count(tmp_path):
    for i in range(600):
        (tmp_path / f"f{i:03d}.txt").write_text("")
    result = call(make_ctx(tmp_path), "ls", {})
    lines = result.content.split("\n")
    assert lines[:2] == ["f000.txt", "f001.txt"]
    assert lines[499] == "f499.txt"
    assert lines[500:] == [
        "",
        "[showing 500 of 600 entries; list a sub-folder or use a smaller depth]",
    ]
    assert result.meta["truncated"] is True


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=500, max_size=3000),
    max_chars=st.integers(min_value=60, max_value=400),
    cuts=st.lists(st.integers(min_value=0, max_value=12000), max_size=8),
)
def test_output_buffer_counts_cut_characters_exactly(text, max_chars, cuts):
    # Whatever the chunking (even inside a multi-byte character), the capped output is a
    # prefix + marker + suffix of the text and the marker's count closes the gap exactly.
    data = text.encode("utf-8")
    buffer = tools._OutputBuffer(max_chars)
    edges = [0, *sorted(c for c in cuts if c < len(data)), len(data)]
    for start, end in zip(edges, edges[1:], strict=False):
        buffer.feed(data[start:end])
    rendered, cut = buffer.render(max_chars)
    if cut == 0:
        assert rendered == text
        return
    head, rest = rendered.split(f"\n[... {cut} characters cut ...]\n", 1)
    assert text.startswith(head) and text.endswith(rest)
    assert len(head) + cut + len(rest) == len(text)
    assert len(rendered) <= max_chars
