"""Every SQL statement veil runs is in the storage layer (issue 20): the core's, ``veil/core/store/``,
or a plugin's table module, one that declares the plugin's own tables with ``veil.Migration``
(issue 33: each plugin owns its tables and migrations, run by the store through the
``register_migrations`` hook).

Read from the source with :mod:`ast`, so prose in docstrings and comments does not count: a
string that starts like a SQL statement, or a call of ``execute`` / ``executemany`` /
``executescript``, anywhere else in veil or in a plugin's package is named with its file and
line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "veil" / "core" / "store"
SQL_START = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK"
    r"|ATTACH|DETACH|VACUUM)\s",
)
EXECUTE = frozenset({"execute", "executemany", "executescript"})


def _declares_tables(path: Path) -> bool:
    """Whether the module builds a ``Migration`` (a plugin's table module: its DDL and the
    statements on those tables live there, beside the migration that creates them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "Migration"
        for node in ast.walk(tree)
    )


def _sources() -> list[Path]:
    files = [p for p in (ROOT / "veil").rglob("*.py") if STORE not in p.parents]
    for plugin in (ROOT / "plugins").iterdir():
        for package in plugin.glob("veil_*"):
            if package.is_dir():
                files.extend(package.rglob("*.py"))
    return sorted(p for p in files if not _declares_tables(p))


def _sql_outside_store(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values:  # f-string: its first literal part
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
        if text is not None and SQL_START.match(text):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text.strip()[:60]!r}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EXECUTE
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.func.attr}(...)")
    return found


def test_the_scan_sees_the_statements_of_the_store_itself():
    # the check must be able to fail: run on the store's own modules it finds their statements
    found = [hit for p in sorted(STORE.glob("*.py")) for hit in _sql_outside_store(p)]
    assert any("context_db.py" in hit and "INSERT INTO events" in hit for hit in found)
    assert any("recall_tables.py" in hit and ".executemany(...)" in hit for hit in found)


def test_the_plugins_table_modules_are_the_ones_left_out():
    # by hand: the beliefs and doctor plugins declare their tables (issue 33), nothing else does
    veil = ROOT / "veil"
    declared = sorted(
        str(p.relative_to(ROOT))
        for p in veil.rglob("*.py")
        if STORE not in p.parents
        if _declares_tables(p)
    )
    assert declared == [
        "veil/default_plugins/beliefs/tables.py",
        "veil/default_plugins/doctor/quarantine.py",
    ]
    assert _sql_outside_store(veil / "default_plugins" / "doctor" / "quarantine.py")


def test_no_sql_outside_the_storage_layer():
    files = _sources()
    assert len(files) > 50  # veil and the plugins' packages were found
    found = [hit for path in files for hit in _sql_outside_store(path)]
    assert found == []
