"""/compact in interactive front ends and ``veil compact`` on the command line."""

from __future__ import annotations

import json

import click
import pytest
import veil_compaction
from click.testing import CliRunner
from veil_compaction.commands import add_cli_commands, context_tokens

from veil.core import app as app_mod
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel


def fill(session, count=10, chars=200):
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        session.append({"role": role, "content": f"m{n} " + "z" * chars})


def test_slash_compact_runs_the_core_and_reports_tokens(open_project):
    model = ScriptedModel(["SHORT SUMMARY"])
    veil = open_project(
        main=model, agent={"defaultCompaction": {"customInstructions": "Keep decisions."}}
    )
    command = veil.slash_commands()["compact"]
    assert command.plugin == "veil_compaction"
    session = veil.new_session()
    fill(session)
    before = context_tokens(session)
    out = command.handler(session, "  Mention the tests.  ")
    # 10 equal messages, 50% -> 5; the live session sees the new state at once
    assert (session.compact_size, session.compact_summary) == (5, "SHORT SUMMARY")
    after = context_tokens(session)
    assert after < before
    assert out == f"compacted 5 messages (compactSize 5): {before} -> {after} tokens"
    assert model.calls[0][0]["content"].endswith(
        "Additional instructions:\nKeep decisions.\nMention the tests."
    )
    session.save_state()  # the live session writes back the new values, not the old ones
    assert veil.store.get_session(session.id)["compact_size"] == 5

    session.compact_size = len(session.messages)
    session.save_state()
    tokens = context_tokens(session)
    assert command.handler(session, "") == (
        f"already up to date: nothing new to compact ({tokens} tokens)"
    )
    assert len(model.calls) == 1


def test_slash_compact_reports_errors(open_project):
    veil = open_project(agent={"defaultCompaction": {"enabled": False}})
    session = veil.new_session()
    fill(session, 2)
    out = veil.slash_commands()["compact"].handler(session, "")
    assert out.startswith("/compact: COMPACTION_DISABLED:")


@pytest.fixture
def cli_env(project, monkeypatch):
    """A click group with ``veil compact`` whose Veil uses a scripted model and this plugin."""
    model = ScriptedModel([])
    real_open = app_mod.open_veil

    def fake_open(project_dir=None, **kw):
        config = load_config(project_dir)
        return real_open(
            project_dir,
            config=config,
            llm=LLM(config, models={"main": model}),
            use_entry_points=False,
            extra_plugins=(("veil_compaction", veil_compaction),),
            **kw,
        )

    monkeypatch.setattr(app_mod, "open_veil", fake_open)

    @click.group()
    def cli() -> None:
        pass

    add_cli_commands(cli)
    return cli, model


def test_cli_compact_json_on_the_most_recent_session(project, cli_env):
    cli, model = cli_env
    veil = app_mod.open_veil(project)
    older = veil.new_session()
    fill(older, 4)
    session = veil.new_session()
    fill(session, 8)
    veil.close()
    model.add("CLI SUMMARY")
    result = CliRunner().invoke(cli, ["compact", "--project", str(project), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["sessionId"] == session.id
    assert (out["compactedCount"], out["newSize"], out["alreadyUpToDate"]) == (4, 4, False)
    assert out["session"]["compactSummary"] == "CLI SUMMARY"

    model.add("SECOND")
    result = CliRunner().invoke(
        cli,
        [
            "compact",
            "--project",
            str(project),
            "--session",
            older.id,
            "--instructions",
            "Be brief.",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"{older.id}: compacted 2 messages (compactSize 2)"
    assert model.calls[-1][0]["content"].endswith("Additional instructions:\nBe brief.")


def test_cli_compact_errors_are_clean(project, cli_env):
    cli, _ = cli_env
    result = CliRunner().invoke(cli, ["compact", "--project", str(project)])
    assert result.exit_code == 1 and "no open session" in result.output
    result = CliRunner().invoke(cli, ["compact", "--project", str(project), "--session", "sess_x"])
    assert result.exit_code == 1
    assert "SESSION_NOT_FOUND" in result.output and "Traceback" not in result.output
