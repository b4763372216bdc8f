"""A plugin whose hook raises stops the operation with one line naming the plugin and the hook
(issue 20; the lead's decision: never skip the hook and go on, a skipped hook can be a skipped
redaction or permission). What was stored before stays.

The CLI checks install a fake distribution (a ``.dist-info`` with a ``veil`` entry point) on
``PYTHONPATH`` and run the real command line against a scripted OpenAI-compatible server on
127.0.0.1; the HTTP checks go through httpx (Starlette's TestClient)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from veil.testing.cli import install_fake_plugin, run_veil
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

BOOM = """
import os

from veil.hookspecs import hookimpl

HOOK = os.environ.get("BOOM_HOOK", "")


class QuotaExceeded(Exception):
    pass


@hookimpl
def system_prompt_sections(session):
    if HOOK == "system_prompt_sections":
        raise QuotaExceeded("no sections\\ntoday")  # two lines: reported on one
    return None


@hookimpl
def capture(session, event):
    if HOOK == "capture" and event.phase == "tool_result":
        raise QuotaExceeded("capture broke")
    return None


@hookimpl
def turn_end(session, final_message):
    if HOOK == "turn_end":
        raise QuotaExceeded("turn_end broke")


@hookimpl
def session_start(session):
    if HOOK == "session_start":
        raise QuotaExceeded("session_start broke")
"""

IDLE = "def helper():\n    return 1\n"  # no @hookimpl at all: loaded, never called


@pytest.fixture
def cli(tmp_path, project):
    """``cli(*args, **env)`` runs ``veil --project PROJECT ARGS`` with the plugins ``veil_boom``
    and ``veil_idle`` installed."""
    site = tmp_path / "site"
    install_fake_plugin(site, "veil_boom", BOOM)
    install_fake_plugin(site, "veil_idle", IDLE)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        # configure_project's provider is the project's own
        env = {"VEIL_ALLOW_PROJECT_PROVIDERS": "1", **env}
        return run_veil(project, *args, home=tmp_path / "home", site=site, cwd=tmp_path, env=env)

    return run


def _stored(project: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The messages of the project's only session, read from the store."""
    from veil.core.app import open_veil

    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")  # the scripted provider's project
    veil = open_veil(project, use_entry_points=False)
    try:
        [row] = veil.list_sessions(5)
        return veil.load_session(row["id"]).messages
    finally:
        veil.close()


TWO_CALLS = {
    "content": None,
    "tool_calls": [
        {"name": "ls", "arguments": {}, "id": "call_a"},
        {"name": "ls", "arguments": {}, "id": "call_b"},
    ],
}


@pytest.mark.parametrize(
    ("hook", "text"),
    [
        ("system_prompt_sections", "no sections today"),
        ("capture", "capture broke"),
        ("turn_end", "turn_end broke"),
        ("session_start", "session_start broke"),
    ],
)
def test_veil_p_stops_with_one_line_naming_plugin_and_hook(cli, project, monkeypatch, hook, text):
    (project / "notes.txt").write_text("x\n")
    with ScriptedOpenAIServer([TWO_CALLS, "done"]) as server:
        configure_project(project, server)
        proc = cli("-y", "-p", "list the files", BOOM_HOOK=hook)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = f"veil: error: plugin veil_boom failed in hook {hook}: QuotaExceeded: {text}"
    assert [x for x in proc.stderr.splitlines() if "error" in x] == [line]
    assert proc.stderr.strip().splitlines()[-1] == line
    if hook == "session_start":  # no session was made: nothing was sent or stored
        assert server.requests == []
        return
    stored = _stored(project, monkeypatch)
    assert stored[0] == {"role": "user", "content": "list the files"}
    if hook == "system_prompt_sections":  # fails while the first prompt is built
        assert server.requests == [] and len(stored) == 1
    elif hook == "capture":
        # the first call ran and its result stays; the second never ran and says why
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool"]
        assert stored[2]["tool_call_id"] == "call_a" and "notes.txt" in stored[2]["content"]
        assert stored[3] == {
            "role": "tool",
            "tool_call_id": "call_b",
            "content": f"[not run: the turn stopped: {line.removeprefix('veil: error: ')}]",
        }
        assert len(server.requests) == 1
    else:  # turn_end: the answer was stored before the hook ran
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
        assert stored[-1]["content"] == "done"


def test_veil_debug_adds_the_plugins_traceback(cli, project):
    with ScriptedOpenAIServer(["done"]) as server:
        configure_project(project, server)
        proc = cli("-p", "hi", BOOM_HOOK="turn_end", VEIL_DEBUG="1")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert "veil: error: plugin veil_boom failed in hook turn_end: QuotaExceeded: " in lines[0]
    assert "Traceback (most recent call last):" in proc.stderr
    assert 'veil_boom.py", line' in proc.stderr  # where the plugin raised
    assert "QuotaExceeded: turn_end broke" in proc.stderr


def test_json_mode_reports_the_failure_as_json(cli, project):
    with ScriptedOpenAIServer(["done"]) as server:
        configure_project(project, server)
        proc = cli("-p", "hi", "--json", BOOM_HOOK="turn_end")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout) == {
        "error": {
            "code": "PLUGIN_FAILED",
            "message": "plugin veil_boom failed in hook turn_end: QuotaExceeded: turn_end broke",
            "plugin": "veil_boom",
            "hook": "turn_end",
        }
    }


def test_veil_plugins_warns_about_a_plugin_with_no_hook(cli):
    proc = cli("plugins")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    idle = lines.index("veil_idle 0.1")
    assert lines[idle + 1].startswith("  warning: implements no veil hook (veil never calls it")
    boom = lines.index("veil_boom 0.1")
    assert "warning" not in lines[boom + 1]
    listed = {p["name"]: p for p in json.loads(cli("plugins", "--json").stdout)["plugins"]}
    assert listed["veil_idle"]["hooks"] == []
    assert listed["veil_idle"]["warnings"] == ["implements no veil hook"]
    assert listed["veil_boom"]["warnings"] == []


# -- the mechanism, in process ----------------------------------------------------------------


def test_the_plugin_whose_implementation_raised_is_named_not_its_caller():
    from veil.core import plugins
    from veil.core.errors import BadRequest, PluginHookFailed
    from veil.hookspecs import hookimpl

    pm = plugins.new_plugin_manager()

    class Outer:
        @hookimpl
        def session_start(self, session):
            pm.hook.turn_end(session=session, final_message=None)  # a hook inside a hook

    class Inner:
        @hookimpl
        def turn_end(self, session, final_message):
            {}["missing"]  # noqa: B018 - the bug under test

    class Deliberate:
        @hookimpl
        def resolve_conflict(self, session, conflict_id, keep):
            raise BadRequest(f"conflict_id: no open conflict {conflict_id!r}")

    pm.register(Outer(), name="outer")
    pm.register(Inner(), name="inner")
    pm.register(Deliberate(), name="deliberate")
    with pytest.raises(PluginHookFailed) as failed:
        pm.hook.session_start(session=None)
    assert (failed.value.plugin, failed.value.hook) == ("inner", "turn_end")
    assert failed.value.message == "plugin inner failed in hook turn_end: KeyError: 'missing'"
    assert isinstance(failed.value.__cause__, KeyError)
    # veil's own errors are deliberate: they pass as raised (their message and HTTP status)
    with pytest.raises(BadRequest, match="no open conflict 'c1'"):
        pm.hook.resolve_conflict(session=None, conflict_id="c1", keep="b")


def test_a_plugin_failing_while_veil_opens_is_named(make_veil):
    from veil.core.errors import PluginHookFailed
    from veil.hookspecs import hookimpl

    class NoTools:
        @hookimpl
        def register_tools(self, veil):
            raise OSError("tool index unreadable")

    with pytest.raises(PluginHookFailed) as failed:
        make_veil(plugins=[("no_tools", NoTools())])
    assert failed.value.message == (
        "plugin no_tools failed in hook register_tools: OSError: tool index unreadable"
    )
