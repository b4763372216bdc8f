"""Containment under .veil/ (issue 17, part 4): the core helper and every core file it guards
(settings.json, auth.json, agent.json, context.db and its -wal/-shm/-journal, .gitignore)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.app import VEIL_GITIGNORE, ensure_gitignore, open_veil
from veil.core.errors import ConfigError, UnsafePath, UnsafeVeilPath
from veil.core.safety import paths
from veil.core.settings import load_config
from veil.core.store import Store


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the project that a hostile link points at, with known bytes."""
    target = tmp_path / "victim.txt"
    target.write_bytes(b"precious\n")
    return target


def unchanged(target: Path) -> bool:
    return target.read_bytes() == b"precious\n"


def test_checked_accepts_plain_and_missing_paths(project: Path) -> None:
    veil = project / ".veil"
    assert paths.checked(veil, veil / "memory" / "MEMORY.md") == veil / "memory" / "MEMORY.md"
    (veil / "memory").mkdir(parents=True)
    assert paths.veil_file(project, "memory", "x.md") == veil / "memory" / "x.md"


@pytest.mark.parametrize("level", [".veil", ".veil/memory", ".veil/memory/MEMORY.md"])
def test_checked_refuses_a_link_at_every_level(project: Path, tmp_path: Path, level: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "memory").mkdir(parents=True)
    parts = level.split("/")
    parent = project.joinpath(*parts[:-1])
    parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, project.joinpath(*parts))
    with pytest.raises(UnsafeVeilPath) as info:
        paths.veil_file(project, "memory", "MEMORY.md")
    assert str(project.joinpath(*parts)) in info.value.message
    assert "symbolic link" in info.value.message
    # both a refused path for tools and HTTP, and a configuration error for front ends
    assert isinstance(info.value, UnsafePath) and isinstance(info.value, ConfigError)
    assert (info.value.code, info.value.http_status) == ("UNSAFE_VEIL_PATH", 409)


def test_a_dangling_link_is_refused_too(project: Path, tmp_path: Path) -> None:
    (project / ".veil").mkdir()
    os.symlink(tmp_path / "does-not-exist", project / ".veil" / "settings.json")
    with pytest.raises(UnsafeVeilPath, match="settings.json"):
        paths.veil_file(project, "settings.json")


def test_a_path_outside_veil_is_refused(project: Path) -> None:
    with pytest.raises(UnsafeVeilPath, match="not inside"):
        paths.checked(project / ".veil", project / "src" / "x.py")
    with pytest.raises(UnsafeVeilPath, match="not inside"):
        paths.checked(project / ".veil", project / ".veil" / ".." / "x")


def test_read_bytes_nofollow(project: Path, outside: Path) -> None:
    f = project / "a.txt"
    assert paths.read_bytes_nofollow(f) is None
    f.write_bytes(b"hello")
    assert paths.read_bytes_nofollow(f) == b"hello"
    assert paths.read_bytes_nofollow(f, 3) == b"lo"
    link = project / "link.txt"
    os.symlink(outside, link)
    with pytest.raises(UnsafeVeilPath, match="symbolic link"):
        paths.read_bytes_nofollow(link)
    fifo = project / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeVeilPath, match="not a regular file"):
        paths.read_bytes_nofollow(fifo)  # and it did not block


def test_append_and_create_never_follow_links(project: Path, outside: Path) -> None:
    link = project / "log"
    os.symlink(outside, link)
    with pytest.raises(UnsafeVeilPath):
        paths.append_bytes_nofollow(link, b"x\n")
    assert paths.create_exclusive(link, b"x") is False  # the name is taken: not written through
    assert unchanged(outside)
    new = project / "new"
    assert paths.create_exclusive(new, b"abc") is True
    paths.append_bytes_nofollow(new, b"def")
    assert new.read_bytes() == b"abcdef"


def test_remove_interrupted_temps_by_name_and_age(project: Path) -> None:
    folder = project
    mine = folder / ".MEMORY.md.ab12cd_9.tmp"
    other_fresh = folder / ".archive-2026-11.md.zz00yy11.tmp"
    other_old = folder / ".settings.json.qq00rr22.tmp"
    not_temp = [folder / ".MEMORY.md.tmp", folder / "MEMORY.md", folder / ".MEMORY.md.abc.tmp"]
    for p in (mine, other_fresh, other_old, *not_temp):
        p.write_bytes(b"x")
    now = 1_000_000.0
    os.utime(mine, (now, now))
    os.utime(other_fresh, (now - 10, now - 10))
    os.utime(other_old, (now - paths.STALE_TEMP_AGE_S - 1,) * 2)
    removed = paths.remove_interrupted_temps(folder, "MEMORY.md", now=now)
    assert sorted(removed) == sorted([mine, other_old])
    assert other_fresh.exists() and all(p.exists() for p in not_temp)
    # a link with a temporary's name is removed, never followed
    victim = project / "victim"
    victim.write_bytes(b"keep")
    os.symlink(victim, folder / ".MEMORY.md.aaaaaaaa.tmp")
    paths.remove_interrupted_temps(folder, "MEMORY.md")
    assert victim.read_bytes() == b"keep" and not (folder / ".MEMORY.md.aaaaaaaa.tmp").exists()


def test_temp_names_match_what_atomic_write_makes(project: Path, monkeypatch) -> None:
    import tempfile

    from veil.core import atomic

    seen = []
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        seen.append(Path(name).name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", spy)
    atomic.atomic_write_bytes(project / "MEMORY.md", b"x")
    (name,) = seen
    m = paths.TEMP_NAME_RE.match(name)
    assert m and m.group("name") == "MEMORY.md"


# -- the core's own files ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["settings.json", "auth.json"])
def test_linked_settings_or_auth_is_a_config_error_naming_it(
    project: Path, outside: Path, name: str
) -> None:
    (project / ".veil").mkdir()
    outside.write_text("{}")
    os.symlink(outside, project / ".veil" / name)
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert f".veil/{name}" in info.value.message and "symbolic link" in info.value.message


def test_linked_agent_json_or_agent_folder_is_refused(project: Path, tmp_path: Path) -> None:
    agents = project / ".veil" / "agents"
    agents.mkdir(parents=True)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "agent.json").write_text(json.dumps({"model": "x"}))
    os.symlink(theirs, agents / "bob")
    config = load_config(project)
    with pytest.raises(UnsafeVeilPath, match="agents/bob"):
        config.agent("bob")
    (agents / "carol").mkdir()
    os.symlink(theirs / "agent.json", agents / "carol" / "agent.json")
    with pytest.raises(UnsafeVeilPath, match="carol/agent.json"):
        config.agent("carol")


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_linked_context_db_or_companion_is_refused(
    project: Path, outside: Path, suffix: str
) -> None:
    (project / ".veil").mkdir()
    os.symlink(outside, project / ".veil" / f"context.db{suffix}")
    with pytest.raises(UnsafeVeilPath, match=f"context.db{suffix}"):
        open_veil(project, use_entry_points=False)
    with pytest.raises(UnsafeVeilPath):
        Store(project / ".veil" / "context.db")  # any caller of the store, the harness too
    assert unchanged(outside)


def test_a_linked_veil_folder_is_refused(project: Path, tmp_path: Path) -> None:
    real = tmp_path / "real_veil"
    real.mkdir()
    os.symlink(real, project / ".veil")
    with pytest.raises(ConfigError, match="symbolic link"):
        open_veil(project, use_entry_points=False)
    assert list(real.iterdir()) == []  # nothing was created through it


def test_gitignore_created_completed_and_never_written_through_a_link(
    project: Path, outside: Path
) -> None:
    (project / ".veil").mkdir()
    ensure_gitignore(project)
    gi = project / ".veil" / ".gitignore"
    assert gi.read_text() == VEIL_GITIGNORE
    assert {"memory-provenance", "history", "auth.json", "context.db", "proxy/"} <= set(
        VEIL_GITIGNORE.splitlines()
    )
    # an older veil's file gains the new lines, keeps the rest
    gi.write_text("context.db\ncontext.db-*\nauth.json\n*.lock\n# mine\nbuild")
    ensure_gitignore(project)
    assert gi.read_text() == (
        "context.db\ncontext.db-*\nauth.json\n*.lock\n# mine\nbuild\nmemory-provenance\nhistory\n"
        "proxy/\n"
    )
    ensure_gitignore(project)  # idempotent
    assert gi.read_text().count("memory-provenance") == 1
    gi.unlink()
    os.symlink(outside, gi)
    with pytest.raises(UnsafeVeilPath, match=".gitignore"):
        ensure_gitignore(project)
    gi.unlink()
    os.symlink(project / "nowhere" / "x", gi)  # dangling: write_text would have created x
    with pytest.raises(UnsafeVeilPath):
        ensure_gitignore(project)
    assert not (project / "nowhere").exists() and unchanged(outside)


def test_cli_reports_a_linked_settings_file_without_a_traceback(
    project: Path, outside: Path
) -> None:
    (project / ".veil").mkdir()
    os.symlink(outside, project / ".veil" / "settings.json")
    proc = subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), "sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ".veil/settings.json" in proc.stderr and "symbolic link" in proc.stderr


# -- per-session lock files (issue 17, B2) ------------------------------------------------------


def _hold(locks, session_id: str) -> None:
    with locks.hold(session_id):
        pass


def test_session_locks_refuse_a_linked_folder_or_file(project: Path, tmp_path: Path) -> None:
    from veil.core.session_locks import SessionLocks

    veil_dir = project / ".veil"
    veil_dir.mkdir()
    away = tmp_path / "away"
    away.mkdir()
    os.symlink(away, veil_dir / "locks")
    locks = SessionLocks(veil_dir / "context.db")
    with pytest.raises(UnsafeVeilPath, match=r"locks is a symbolic link"):
        _hold(locks, "sess_1")
    with pytest.raises(UnsafeVeilPath, match=r"locks is a symbolic link"):
        locks.check_free("sess_1")
    assert list(away.iterdir()) == []  # nothing created outside

    os.unlink(veil_dir / "locks")
    (veil_dir / "locks").mkdir()
    victim = tmp_path / "victim.lock"
    victim.write_bytes(b"precious\n")
    _hold(locks, "sess_2")  # a plain folder: locks work
    (veil_dir / "locks" / "sess_2.lock").unlink(missing_ok=True)
    os.symlink(victim, veil_dir / "locks" / "sess_2.lock")  # swapped after the lock was made
    with pytest.raises(UnsafeVeilPath, match=r"sess_2\.lock is a symbolic link"):
        _hold(locks, "sess_2")
    with pytest.raises(UnsafeVeilPath, match=r"sess_2\.lock is a symbolic link"):
        SessionLocks(veil_dir / "context.db").check_free("sess_2")
    assert victim.read_bytes() == b"precious\n"


def _veil_cli(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        VEIL_HOME=str(home),
        VEIL_CONTEXT__RESCUE_EMBEDDINGS="off",
        VEIL_DISABLE_PLUGINS="veil_repl",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=project,
    )


def test_cli_refuses_linked_session_locks_without_a_traceback(
    project: Path, tmp_path: Path
) -> None:
    from veil.testing.scripted_server import ScriptedOpenAIServer

    home = tmp_path / "home"
    home.mkdir()
    away = tmp_path / "away"
    away.mkdir()
    victim = tmp_path / "victim_bashrc"
    victim.write_bytes(b"precious\n")
    with ScriptedOpenAIServer(default="done") as server:
        auth = {
            "providers": {"p": {"type": "openai", "base_url": server.url, "api_key": "sk-t-123"}},
            "models": {"main": {"model": "test-model", "contextWindow": 8192}},
        }
        (home / "auth.json").write_text(json.dumps(auth))
        veil_dir = project / ".veil"
        veil_dir.mkdir()
        (veil_dir / "settings.json").write_text("{}")
        # 1. .veil/locks a link to an outside folder, in a fresh project
        os.symlink(away, veil_dir / "locks")
        proc = _veil_cli(project, home, "-p", "hi")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr + proc.stdout
        assert "locks is a symbolic link" in proc.stderr
        assert list(away.iterdir()) == []
        # 2. a real folder, and the session's own lock file a link (then `veil -c`)
        os.unlink(veil_dir / "locks")
        proc = _veil_cli(project, home, "-p", "hi")
        assert proc.returncode == 0, proc.stderr
        (lock,) = (veil_dir / "locks").glob("sess_*.lock")
        lock.unlink()
        os.symlink(victim, lock)
        asked = len(server.requests)
        proc = _veil_cli(project, home, "-c", "-p", "hi again")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr + proc.stdout
        assert f"{lock.name} is a symbolic link" in proc.stderr
        assert victim.read_bytes() == b"precious\n"
        assert len(server.requests) == asked  # the turn never started
