"""Names that would escape .veil/memory/ are refused with a clear error (issue 4, "Safety")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from veil_memoryfiles.paths import display_path, file_path, memory_root, validate_file_name

from veil.core.errors import BadRequest, UnsafePath


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("..", "starts with '.'"),
        ("../MEMORY.md", "path separator"),
        ("../../etc/passwd.md", "path separator"),
        ("/etc/passwd.md", "path separator"),
        ("agents/x/MEMORY.md", "path separator"),
        ("..\\MEMORY.md", "path separator"),
        ("C:evil.md", "path separator or drive letter"),
        ("MEMORY.md\x00.txt", "NUL"),
        ("bad\nname.md", "control character"),
        (".hidden.md", "starts with '.'"),
        (".MEMORY.md.abc.tmp", "starts with '.'"),
        ("MEMORY.md.lock", "only Markdown files"),
        ("notes.txt", "only Markdown files"),
        ("", "non-empty"),
        ("a" * 254 + ".md", "longer than 255 bytes"),
    ],
)
def test_unsafe_file_names_are_refused(name: str, why: str) -> None:
    with pytest.raises(UnsafePath, match=why) as info:
        validate_file_name(name)
    assert isinstance(info.value, BadRequest) and info.value.http_status == 400
    assert info.value.code == "INVALID_PATH"


@pytest.mark.parametrize("name", ["MEMORY.md", "archive-2026-11.md", "notes.MD", "笔记.md"])
def test_plain_markdown_names_are_allowed(name: str, tmp_path: Path) -> None:
    assert validate_file_name(name) == name
    assert file_path(tmp_path, "global", "", name) == tmp_path / ".veil" / "memory" / name


@pytest.mark.parametrize("agent", ["..", "../x", "a/b", "a\\b", "", "x\x00", ".hidden", "a..b"])
def test_unsafe_agent_names_are_refused(agent: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="agent name"):
        file_path(tmp_path, "agent", agent)


def test_scope_paths(tmp_path: Path) -> None:
    assert file_path(tmp_path, "agent", "alice") == (
        tmp_path / ".veil" / "memory" / "agents" / "alice" / "MEMORY.md"
    )
    assert file_path(tmp_path, "global", "alice") == tmp_path / ".veil" / "memory" / "MEMORY.md"
    with pytest.raises(UnsafePath, match="scope: expected 'agent' or 'global', got 'team'"):
        file_path(tmp_path, "team", "alice")  # type: ignore[arg-type]
    assert display_path(tmp_path, file_path(tmp_path, "agent", "bob")) == (
        ".veil/memory/agents/bob/MEMORY.md"
    )


def test_a_symlink_leading_out_of_the_memory_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    agents = memory_root(tmp_path) / "agents"
    agents.mkdir(parents=True)
    os.symlink(outside, agents / "evil")
    with pytest.raises(UnsafePath, match="outside"):
        file_path(tmp_path, "agent", "evil")
    os.symlink(outside / "x.md", memory_root(tmp_path) / "link.md")
    with pytest.raises(UnsafePath, match="outside"):
        file_path(tmp_path, "global", "", "link.md")
