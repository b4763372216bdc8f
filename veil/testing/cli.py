"""Running the ``veil`` command line in a real subprocess, with plugins installed only for it.

What a plugin author needs to test what crosses the CLI (an error message, an exit code, a
command the plugin adds): :func:`install_fake_plugin` makes a plugin module importable and
visible to veil's entry-point scan from a folder of its own, without touching the environment's
site-packages, and :func:`run_veil` runs ``python -m veil.cli --project PROJECT ARGS`` with that
folder on ``PYTHONPATH``, a private ``VEIL_HOME`` and no ``VEIL_*`` variable of the caller.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def install_fake_plugin(site: Path, name: str, source: str) -> None:
    """Write plugin module ``name`` (its ``source``) into ``site`` with a ``*.dist-info`` whose
    ``entry_points.txt`` names it in the ``veil`` group, as pip would for an installed
    distribution ``name`` 0.1.

    Raises:
        FileExistsError: ``name`` is already installed in ``site``.
    """
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[veil]\n{name} = {name}\n")
    (site / f"{name}.py").write_text(source)


def run_veil(
    project: Path,
    *args: str,
    home: Path,
    site: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``veil --project PROJECT ARGS`` in a subprocess and return it finished (text
    output captured, stdin closed).

    Args:
        project: the project folder.
        args: the command line after ``--project``.
        home: ``VEIL_HOME`` for the run (the user's auth.json and settings live there).
        site: a folder of :func:`install_fake_plugin` plugins, put first on ``PYTHONPATH``.
        cwd: the working directory (default: ``project``).
        env: variables added last (``VEIL_*`` settings, ``VEIL_DEBUG``...); the caller's own
            ``VEIL_*`` variables are left out so they cannot change the result.
        timeout: seconds before :class:`subprocess.TimeoutExpired`.
    """
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    paths = (str(site) if site else None, os.environ.get("PYTHONPATH"))
    clean.update(
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
        VEIL_HOME=str(home),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        **(env or {}),
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or project,
        stdin=subprocess.DEVNULL,
    )
