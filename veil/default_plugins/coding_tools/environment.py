"""The environment the ``bash`` tool's commands run in: the user's, not veil's.

veil is a Python program in a virtual environment of its own (``pipx install``, ``uv tool
install``, or the venv of a development checkout). When that environment is active in the shell
veil started from (``. veil/.venv/bin/activate``, as the development route does), its ``bin``
folder heads ``PATH`` and ``VIRTUAL_ENV`` names it, so the agent's ``python -m pytest`` ran
veil's Python, without the project's packages ("No module named pytest", issue 30). A user
expects the commands to run as they would in their own shell in the project, so:

1. **veil's own environment leaves**: when veil runs from a virtual environment that is not
   the project's own (``sys.prefix`` is not inside the project), its ``bin`` (``Scripts`` on
   Windows) is taken out of ``PATH`` and ``VIRTUAL_ENV`` / ``VIRTUAL_ENV_PROMPT`` are unset
   when they name it.
2. **the project's ``.venv`` comes in**: when no other virtual environment is active then and
   the project root holds ``.venv/pyvenv.cfg`` (the folder ``uv``, ``python -m venv .venv``,
   Poetry's in-project setting and the editors create), it is activated for the commands as its
   ``activate`` script would: its ``bin`` first on ``PATH``, ``VIRTUAL_ENV`` set. A virtual
   environment the user activated themselves (``VIRTUAL_ENV`` naming another one) is kept.

Nothing else changes: conda's variables, ``PYTHONPATH`` and the rest pass as they are.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

PROJECT_VENV = ".venv"
"""The project's virtual environment, relative to its root."""

_BIN = "Scripts" if os.name == "nt" else "bin"


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (OSError, ValueError):
        return False
    return True


def own_environment() -> Path | None:
    """The virtual environment veil runs from (``sys.prefix`` when it differs from
    ``sys.base_prefix``, PEP 405), or None when veil runs from a base interpreter."""
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return None
    return Path(sys.prefix)


def project_venv(project: Path) -> Path | None:
    """The project's own virtual environment, ``<project>/.venv`` holding ``pyvenv.cfg`` and
    a ``bin`` folder, or None."""
    venv = project / PROJECT_VENV
    if (venv / "pyvenv.cfg").is_file() and (venv / _BIN).is_dir():
        return venv
    return None


def tool_environment(
    base: Mapping[str, str], project: Path | None, own: Path | None = None
) -> dict[str, str]:
    """``base`` (the process's environment) as the ``bash`` tool's commands get it (the module
    docstring).

    Args:
        base: the variables to start from.
        project: the project root (None: no project ``.venv`` is looked for, and veil's
            environment always counts as not the project's).
        own: veil's virtual environment (default :func:`own_environment`).

    Returns:
        A new dict; ``base`` is not changed.
    """
    env = dict(base)
    own = own_environment() if own is None else own
    if own is not None and not (project is not None and _inside(own, project)):
        own_bin = own / _BIN
        parts = env.get("PATH", "").split(os.pathsep)
        kept = [p for p in parts if p and not _same(p, own_bin)]
        env["PATH"] = os.pathsep.join(kept)
        active = env.get("VIRTUAL_ENV")
        if active and _same(active, own):
            env.pop("VIRTUAL_ENV", None)
            env.pop("VIRTUAL_ENV_PROMPT", None)
    venv = project_venv(project) if project is not None else None
    if venv is not None and not env.get("VIRTUAL_ENV"):
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join(p for p in (str(venv / _BIN), env.get("PATH", "")) if p)
        env.pop("PYTHONHOME", None)  # as the activate script does
    return env
