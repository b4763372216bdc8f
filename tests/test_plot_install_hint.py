"""When a plot is asked for and matplotlib is missing, the message says how to add it to the
environment veil runs from (issue 30): ``pipx inject veil matplotlib`` in a pipx install,
``uv tool install ... --with matplotlib`` in a uv tool install, pip in a venv. The real
``veil replay --plot`` in a subprocess, run by the Python of an environment that carries each
tool's marker file (pipx's ``pipx_metadata.json``, uv's ``uv-receipt.toml``) and sees this
checkout's packages; matplotlib is hidden by a package of that name that fails to import."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import two_step_recording


def _environment(root: Path, marker: str | None, content: str = "") -> Path:
    """A venv at ``root`` (no pip) that sees this interpreter's packages; its python."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    # an "import" line of a .pth file runs: addsitedir also reads our editable installs' .pth
    Path(site, "veil_test_parent.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    if marker:
        (root / marker).write_text(content)
    return python


def _plot(python: Path, project: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    hidden = tmp_path / "hidden"
    (hidden / "matplotlib").mkdir(parents=True, exist_ok=True)
    (hidden / "matplotlib" / "__init__.py").write_text(
        "raise ImportError('No module named matplotlib')\n"
    )
    recording = two_step_recording(project)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    clean.pop("VIRTUAL_ENV", None)
    clean.update(
        PYTHONPATH=str(hidden),
        HF_HUB_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        VEIL_HOME=str(tmp_path / "home"),
        **env,
    )
    return subprocess.run(
        [str(python), "-m", "veil.cli", "--project", str(project), "replay", str(recording)]
        + ["--policies", "full", "--plot", str(tmp_path / "out.png")],
        capture_output=True,
        text=True,
        env=clean,
        cwd=project,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


@pytest.mark.parametrize(
    "marker,content,expected",
    [
        (
            "pipx_metadata.json",
            json.dumps({"main_package": {"package": "veil"}}),
            "pipx inject veil matplotlib",
        ),
        (
            "uv-receipt.toml",
            '[tool]\nrequirements = [{ name = "veil" }]\n',
            "uv tool install command you installed veil with again, adding --reinstall "
            "--with matplotlib",
        ),
    ],
)
def test_the_hint_names_the_tool_veil_was_installed_with(
    tmp_path, project, marker, content, expected
):
    python = _environment(tmp_path / "tool", marker, content)
    done = _plot(python, project, tmp_path)
    assert done.returncode != 0
    assert "matplotlib is not installed" in done.stderr, done.stderr[-2000:]
    assert expected in " ".join(done.stderr.split()), done.stderr[-2000:]
    assert "pip install" not in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out.png").exists()


def test_in_the_active_venv_the_hint_is_pip(tmp_path, project):
    root = tmp_path / "venv"
    python = _environment(root, None)
    done = _plot(python, project, tmp_path, VIRTUAL_ENV=str(root))
    assert done.returncode != 0
    assert "(pip install matplotlib)" in " ".join(done.stderr.split()), done.stderr[-2000:]
    assert "pipx" not in done.stderr and "uv tool" not in done.stderr
