"""The ``bash`` tool runs in the user's environment: without veil's own virtual environment,
with the project's ``.venv`` (veil.default_plugins.coding_tools.environment, issue 30)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from veil.default_plugins.coding_tools.environment import tool_environment

BIN = "Scripts" if os.name == "nt" else "bin"


def _venv(folder: Path) -> Path:
    """A folder that looks like a virtual environment (``pyvenv.cfg`` and ``bin``)."""
    (folder / BIN).mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return folder


def test_veils_own_environment_leaves_path_and_virtual_env(tmp_path):
    own = _venv(tmp_path / "tools" / "veil")
    project = tmp_path / "project"
    project.mkdir()
    path = os.pathsep.join([str(own / BIN), "/usr/local/bin", "/usr/bin"])
    base = {"PATH": path, "VIRTUAL_ENV": str(own), "VIRTUAL_ENV_PROMPT": "veil", "HOME": "/h"}
    env = tool_environment(base, project, own=own)
    assert env == {"PATH": os.pathsep.join(["/usr/local/bin", "/usr/bin"]), "HOME": "/h"}
    assert base["VIRTUAL_ENV"] == str(own)  # the process's own environment is not changed


def test_the_projects_venv_is_activated_when_no_other_one_is(tmp_path):
    own = _venv(tmp_path / "tools" / "veil")
    project = tmp_path / "project"
    venv = _venv(project / ".venv")
    base = {"PATH": os.pathsep.join([str(own / BIN), "/usr/bin"]), "VIRTUAL_ENV": str(own)}
    env = tool_environment(base, project, own=own)
    assert env == {"PATH": os.pathsep.join([str(venv / BIN), "/usr/bin"]), "VIRTUAL_ENV": str(venv)}
    # veil installed as a tool (pipx): nothing of it is on PATH, and the project's venv comes in
    env = tool_environment({"PATH": "/usr/bin", "PYTHONHOME": "/x"}, project, own=own)
    assert env == {"PATH": os.pathsep.join([str(venv / BIN), "/usr/bin"]), "VIRTUAL_ENV": str(venv)}


def test_a_virtual_environment_the_user_activated_is_kept(tmp_path):
    own = _venv(tmp_path / "tools" / "veil")
    theirs = _venv(tmp_path / "elsewhere" / "env")
    project = tmp_path / "project"
    _venv(project / ".venv")
    base = {"PATH": os.pathsep.join([str(theirs / BIN), "/usr/bin"]), "VIRTUAL_ENV": str(theirs)}
    assert tool_environment(base, project, own=own) == base


def test_veil_running_from_the_projects_own_venv_changes_nothing(tmp_path):
    project = tmp_path / "project"
    venv = _venv(project / ".venv")
    base = {"PATH": os.pathsep.join([str(venv / BIN), "/usr/bin"]), "VIRTUAL_ENV": str(venv)}
    assert tool_environment(base, project, own=venv) == base


def test_a_folder_without_pyvenv_cfg_is_not_a_venv(tmp_path):
    project = tmp_path / "project"
    (project / ".venv" / BIN).mkdir(parents=True)  # no pyvenv.cfg: not a virtual environment
    assert tool_environment({"PATH": "/usr/bin"}, project, own=None) == {"PATH": "/usr/bin"}


def _link_distribution(name: str, site: Path, done: set[str]) -> None:
    """Link the installed distribution ``name`` and those it requires (their markers as this
    interpreter reads them) into ``site``, by their top-level modules."""
    from packaging.requirements import Requirement

    key = name.lower().replace("_", "-")
    if key in done:
        return
    done.add(key)
    dist = importlib.metadata.distribution(name)
    installed = Path(sysconfig.get_paths()["purelib"])
    tops = {
        Path(str(f)).parts[0]
        for f in dist.files or ()
        if not str(f).startswith("..") and ".dist-info" not in str(f)
    } - {"__pycache__"}
    for top in tops:
        source = installed / top
        if source.exists() and not (site / top).exists():
            (site / top).symlink_to(source, target_is_directory=source.is_dir())
    for text in dist.requires or ():
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            _link_distribution(requirement.name, site, done)


def _project_venv_with_pytest(project: Path) -> Path:
    """``<project>/.venv``, a real virtual environment whose Python imports pytest: the
    installed pytest and the distributions it needs are linked into its site-packages (no
    network, no pip)."""
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / BIN / ("python.exe" if os.name == "nt" else "python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    _link_distribution("pytest", Path(site), set())
    return venv


def test_the_agents_bash_runs_the_projects_pytest(make_veil, veil_project, monkeypatch):
    """veil started from its own activated venv (the development route) in a project whose
    own .venv holds pytest: the agent's `python -m pytest` runs in the project's .venv."""
    venv = _project_venv_with_pytest(veil_project)
    (veil_project / "test_add.py").write_text("def test_add():\n    assert 1 + 1 == 2\n")
    own = Path(sys.prefix)
    if own == Path(sys.base_prefix):
        pytest.skip("the tests do not run from a virtual environment")
    monkeypatch.setenv("VIRTUAL_ENV", str(own))
    monkeypatch.setenv("PATH", os.pathsep.join([str(own / BIN), os.environ.get("PATH", "")]))
    command = "python -c 'import sys; print(sys.prefix)' && python -m pytest -q -p no:cacheprovider"
    monkeypatch.setenv("VEIL_PERMISSIONS__MODE", "allow")  # as --yes: nobody to ask here
    veil = make_veil(
        [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, "done"]
    )
    session = veil.new_session()
    assert veil.run_turn(session, "run the tests").status == "done"
    output = next(m["content"] for m in session.messages if m["role"] == "tool")
    first_line = output.splitlines()[0]
    assert Path(first_line).resolve() == venv.resolve(), output
    assert "1 passed" in output, output
