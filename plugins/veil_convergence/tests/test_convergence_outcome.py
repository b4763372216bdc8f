"""Reading commands and classifying outcomes into attempts (expectations written by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
from veil_convergence.commands import (
    command_target,
    is_read_only,
    last_program,
    programs,
    segments,
)
from veil_convergence.fingerprint import fingerprint
from veil_convergence.outcome import build_attempt, classify_outcome, count_tests

from veil.core.types import ToolResult

HEREDOC = "cat > t.py << 'EOF'\nimport x; y | z\nEOF\npython t.py"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('pip list | grep -E "(numpy|pandas)"',
         [["pip", "list"], ["grep", "-E", "(numpy|pandas)"]]),
        ("cd /t && python -m pytest a.py -x 2>&1 | tail -5",
         [["python", "-m", "pytest", "a.py", "-x", "2>&1"], ["tail", "-5"]]),
        (HEREDOC, [["cat", ">", "t.py"], ["python", "t.py"]]),
        ("FOO=1 timeout 10 sudo make test; echo done", [["make", "test"], ["echo", "done"]]),
        ('python -c "\nimport a\nprint(1)\n"', [["python", "-c", "\nimport a\nprint(1)\n"]]),
    ],
)  # fmt: skip
def test_segments(command: str, expected: list[list[str]]) -> None:
    assert segments(command) == expected


def test_programs_and_last_program() -> None:
    assert programs("cd /t && python -m pytest x | tail -5") == ["pytest", "tail"]
    assert last_program('grep -n "a\\|b" f.py') == "grep"
    assert last_program("") is None


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("cat src/a.py", True),
        ('grep -n "aoi >= 90" pvlib/iam.py', True),
        ("sed -n '10,20p' a.py | head", True),
        ("git diff HEAD~1 -- a.py", True),
        ("ls -la > /dev/null 2>&1", True),
        ("sed -i 's/a/b/' a.py", False),
        ("echo x >> notes.txt", False),
        ("cat a.py | tee b.py", False),
        (HEREDOC, False),
        ("python repro.py", False),
        ("git apply fix.patch", False),
    ],
)
def test_is_read_only(command: str, read_only: bool) -> None:
    assert is_read_only(command) is read_only


@pytest.mark.parametrize(
    ("command", "target"),
    [
        ("cd /testbed && python -m pytest pvlib/tests/test_iam.py::test_physical -xvs",
         "pvlib/tests/test_iam.py::test_physical"),
        (HEREDOC, "t.py"),
        ("python reproduce_issue.py", "reproduce_issue.py"),
        ("grep -n 'def f' src/pkg/mod.py", "src/pkg/mod.py"),
        ("cat src/a.py && python run.py", "run.py"),
        ('python -c "import a.b; print(1)"', None),
        ("ls -la", None),
    ],
)  # fmt: skip
def test_command_target(command: str, target: str | None) -> None:
    assert command_target(command) == target


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("==== 1 failed, 4 passed, 2 warnings in 0.05s ====", (4, 1)),
        ("==== 18 passed in 0.06s ====", (18, 0)),
        ("== 2 warnings, 1 error in 0.16s ==", (0, 1)),
        ("Ran 5 tests in 0.010s\n\nFAILED (failures=1, errors=1)", (3, 2)),
        ("Ran 3 tests in 0.001s\n\nOK", (3, 0)),
        ("no tests ran in 0.04s", None),
        ("hello", None),
    ],
)
def test_count_tests(output: str, counts: tuple[int, int] | None) -> None:
    assert count_tests(output) == counts


def test_classify_outcome_rules() -> None:
    def classify(output: str, **kw: object) -> str:
        return classify_outcome(output, signature=None, **kw)  # type: ignore[arg-type]

    assert classify("x", declared="partial") == "partial"
    assert classify("== 1 failed, 4 passed in 0.1s ==") == "partial"
    assert classify("== 2 failed in 0.1s ==") == "fail"
    assert classify("== 4 passed in 0.1s ==", exit_code=0) == "pass"
    assert classify("boom", is_error=True) == "fail"
    assert classify("<returncode>2</returncode><output>\n</output>", exit_code=2) == "fail"
    quiet = "<returncode>1</returncode>\n<output>\n</output>"
    assert classify(quiet, exit_code=1, command="grep -n x a.py", read_only=True) == "uncertain"
    assert classify(quiet, exit_code=1, command="./check.sh") == "fail"
    assert classify("file body", read_only=True) == "uncertain"
    assert classify("ok") == "pass"
    with pytest.raises(ValueError, match="ToolResult.outcome"):
        classify("x", declared="maybe")


TRACEBACK = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "/proj/repro.py", line 1, in <module>
    import numpy
ModuleNotFoundError: No module named 'numpy'
</output>"""


def test_build_attempt_for_a_shell_command() -> None:
    attempt, sig = build_attempt(
        7, "bash", {"command": "cd /proj && python repro.py"}, ToolResult(TRACEBACK), Path("/proj")
    )
    assert (attempt.step, attempt.tool, attempt.action) == (
        7,
        "bash",
        "cd /proj && python repro.py",
    )
    assert (attempt.target, attempt.outcome) == ("repro.py", "fail")
    assert attempt.fingerprint == fingerprint(TRACEBACK) == sig.fingerprint
    assert sig.label == "ModuleNotFoundError: numpy"


def test_build_attempt_for_file_tools_and_meta() -> None:
    edit, sig = build_attempt(
        2,
        "edit",
        {"path": "/proj/src/a.py", "old": "x", "new": "y"},
        ToolResult("ok"),
        Path("/proj"),
    )
    assert (edit.action, edit.target, edit.outcome, sig) == (
        "edit /proj/src/a.py",
        "src/a.py",
        "pass",
        None,
    )
    read, _ = build_attempt(3, "read", {"path": "src/a.py"}, ToolResult("text"), Path("/proj"))
    assert (read.target, read.outcome) == ("src/a.py", "uncertain")
    meta, _ = build_attempt(4, "write", {}, ToolResult("ok", meta={"path": "./b.py"}))
    assert meta.target == "b.py"
    failed, _ = build_attempt(5, "bash", {"command": "make"}, ToolResult("", meta={"exit_code": 2}))
    assert (failed.outcome, failed.fingerprint is not None) == ("fail", True)
    assert build_attempt(6, "veil_recall", {"query": "x"}, ToolResult("hits")) is None
    assert build_attempt(6, "memory_write", {}, ToolResult("written")) is None


def test_build_attempt_targets_the_failing_test_and_heredoc_action() -> None:
    out = "FAILED tests/t.py::test_a - KeyError: 'k'\n== 1 failed, 2 passed in 0.1s ==\n"
    attempt, _ = build_attempt(1, "bash", {"command": "pytest -q"}, ToolResult(out))
    assert (attempt.target, attempt.outcome) == ("tests/t.py::test_a", "partial")
    attempt, _ = build_attempt(1, "bash", {"command": HEREDOC}, ToolResult("ran"))
    assert attempt.action == "cat > t.py; python t.py"


def test_veil_bash_results() -> None:
    """veil's own bash tool declares pass/fail from the exit code and ends with a footer."""
    no_match = ToolResult(
        "(no output)\n[exit code: 1]",
        outcome="fail",
        meta={"command": "grep -n foo a.py", "exit_code": 1},
    )
    attempt, sig = build_attempt(1, "bash", {"command": "grep -n foo a.py"}, no_match)
    assert (attempt.outcome, sig) == ("uncertain", None)
    tests = ToolResult(
        "F..\n== 1 failed, 2 passed in 0.1s ==\n[exit code: 1]",
        outcome="fail",
        meta={"exit_code": 1},
    )
    attempt, _ = build_attempt(2, "bash", {"command": "pytest -q"}, tests)
    assert attempt.outcome == "partial"
    shown = ToolResult("x = 1\n[exit code: 0]", outcome="pass", meta={"exit_code": 0})
    attempt, sig = build_attempt(3, "bash", {"command": "cat a.py"}, shown)
    assert (attempt.outcome, sig) == ("uncertain", None)
    silent = ToolResult("(no output)\n[exit code: 3]", outcome="fail", meta={"exit_code": 3})
    attempt, sig = build_attempt(4, "bash", {"command": "./check.sh"}, silent)
    assert (attempt.outcome, sig.type, sig.symbol, sig.message) == (
        "fail",
        "exit 3",
        "check.sh",
        "",
    )
    # the footer's number is not part of the message: exit 2 and exit 3 of one script differ by type
    assert fingerprint("boom\n[exit code: 2]") != fingerprint("boom\n[exit code: 3]")
    assert fingerprint("boom\n[exit code: 2]") == fingerprint("<returncode>2</returncode>\nboom")


def test_reading_an_error_is_not_making_one() -> None:
    """A successful read-only action that shows a traceback (a log, a docstring) gets no
    fingerprint; the same text from running a script does."""
    log = TRACEBACK.replace("<returncode>1</returncode>", "<returncode>0</returncode>")
    shown, sig = build_attempt(1, "bash", {"command": "cat logs/run.log"}, ToolResult(log))
    assert (shown.outcome, shown.fingerprint, sig) == ("uncertain", None, None)
    ran, sig = build_attempt(2, "bash", {"command": "python repro.py"}, ToolResult(log))
    assert (ran.outcome, ran.fingerprint) == ("fail", fingerprint(log))
    read, sig = build_attempt(3, "read", {"path": "log.txt"}, ToolResult(log))
    assert (read.outcome, read.fingerprint) == ("uncertain", None)
