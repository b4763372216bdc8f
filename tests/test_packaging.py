"""What a non-editable install carries: every file a package reads at run time, not only its
modules. An editable install (the development route) reads the source tree, so a data file left
out of a wheel fails only for users who install veil as a tool (``pipx``, ``uv tool``): the
levels planner's fitted weights (``veil_fsrs/data/reference_weights.json``) were such a file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _data_files(package: Path) -> list[str]:
    """Files under ``package`` that are neither modules nor tests nor caches, relative to the
    package's parent (as a wheel names them)."""
    return sorted(
        path.relative_to(package.parent).as_posix()
        for path in package.rglob("*")
        if path.is_file()
        and path.suffix not in {".py", ".pyc"}
        and "__pycache__" not in path.parts
        and "tests" not in path.relative_to(package).parts
    )


def _distributions_with_data() -> list[tuple[Path, list[str]]]:
    found = []
    for dist in [ROOT, *sorted(p for p in (ROOT / "plugins").iterdir() if p.is_dir())]:
        if not (dist / "pyproject.toml").exists():
            continue
        files: list[str] = []
        for package in sorted(dist.iterdir()):
            if package.is_dir() and (package / "__init__.py").exists() and package.name != "tests":
                files += _data_files(package)
        if files:
            found.append((dist, files))
    return found


def test_the_fitted_weights_are_a_data_file_this_test_looks_for():
    # the check below is only as good as its search: it must see the one data file there is
    dists = {dist.name: files for dist, files in _distributions_with_data()}
    assert "veil_fsrs/data/reference_weights.json" in dists.get("veil_fsrs", [])


@pytest.mark.parametrize(
    "dist,files", _distributions_with_data(), ids=lambda v: v.name if isinstance(v, Path) else ""
)
def test_a_wheel_carries_every_data_file_of_its_packages(tmp_path, dist, files):
    # built from a clean copy: setuptools reuses a ``build/`` folder an earlier build left in the
    # tree, whose copies would hide a file the package data no longer names
    source = tmp_path / "source"
    shutil.copytree(
        dist,
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".venv", "tests"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in files if f not in names] == []
