"""Error fingerprints: the hand-labelled real pairs, an ablation, and synthetic drift cases.

error_pairs.json holds excerpts of real observations from ../shared/data/trajectories (copied,
so these tests run without the data), labelled same/different by reading them (make_pairs.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from veil_convergence.fingerprint import (
    error_signature,
    fingerprint,
    normalise,
    parse_error,
    short_path,
)

PAIRS = json.loads((Path(__file__).with_name("error_pairs.json")).read_text(encoding="utf-8"))


# -- the labelled pairs ----------------------------------------------------------------------


def test_pair_set_is_large_and_balanced() -> None:
    assert len(PAIRS) >= 30
    same = [p for p in PAIRS if p["same"]]
    different = [p for p in PAIRS if not p["same"]]
    assert len(same) >= 10 and len(different) >= 10
    for pair in PAIRS:
        assert set(pair) == {"a", "b", "same", "source", "why"}
        assert pair["a"].strip() and pair["b"].strip() and pair["why"].strip()
        assert re.fullmatch(r"\S+#\d+ \| \S+#\d+", pair["source"]), pair["source"]


@pytest.mark.parametrize("pair", PAIRS, ids=[p["source"].split("/")[-1] for p in PAIRS])
def test_pair_labelled_correctly(pair: dict) -> None:
    fa, fb = fingerprint(pair["a"]), fingerprint(pair["b"])
    assert fa is not None and fb is not None, "both excerpts hold an error"
    detail = f"{pair['why']}\n a: {error_signature(pair['a'])}\n b: {error_signature(pair['b'])}"
    assert (fa == fb) == pair["same"], detail


_NAIVE_TYPE = re.compile(r"\b((?:[A-Z]\w*)(?:Error|Exception))\b")


def _naive_type(text: str) -> str:
    """The last exception class name in the text, found by a regex independent of the reader."""
    found = _NAIVE_TYPE.findall(text)
    return found[-1] if found else "<none>"


def test_exception_type_alone_fails_the_pairs() -> None:
    """Ablation: a fingerprint made of the exception type alone mislabels pairs, with the type
    taken either from the reader or from a naive regex over the raw text."""
    by_reader = [
        p for p in PAIRS if (parse_error(p["a"]).type == parse_error(p["b"]).type) != p["same"]
    ]
    by_regex = [p for p in PAIRS if (_naive_type(p["a"]) == _naive_type(p["b"])) != p["same"]]
    assert len(by_reader) >= 1 and len(by_regex) >= 1
    # the "different" pairs with one shared type are what defeats it; there are many
    assert len([p for p in by_reader if not p["same"]]) >= 10


def test_type_and_message_without_location_fail_the_pairs() -> None:
    """Ablation: dropping the location (np.Inf fixed in one file then raised in the next, the
    same IndentationError in two files) mislabels pairs too."""

    def key(text: str) -> tuple[str, str, str]:
        sig = parse_error(text)
        return (sig.type, sig.symbol, sig.message)

    wrong = [p for p in PAIRS if (key(p["a"]) == key(p["b"])) != p["same"]]
    assert any("np.Inf" in p["why"] for p in wrong)
    assert any("IndentationError" in p["why"] for p in wrong)


# -- synthetic drift cases, expectations written by hand ----------------------------------------

TB_NUMPY = """Traceback (most recent call last):
  File "/home/alice/proj/repro.py", line {line}, in <module>
    import pvlib
  File "/home/alice/proj/pvlib/tools.py", line 6, in <module>
    import numpy as np
ModuleNotFoundError: No module named '{module}'
"""


def test_missing_module_signature_and_digest() -> None:
    sig = error_signature(TB_NUMPY.format(line=1, module="numpy"))
    key = json.dumps(["ModuleNotFoundError", "numpy", "", ""])
    digest = hashlib.blake2b(key.encode(), digest_size=6).hexdigest()
    assert sig == {
        "kind": "traceback",
        "type": "ModuleNotFoundError",
        "symbol": "numpy",
        "location": "",
        "message": "",
        "label": "ModuleNotFoundError: numpy",
        "fingerprint": digest,
    }
    assert re.fullmatch(r"[0-9a-f]{12}", digest)


def test_missing_module_drift_and_difference() -> None:
    base = fingerprint(TB_NUMPY.format(line=1, module="numpy"))
    moved = TB_NUMPY.format(line=14, module="numpy").replace("/home/alice/proj", "/srv/ci/b42")
    assert fingerprint(moved) == base
    assert fingerprint(TB_NUMPY.format(line=1, module="scipy")) != base


TB_ATTR = """Test directory: {tmp}
Traceback (most recent call last):
  File "{root}/run.py", line {l1}, in <module>
    main()
  File "{root}/pkg/schema.py", line {l2}, in validate
    value = data[name]
  File "/usr/lib/python3.11/site-packages/attr/_make.py", line 88, in __getitem__
    raise KeyError(key)
KeyError: 'payload'
at 0x{addr} started {stamp} took {secs}s
"""


def test_traceback_drift_keeps_type_symbol_and_project_frame() -> None:
    a = TB_ATTR.format(
        tmp="/tmp/tmpab12cd34",
        root="/testbed",
        l1=3,
        l2=120,
        addr="7f3a9c",
        stamp="2024-01-02 10:11:12",
        secs="0.12",
    )
    b = TB_ATTR.format(
        tmp="/tmp/tmpzz99yy88",
        root="/work/x",
        l1=30,
        l2=131,
        addr="55aa01",
        stamp="2025-06-30T23:59:01",
        secs="9.5",
    )
    sa, sb = parse_error(a), parse_error(b)
    assert (sa.type, sa.symbol, sa.location) == ("KeyError", "payload", "pkg/schema.py:validate")
    assert sa.fingerprint == sb.fingerprint
    other_key = a.replace("KeyError: 'payload'", "KeyError: 'headers'")
    assert fingerprint(other_key) != sa.fingerprint
    other_func = a.replace("in validate", "in load")
    assert fingerprint(other_func) != sa.fingerprint


PYTEST_RUN = """============================= test session starts ==============================
collected {n} items

tests/test_calc.py ..F{dots}                                                  [100%]

=================================== FAILURES ===================================
__________________________________ test_total __________________________________

    def test_total():
>       assert total([1, 2]) == {want}
E       assert {got} == {want}

tests/test_calc.py:{line}: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_total - assert {got} == {want}
========================= 1 failed, {passed} passed in {secs}s =========================
"""


def test_pytest_counts_values_and_durations_drift() -> None:
    a = PYTEST_RUN.format(n=3, dots="", want=3, got=4, line=7, passed=2, secs="0.12")
    b = PYTEST_RUN.format(n=9, dots="......", want=3, got=5, line=9, passed=8, secs="3.40")
    sig = parse_error(a)
    assert (sig.kind, sig.type, sig.symbol) == (
        "pytest",
        "AssertionError",
        "tests/test_calc.py::test_total",
    )
    assert sig.message == "tests/test_calc.py::test_total: AssertionError"
    assert fingerprint(b) == sig.fingerprint
    renamed = a.replace("test_total", "test_mean")
    assert fingerprint(renamed) != sig.fingerprint


def test_pytest_several_failures_sorted() -> None:
    out = (
        "FAILED tests/b.py::test_y - KeyError: 'k'\n"
        "FAILED tests/a.py::test_x[1-2] - ValueError: bad\n"
        "==== 2 failed, 1 passed in 0.3s ====\n"
    )
    sig = parse_error(out)
    assert sig.type == "KeyError/ValueError"
    assert sig.symbol == "tests/a.py::test_x[1-2] tests/b.py::test_y"
    swapped = (
        "FAILED tests/a.py::test_x[1-2] - ValueError: other\n"
        "FAILED tests/b.py::test_y - KeyError: 'z'\n"
    )
    assert fingerprint(swapped) == sig.fingerprint


SYNTAX = """  File "{path}", line {line}
    if n_ar is None or np.allclose(n_ar, n1):
IndentationError: unexpected indent
"""


def test_syntax_error_location_is_the_file_without_line() -> None:
    a = parse_error(SYNTAX.format(path="/testbed/pvlib/iam.py", line=179))
    assert (a.kind, a.type, a.location, a.message) == (
        "syntax",
        "IndentationError",
        "pvlib/iam.py",
        "unexpected indent",
    )
    assert fingerprint(SYNTAX.format(path="/other/pvlib/iam.py", line=201)) == a.fingerprint
    assert fingerprint(SYNTAX.format(path="/testbed/pvlib/tools.py", line=179)) != a.fingerprint


def test_assertion_with_values_keeps_the_assert_line() -> None:
    tb = """Traceback (most recent call last):
  File "/testbed/check.py", line {line}, in <module>
    assert abs(x - 5.0) < 1e-3, f"got {{x}}"
AssertionError: got {value}
"""
    a = parse_error(tb.format(line=12, value="4.999999964644903"))
    assert a.type == "AssertionError"
    assert a.symbol == 'assert abs(x - <N>) < <N>, f"got {x}"'
    assert a.message == "got <N>"
    assert fingerprint(tb.format(line=40, value="5.25")) == a.fingerprint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bash: line 1: tree: command not found\n", ("command not found", "tree", "")),
        ("sh: 1: rg: not found\n", ("command not found", "rg", "")),
        ("/opt/conda/bin/python: No module named pytest\n", ("ModuleNotFoundError", "pytest", "")),
        (
            "cat: missing.txt: No such file or directory\n",
            ("FileNotFoundError", "missing.txt", "cat"),
        ),
        (
            "python: can't open file '/testbed/x/run.py': [Errno 2] No such file or directory\n",
            ("FileNotFoundError", "x/run.py", "python"),
        ),
        ("error: patch failed: src/a.py:211\n", ("error", "", "")),
    ],
)
def test_shell_errors(text: str, expected: tuple[str, str, str]) -> None:
    sig = parse_error(text)
    assert (sig.type, sig.symbol, sig.location) == expected


def test_shell_error_message_drops_line_numbers() -> None:
    assert parse_error("error: patch failed: src/a.py:211\n").message == "patch failed: src/a.py"
    assert fingerprint("error: patch failed: src/a.py:210\n") == fingerprint(
        "error: patch failed: src/a.py:211\n"
    )


def test_non_zero_exit_fallback_and_grep_no_match() -> None:
    out = "<returncode>2</returncode>\n<output>\nmake: *** [all] Error 2\n</output>"
    sig = parse_error(out, command="make all")
    assert (sig.kind, sig.type, sig.symbol, sig.message) == (
        "exit",
        "exit 2",
        "make",
        "make: *** [all] Error <N>",
    )
    empty = "<returncode>1</returncode>\n<output>\n</output>"
    assert fingerprint(empty, command="grep -n foo src/x.py") is None
    assert fingerprint(empty, command="cd /t && grep -rn 'a|b' src") is None
    assert parse_error(empty, command="./build.sh").type == "exit 1"
    assert fingerprint("done\n", exit_code=3) == fingerprint("done\n", exit_code=3, command=None)
    assert fingerprint("done\n", exit_code=0) is None


@pytest.mark.parametrize(
    "text",
    [
        "<returncode>0</returncode>\n<output>\n3 passed in 0.02s\n</output>",
        "total 8\n-rw-r--r-- 1 root root 10 Jan  1 00:00 a.py\n",
        "120:        raise ValueError(\n121:            'bad value'\n",
        "    except ValueError:\n        pass\n",
        'print(f"Error: TypeError: {e}")\n',
        "Error (as expected): TypeError: Could not convert value\n",
        "<returncode>-1</returncode>\nServing HTTP on 0.0.0.0 port 8000 ...\n"
        "[The command has no new output after 30 seconds.]",
        "",
    ],
)
def test_no_error(text: str) -> None:
    assert fingerprint(text) is None
    assert error_signature(text) == {}


def test_printed_exception_and_timeout() -> None:
    sig = parse_error("Test 5\nError: TypeError: 'NoneType' object is not subscriptable\n")
    assert (sig.kind, sig.type, sig.symbol) == ("printed", "TypeError", "NoneType")
    out = (
        "<exception>An error occurred while executing the command: Command '['docker', 'exec', "
        "'4b25f731ca266ab0d8b3ff5c33bb96723739770f9fba9db13cbb134192ae6572', 'bash', '-c', "
        "'pytest tests -x | tail -50']' timed out after 60 seconds</exception>\n"
        "<returncode>-1</returncode>"
    )
    sig = parse_error(out)
    assert (sig.type, sig.symbol) == ("Timeout", "pytest tests -x | tail <N>")


def test_chained_traceback_uses_the_last_exception() -> None:
    out = """Traceback (most recent call last):
  File "/t/a.py", line 3, in f
    open(p)
IsADirectoryError: [Errno 21] Is a directory: '/tmp/tmpm1koinh9/src/project'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/t/b.py", line 9, in build
    raise AstroidBuildingError(msg)
astroid.exceptions.AstroidBuildingError: Unable to load file /tmp/tmpm1koinh9/src/project:
"""
    sig = parse_error(out)
    assert (sig.type, sig.location, sig.message) == (
        "AstroidBuildingError",
        "t/b.py:build",
        "Unable to load file <tmp>/src/project:",
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/opt/conda/lib/python3.11/site-packages/numpy/__init__.py", "numpy/__init__.py"),
        ("/usr/lib/python3.11/inspect.py", "inspect.py"),
        ("/testbed/pvlib/tools.py", "pvlib/tools.py"),
        ("/tmp/tmpab12cd34/src/x.py", "src/x.py"),
        ("/tmp/pytest-of-root/pytest-3/test_a0/out.txt", "out.txt"),
        ("<string>", "<string>"),
        ("C:\\Users\\me\\proj\\pkg\\mod.py", "pkg/mod.py"),
    ],
)
def test_short_path(raw: str, expected: str) -> None:
    assert short_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Unable to load file /tmp/tmpm1koinh9/src/project at 0x7f3a (took 0.12s)",
         "Unable to load file <tmp>/src/project at 0x? (took <dur>)"),
        ("at 2019-01-01T09:00:00.000000 and 15:27:29,744", "at <time> and <time>"),
        ("3 failed, 2 passed in 0.12s", "<N> failed, <N> passed in <dur>"),
        ("container 4b25f731ca266ab0d8b3ff5c33bb96723739770f9fba9db13cbb134192ae6572 gone",
         "container <hex> gone"),
        ("id 123e4567-e89b-12d3-a456-426614174000", "id <uuid>"),
        ("see helpers.py:30:4 and line 7", "see helpers.py and line <N>"),
        ("import h5py and np.Inf in NumPy 2.0", "import h5py and np.Inf in NumPy <N>"),
        ("tmp__qof9bn/\n  src/", "<tmp>/ src/"),
    ],
)  # fmt: skip
def test_normalise(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


def test_lint_block_names_file_and_error() -> None:
    out = """Your proposed edit has introduced new syntax error(s).

ERRORS:
- E999 SyntaxError: unmatched ']'

This is how your edit would have looked if applied
-------------------------------------------------
[File: /repo/pkg/handler.py (373 lines total)]
"""
    sig = parse_error(out)
    assert (sig.kind, sig.type, sig.location, sig.message) == (
        "lint",
        "SyntaxError",
        "pkg/handler.py",
        "E999 SyntaxError: unmatched ']'",
    )
    assert fingerprint(out.replace("373 lines", "374 lines")) == sig.fingerprint
