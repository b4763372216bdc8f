"""``veil memory write|show|search`` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
import veil_memoryfiles as plugin
from click.testing import CliRunner


@pytest.fixture
def cli() -> click.Group:
    @click.group()
    def root() -> None:
        """Stand-in for veil's top-level command."""

    plugin.register_commands(cli=root)
    return root


def run(cli: click.Group, *args: str, input: str | None = None):  # noqa: A002
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_write_prints_the_status_word_and_exits_0(
    cli: click.Group, project: Path, stored_memory
) -> None:
    p = str(project)
    outputs = [
        run(cli, "memory", "write", "Project uses port 5051.", "--project", p),
        run(cli, "memory", "write", "Project uses port 5051.", "--project", p),
        run(cli, "memory", "write", "   ", "--project", p),
        run(cli, "memory", "write", "Shared fact", "--scope", "global", "--project", p),
        run(cli, "memory", "write", "Bob fact", "--agent", "bob", "--project", p),
        run(cli, "memory", "write", "-", "--project", p, input="from stdin 中文\n"),
    ]
    assert [(r.exit_code, r.output) for r in outputs] == [
        (0, "written\n"),
        (0, "skipped_duplicate\n"),
        (0, "skipped_empty\n"),
        (0, "written\n"),
        (0, "written\n"),
        (0, "written\n"),
    ]
    assert "Bob fact" in stored_memory(project, "agents/bob/MEMORY.md")
    assert "from stdin 中文" in stored_memory(project, "agents/default/MEMORY.md")
    assert "Shared fact" in stored_memory(project, "MEMORY.md")


def test_write_uses_the_current_directory_by_default(
    cli: click.Group, project: Path, monkeypatch: pytest.MonkeyPatch, stored_memory
) -> None:
    monkeypatch.chdir(project)
    assert run(cli, "memory", "write", "here").output == "written\n"
    assert stored_memory(project, "agents/default/MEMORY.md") is not None


def test_disabled_prints_disabled(
    cli: click.Group, project: Path, helpers: SimpleNamespace
) -> None:
    helpers.write_settings(project, {"memory": {"enabled": False}})
    r = run(cli, "memory", "write", "x", "--project", str(project))
    assert (r.exit_code, r.output) == (0, "disabled\n")


def test_show_and_search(cli: click.Group, project: Path) -> None:
    p = str(project)
    run(cli, "memory", "write", "The API listens on port 5051.", "--project", p)
    run(cli, "memory", "write", "Staging port is 6061.", "--scope", "global", "--project", p)
    shown = run(cli, "memory", "show", "--project", p).output
    assert "port 5051" in shown and "port is 6061" in shown
    only_agent = run(cli, "memory", "show", "--scope", "agent", "--project", p).output
    assert "5051" in only_agent and "6061" not in only_agent
    r = run(cli, "memory", "search", "staging port", "--json", "--project", p)
    hits = json.loads(r.output)
    assert [h["content"] for h in hits] == [
        "Staging port is 6061.",
        "The API listens on port 5051.",
    ]
    assert hits[0]["file"] == ".veil/memory/MEMORY.md" and hits[0]["scope"] == "global"
    assert set(hits[0]) == {"scope", "file", "date", "content", "score", "provenance"}
    assert [h["provenance"] for h in hits] == ["agent", "agent"]  # written through veil
    text = run(cli, "memory", "search", "staging", "--project", p).output
    assert "Staging port is 6061." in text
    assert (
        json.loads(run(cli, "memory", "search", "nothing", "--json", "--project", p).output) == []
    )


def test_errors_are_one_clean_line(cli: click.Group, project: Path) -> None:
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text('{"memory": {"maxLines": 0}}', "utf-8")
    r = CliRunner().invoke(cli, ["memory", "write", "x", "--project", str(project)])
    assert r.exit_code == 1
    assert "settings.json: memory.maxLines" in r.output and "Traceback" not in r.output
    (project / ".veil" / "settings.json").write_text("{}", "utf-8")
    r = CliRunner().invoke(
        cli, ["memory", "write", "x", "--agent", "../x", "--project", str(project)]
    )
    assert r.exit_code == 1 and "agent name '../x' is not allowed" in r.output
    r = CliRunner().invoke(
        cli, ["memory", "write", "x", "--scope", "team", "--project", str(project)]
    )
    assert r.exit_code == 2  # click's own usage error names --scope
    assert "--scope" in r.output


def test_show_names_repository_text_and_trust_vouches_for_it(
    cli: click.Group, project: Path, stored_memory, place_memory
) -> None:
    p = str(project)
    run(cli, "memory", "write", "Own fact.", "--project", p)
    name = "agents/default/MEMORY.md"
    place_memory(
        project, name, stored_memory(project, name) + "\n<!-- 2026-11-16 -->\nAdded by hand.\n"
    )
    r = CliRunner().invoke(cli, ["memory", "show", "--scope", "agent", "--project", p])
    assert r.exit_code == 0 and "Added by hand." in r.stdout  # raw text on stdout
    assert r.stderr.strip() == (
        "veil: parts not written by veil (repository-provided; labelled as untrusted in "
        "prompts): .veil/memory/agents/default/MEMORY.md: 1. After reading them, "
        "`veil memory trust` marks them as yours."
    )
    r = run(cli, "memory", "trust", "--project", p)
    assert r.output == "trusted .veil/memory/agents/default/MEMORY.md (1 part)\n"
    r = CliRunner().invoke(cli, ["memory", "show", "--project", p])
    assert r.stderr == ""
    r = run(cli, "memory", "trust", "--project", p)
    assert r.output == "nothing to trust: veil wrote everything in these files\n"
    hits = json.loads(run(cli, "memory", "search", "hand", "--json", "--project", p).output)
    assert [h["provenance"] for h in hits] == ["agent"]
