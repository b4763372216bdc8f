"""The core reaches beliefs only through hooks the ``veil.beliefs`` plugin answers (issue 20):
``assert_fact``, ``belief_conflicts``, ``resolve_conflict`` and, after ``veil doctor --repair``,
``rebuild_derived``. Loaded, a remembered fact becomes a belief and a contradiction a conflict
the model settles; blocked, the fact stays an item, no conflict is listed and resolving says
beliefs are off (a tool error, not a crash).

Every check runs the real command line in a subprocess against a scripted OpenAI-compatible
server on 127.0.0.1 that records each request."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from veil.testing.postgres import project_store
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

BELIEFS_OFF = (
    "veil_resolve_conflict: beliefs are off: no loaded plugin keeps beliefs (the veil.beliefs "
    "plugin is blocked here), so there is no conflict to resolve"
)


def _veil(tmp_path: Path, project: Path, *args: str) -> subprocess.CompletedProcess:
    # the test's store (VEIL_STORE__*, set by pytest --veil-store=postgresql) is kept
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("VEIL_") or k.startswith("VEIL_STORE__")
    }
    env.update(
        VEIL_HOME=str(tmp_path / "home"),
        VEIL_ALLOW_PROJECT_PROVIDERS="1",  # configure_project's provider is the project's
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )


def _call(name: str, **arguments: str) -> dict:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def _script(body: dict) -> dict | str:
    """Two contradicting facts, list the conflicts, settle the one listed (keeping the second
    belief), list again, finish. The step is the number of tool results in the request."""
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    step = len(results)
    if step == 0:
        return _call("veil_remember", content="the api port is 5051", kind="fact")
    if step == 1:
        return _call("veil_remember", content="the api port is 8080", kind="fact")
    if step in (2, 4):
        return _call("veil_conflicts")
    if step == 3:
        conflict = re.search(r"conflict_\w+", results[2])
        beliefs = re.findall(r"(belief_\w+): the api port is", results[2])
        return _call(
            "veil_resolve_conflict",
            conflict_id=conflict.group(0) if conflict else "conflict_none",
            keep=beliefs[1] if len(beliefs) > 1 else "belief_none",
        )
    return "done"


@pytest.mark.parametrize("blocked", [False, True])
def test_facts_conflicts_and_resolution_with_the_beliefs_plugin_loaded_and_blocked(
    tmp_path, project, blocked
):
    flags = ("--disable-plugin", "veil.beliefs") if blocked else ()
    with ScriptedOpenAIServer(_script) as server:
        configure_project(project, server)
        proc = _veil(tmp_path, project, *flags, "-y", "-p", "remember the ports", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["final"] == "done"
    assert "Traceback" not in proc.stderr
    last = server.requests[-1].body["messages"]
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == 5
    # the fact is remembered as an item whether or not beliefs are kept
    assert results[0].startswith("remembered as item_")
    assert results[1].startswith("remembered as item_")
    if blocked:
        assert results[2] == "no open conflicts between beliefs"
        assert results[3] == BELIEFS_OFF
        assert results[4] == "no open conflicts between beliefs"
    else:
        assert results[2].startswith("1 open conflict(s); settle each with veil_resolve_conflict")
        assert "the api port is 5051" in results[2] and "the api port is 8080" in results[2]
        kept = re.findall(r"(belief_\w+): the api port is 8080", results[2])[0]
        dropped = re.findall(r"(belief_\w+): the api port is 5051", results[2])[0]
        conflict = re.search(r"conflict_\w+", results[2]).group(0)
        assert results[3] == f"{conflict} resolved: kept {kept}; retracted {dropped}"
        assert results[4] == "no open conflicts between beliefs"


def test_doctor_repair_has_the_beliefs_plugin_rebuild_its_view_and_nothing_when_blocked(
    tmp_path, project, make_veil
):
    """An event row whose payload is not JSON is moved aside; the beliefs plugin, asked by
    ``rebuild_derived``, rebuilds its tables from what is left, so the belief that event
    asserted is gone. Blocked, nothing is rebuilt (``rebuilt`` is empty)."""
    veil = make_veil(
        [
            _call("veil_remember", content="the api port is 5051", kind="fact"),
            _call("veil_remember", content="the build uses make", kind="fact"),
            "done",
        ]
    )
    session = veil.new_session()
    veil.run_turn(session, "remember")
    veil.close()
    db = project / ".veil" / "context.db"
    shared = bool(os.environ.get("VEIL_STORE__URL"))  # pytest --veil-store=postgresql
    read_sql = "SELECT statement FROM beliefs ORDER BY created_at, id"
    damage_sql = (
        "UPDATE events SET payload = 'not json' WHERE seq = (SELECT MIN(seq) FROM events "
        "WHERE kind = 'belief.assert')"
    )

    def beliefs() -> list[str]:
        if shared:  # the rows are on the test's PostgreSQL server, in the project's schema
            store = project_store(project, write_behind=False)
            try:
                return [r[0] for r in store.conn.execute(read_sql).fetchall()]
            finally:
                store.close()
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                "print('\\n'.join(r[0] for r in c.execute(sys.argv[2])))",
                str(db),
                read_sql,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split("\n")[:-1]

    def damage_first_assertion() -> None:
        if shared:
            store = project_store(project, write_behind=False)
            try:
                with store.transaction() as conn:
                    conn.execute(damage_sql)
            finally:
                store.close()
            return
        # a separate process writes the damage, as another tool or a torn write would
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                "c.execute(sys.argv[2]); c.commit()",
                str(db),
                damage_sql,
            ],
            check=True,
        )

    assert beliefs() == ["the api port is 5051", "the build uses make"]
    damage_first_assertion()  # the port's assertion
    loaded = _veil(tmp_path, project, "doctor", "--repair", "--json")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    report = json.loads(loaded.stdout)
    assert [(f["table"], f["repaired"]) for f in report["findings"]] == [("events", True)]
    assert report["rebuilt"] == ["beliefs"]
    assert not any("blocked" in note for note in report["notes"])
    assert beliefs() == ["the build uses make"]  # the view follows the log

    damage_first_assertion()  # now the build's assertion
    blocked = _veil(
        tmp_path, project, "--disable-plugin", "veil.beliefs", "doctor", "--repair", "--json"
    )
    assert blocked.returncode == 0, blocked.stdout + blocked.stderr
    report = json.loads(blocked.stdout)
    assert [(f["table"], f["repaired"]) for f in report["findings"]] == [("events", True)]
    assert report["rebuilt"] == []
    assert beliefs() == ["the build uses make"]  # nobody was asked to rebuild it
    assert report["notes"][-1] == (
        "the veil.beliefs plugin is blocked here, so its view derived from the store was not "
        "rebuilt; it may still show what the moved rows held"
    )
