"""No string contract between the core and the plugins (issue 33): the core matches no text a
plugin writes (a masked result is reported by position, a pass's moves are counted), and a
plugin finds redaction placeholders with the exported pattern, not a literal of its own."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_public_api import ROOT, every_plugin_module


def code_strings(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal in ``path`` that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            # a docstring, and an attribute docstring after an assignment
            for statement in node.body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    docstrings.add(id(statement.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_code_strings_leave_docstrings_out(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""doc [x]"""\nX = "[x]"\n"""about X [x]"""\ndef f():\n    """[x]"""\n')
    assert code_strings(module) == [(2, "[x]")]


def test_the_core_matches_no_mask_text() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "veil" / "core").rglob("*.py"))
        for line, text in code_strings(path)
        if "observation masked" in text
    ]
    assert found == []


def test_plugins_find_placeholders_with_the_exported_pattern() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {text!r}"
        for path in every_plugin_module()
        for line, text in code_strings(path)
        if "[redacted" in text
    ]
    assert found == []
