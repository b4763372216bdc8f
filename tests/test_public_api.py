"""Plugins import only veil's public API (issue 33): ``veil``, ``veil.hookspecs`` and
``veil.testing``; every name ``veil`` exports resolves and says what it is.

The plugin modules are read with :mod:`ast` (the same files ``tests/test_session_api.py`` holds
to :class:`~veil.core.session_api.PluginSession`, the replay's turn driver included), so an
import hidden in a function or under ``TYPE_CHECKING`` counts as much as one at the top.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import subprocess
import sys
import types
from pathlib import Path

import veil
from tests.test_session_api import ROOT, TURN_DRIVERS, plugin_sources

PUBLIC_MODULES = ("veil", "veil.hookspecs", "veil.testing")
"""What a plugin module may import of veil (``veil.testing``'s submodules too)."""


def _allowed(module: str, path: Path) -> bool:
    """Whether a plugin module at ``path`` may import ``module`` (a veil module)."""
    if module in PUBLIC_MODULES or module.startswith("veil.testing."):
        return True
    # a default plugin imports its own package and its siblings (they ship inside veil)
    in_default_plugins = path.relative_to(ROOT).parts[:2] == ("veil", "default_plugins")
    return in_default_plugins and (
        module == "veil.default_plugins" or module.startswith("veil.default_plugins.")
    )


def private_imports(source: str, path: Path) -> list[str]:
    """``"file:line module[.name]"`` for every import in ``source`` of a veil module outside
    the public API, and every ``from veil import NAME`` of a name ``veil`` does not export."""
    found: list[str] = []
    where = path.relative_to(ROOT).as_posix()
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                if (name == "veil" or name.startswith("veil.")) and not _allowed(name, path):
                    found.append(f"{where}:{node.lineno} import {name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if not (module == "veil" or module.startswith("veil.")):
                continue
            if not _allowed(module, path):
                found.append(f"{where}:{node.lineno} from {module} import ...")
            elif module == "veil":
                found += [
                    f"{where}:{node.lineno} from veil import {alias.name} (not in veil.__all__)"
                    for alias in node.names
                    if alias.name not in veil.__all__
                ]
    return found


def every_plugin_module() -> list[Path]:
    """The plugin modules, the turn drivers included (they drive a session like a front end,
    but import the public API like every other plugin)."""
    return plugin_sources() + [ROOT / path for path in sorted(TURN_DRIVERS)]


def test_private_imports_are_found() -> None:
    # the checker itself, on sources written here: each kind of forbidden import is named
    path = ROOT / "plugins" / "veil_example" / "veil_example" / "mod.py"
    source = (
        "import veil\n"
        "import veil.core.app\n"
        "from veil import ContextItem, hookimpl\n"
        "from veil import core\n"
        "from veil.hookspecs import hookimpl\n"
        "from veil.testing.scripted_server import Reply\n"
        "def f():\n"
        "    from veil.core.types import Tool\n"
        "    from veil.cli import main\n"
        "    from veil.default_plugins.recall import search\n"
    )
    assert private_imports(source, path) == [
        "plugins/veil_example/veil_example/mod.py:2 import veil.core.app",
        "plugins/veil_example/veil_example/mod.py:4 from veil import core (not in veil.__all__)",
        "plugins/veil_example/veil_example/mod.py:8 from veil.core.types import ...",
        "plugins/veil_example/veil_example/mod.py:9 from veil.cli import ...",
        "plugins/veil_example/veil_example/mod.py:10 from veil.default_plugins.recall import ...",
    ]
    # a default plugin may import its own package
    default = ROOT / "veil" / "default_plugins" / "recall" / "mod.py"
    assert private_imports("from veil.default_plugins.recall import search\n", default) == []


def test_plugins_import_only_the_public_api() -> None:
    sources = every_plugin_module()
    assert len(sources) > 100  # the walk found the plugins (not an empty glob)
    found = [
        place
        for path in sources
        for place in private_imports(path.read_text(encoding="utf-8"), path)
    ]
    assert found == [], "plugins import veil's internals:\n" + "\n".join(found)


def _attribute_docstring(module_name: str, attribute: str) -> str | None:
    """The string literal right after ``attribute``'s assignment at the top of the module
    (the attribute docstring Sphinx and mkdocstrings read), or None."""
    module = importlib.import_module(module_name)
    tree = ast.parse(inspect.getsource(module))
    body = tree.body
    for index, node in enumerate(body[:-1]):
        targets = (
            [node.target]
            if isinstance(node, ast.AnnAssign)
            else node.targets
            if isinstance(node, ast.Assign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
            following = body[index + 1]
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                return following.value.value
            return None
    return None


def _own_docstring(value: object) -> str | None:
    """The docstring ``value`` was written with (not one inherited or generated)."""
    if isinstance(value, type):
        doc = vars(value).get("__doc__")
        if doc and dataclasses.is_dataclass(value) and doc.startswith(f"{value.__name__}("):
            return None  # the signature @dataclass puts there when the class has no docstring
        return doc
    return getattr(value, "__doc__", None)


def undocumented_exports() -> list[str]:
    """Names in ``veil.__all__`` without a docstring of their own."""
    missing = []
    for name in veil.__all__:
        if name == "__version__":
            continue
        value = getattr(veil, name)
        if isinstance(value, (type, types.FunctionType, types.ModuleType)):
            doc = _own_docstring(value)
        else:  # a constant, a type alias, a marker: its attribute docstring
            module_name, attribute = veil._EXPORTS.get(name, ("veil.hookspecs", name))
            doc = _attribute_docstring(module_name, attribute or name)
        if not (doc and doc.strip()):
            missing.append(name)
    return missing


def test_every_export_resolves_and_is_documented() -> None:
    for name in veil.__all__:
        assert getattr(veil, name) is not None, name
    assert undocumented_exports() == []


def test_all_the_lazy_map_and_the_type_checking_imports_agree() -> None:
    assert set(veil.__all__) == {"__version__", "hookimpl", *veil._EXPORTS}
    assert len(veil.__all__) == len(set(veil.__all__))
    # what type checkers and the API reference see is what __getattr__ returns
    tree = ast.parse((ROOT / "veil" / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    seen = {}
    for node in guarded.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        module = importlib.import_module(node.module)
        for alias in node.names:
            value = (
                getattr(module, alias.name)
                if hasattr(module, alias.name)
                else importlib.import_module(f"{node.module}.{alias.name}")
            )
            seen[alias.asname or alias.name] = value
    assert set(seen) == set(veil._EXPORTS)
    assert [name for name, value in seen.items() if value is not getattr(veil, name)] == []


def test_unknown_names_raise_attribute_error() -> None:
    try:
        veil.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("veil.no_such_name resolved")


def test_import_veil_loads_no_core_module() -> None:
    # `veil --help` imports veil; the exports wait for their first use (issue 30)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, veil; print(sorted(m for m in sys.modules if m.startswith('veil')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "['veil', 'veil.hookspecs']"
