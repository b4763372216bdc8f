"""Secrets never persisted, end to end (issue 17, part 3): a scripted model runs ``bash`` that
prints a token and sends another in a command; the tokens must be absent from context.db (read
through the store's API and by a separate process), the event log, the prompts, MEMORY.md after
pre-compaction extraction, the compaction summary and every HTTP response; with
``security.redactSecrets`` off they are there. ``read`` of veil's own auth.json shows the key
redacted."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.prompt.assemble import kept_messages
from veil.core.prompt.compaction import run_full
from veil.core.settings import load_config
from veil.hookspecs import hookimpl
from veil.testing.scripted_model import ScriptedModel

PLUGINS = ("veil_compaction", "veil_memoryfiles", "veil_http")
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in PLUGINS),
    reason="needs the veil_compaction, veil_memoryfiles and veil_http plugins",
)

_rnd = random.Random(1717)
_B62 = string.ascii_letters + string.digits
# built here, never written out whole: a GitHub token (printed by a tool) and a Stripe key (in a
# command the model sends)
GITHUB = "gh" + "p_" + "".join(_rnd.choice(_B62) for _ in range(36))
STRIPE = "sk" + "_live_" + "".join(_rnd.choice(_B62) for _ in range(24))

DUMP = """
import sqlean, sys
con = sqlean.connect(sys.argv[1])
names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
for name in names:
    try:
        rows = con.execute(f'SELECT * FROM "{name}"').fetchall()
    except Exception:
        continue
    for row in rows:
        print(name, repr(row))
"""


def dump_database(path: Path) -> str:
    """Every row of every table of ``path``, read by a separate Python process."""
    out = subprocess.run(
        [sys.executable, "-c", DUMP, str(path)], capture_output=True, text=True, check=True
    )
    return out.stdout


class Recorder:
    """Records render events (what front ends are shown)."""

    def __init__(self) -> None:
        self.events: list = []

    @hookimpl
    def render(self, event) -> None:
        if event.kind != "token":
            self.events.append(event)


def open_project(project: Path, main: ScriptedModel, compact: ScriptedModel, recorder: Recorder):
    import veil_compaction
    import veil_memoryfiles

    (project / ".veil").mkdir(exist_ok=True)
    # keep one step when compacting, so three steps give something to summarise
    (project / ".veil" / "settings.json").write_text('{"compaction": {"keepRecentTurns": 1}}')
    config = load_config(project)
    return open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": main, "compact": compact}),
        use_entry_points=False,
        extra_plugins=(
            ("veil_compaction", veil_compaction),
            ("veil_memoryfiles", veil_memoryfiles),
            ("recorder", recorder),
        ),
    )


def run_scenario(project: Path) -> dict:
    """One session: bash prints the GitHub token, the model sends the Stripe key in a command,
    full compaction (extraction first) runs, then the HTTP API is read. Returns what each place
    holds, as text."""
    from starlette.testclient import TestClient
    from veil_http import create_app

    # long enough that the summary shrinks what it replaces (a compaction that does not is
    # refused, issue 19)
    settings = "".join(f"FEATURE_FLAG_{n}=enabled-for-staging-and-production\n" for n in range(30))
    (project / ".env").write_text(f"GITHUB_TOKEN={GITHUB}\nDEBUG=1\n{settings}", encoding="utf-8")
    main = ScriptedModel(
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat .env"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {STRIPE} | wc -c"}}]},
            "The token is in .env; the key has 33 characters.",
            # the HTTP turn
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat .env"}}]},
            "Done.",
        ]
    )
    compact = ScriptedModel(
        [
            # extraction: a model that copies the credential into a fact (it must be refused)
            f"- The GitHub token is {GITHUB}.\n- Tests run with make check.",
            # the summary repeats it too
            f"## Summary\nThe agent read .env (GITHUB_TOKEN={GITHUB}) and ran a command.",
        ]
    )
    recorder = Recorder()
    veil = open_project(project, main, compact, recorder)
    session = veil.new_session()
    veil.run_turn(session, "What is in .env?")
    # full compaction, as the loop runs it when the prompt passes the threshold (extraction
    # first, through the before_compaction hook)
    result = run_full(session, kept_messages(session))
    assert result is not None and result.messages is not None, [
        e.data.get("text") for e in recorder.events if e.kind == "warning"
    ]
    assert len(compact.calls) == 2  # extraction, then the summary
    client = TestClient(create_app(veil), base_url="http://127.0.0.1:5051")
    sid = session.id
    responses = [
        client.get(f"/sessions/{sid}"),
        client.get("/sessions"),
        client.get(f"/sessions/{sid}/context"),
        client.get("/beliefs"),
        client.get("/agents/default/memory/MEMORY.md"),
        client.post(f"/sessions/{sid}/messages/stream", json={"content": "and again?"}),
    ]
    assert [r.status_code for r in responses] == [200] * 6, [r.text for r in responses]
    veil.store.flush()
    found = {
        "messages": json.dumps([m for _, m in veil.store.messages(sid)]),
        "items": json.dumps(
            [i.content for i in veil.store.items(sid, ("live", "warm", "cold"))]
            + [t for i in veil.store.items(sid, ("live", "warm", "cold")) for t in i.tags]
        ),
        "events": json.dumps(veil.store.events()),
        "summary": veil.store.get_session(sid)["compact_summary"] or "",
        "memory": (project / ".veil/memory/agents/default/MEMORY.md").read_text(encoding="utf-8"),
        "prompts": json.dumps(main.calls + compact.calls),
        "http": "\n".join(r.text for r in responses),
        "rendered": json.dumps([e.data for e in recorder.events], default=str),
    }
    veil.close()
    found["database"] = dump_database(project / ".veil" / "context.db")
    found["info"] = [e.data.get("text", "") for e in recorder.events if e.kind == "info"]
    return found


def test_no_secret_reaches_the_store_the_log_memory_summaries_prompts_or_http(project):
    found = run_scenario(project)
    for place in ("messages", "items", "events", "summary", "memory", "prompts", "http"):
        assert GITHUB not in found[place], place
        assert STRIPE not in found[place], place
    for place in ("rendered", "database"):
        assert GITHUB not in found[place] and STRIPE not in found[place], place
    # what stands in their place
    assert "GITHUB_TOKEN=[redacted:github_token]" in found["messages"]
    assert "echo [redacted:stripe_key] | wc -c" in found["messages"]
    assert "[redacted:github_token]" in found["summary"]
    assert "[redacted:github_token]" in found["http"]
    # the extracted fact about the token is refused; the other one is written
    assert "Tests run with make check." in found["memory"]
    assert "GitHub token" not in found["memory"]
    assert any("1 credential-like fact(s) refused" in text for text in found["info"])
    # the .env file itself is untouched (the command ran with the real value)
    assert GITHUB in (project / ".env").read_text(encoding="utf-8")


def test_with_redaction_off_the_secret_is_stored_as_it_came(project, monkeypatch):
    monkeypatch.setenv("VEIL_SECURITY__REDACT_SECRETS", "false")
    found = run_scenario(project)
    for place in ("messages", "summary", "memory", "prompts", "http", "database"):
        assert GITHUB in found[place], place
    assert STRIPE in found["messages"]
    assert "[redacted:" not in found["messages"]


def test_read_of_veils_auth_file_shows_the_key_redacted(project, tmp_path, monkeypatch):
    home = tmp_path / "veil_home"
    home.mkdir()
    monkeypatch.setenv("VEIL_HOME", str(home))
    # a key of no known shape: only veil's knowledge of its own auth file catches it
    key = "".join(_rnd.choice("0123456789abcdef") for _ in range(48))
    auth = home / "auth.json"
    auth.write_text(
        json.dumps({"providers": {"together": {"type": "openai", "api_key": key}}}),
        encoding="utf-8",
    )
    main = ScriptedModel(
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": str(auth)}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"cat {auth}"}}]},
            "I read it.",
        ]
    )
    import veil_memoryfiles

    config = load_config(project)
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": main}),
        use_entry_points=False,
        extra_plugins=(("veil_memoryfiles", veil_memoryfiles),),
    )
    session = veil.new_session()
    veil.run_turn(session, "show me veil's auth file")
    results = [m["content"] for m in session.messages if m["role"] == "tool"]
    assert len(results) == 2
    for content in results:
        assert key not in content
        assert '"api_key": "[redacted:veil_known]"' in content
    assert key not in json.dumps(main.calls)  # never in a prompt
    veil.close()
    assert key not in dump_database(project / ".veil" / "context.db")


def test_http_put_of_a_memory_file_is_literal_and_reads_back_redacted(project, monkeypatch):
    """Seed 000: PUT overwrites literally (the file holds the caller's bytes); what the API
    sends back is redacted like every response."""
    from starlette.testclient import TestClient
    from veil_http import create_app

    body = f"<!-- 2025-03-02 -->\nDeploy with GITHUB_TOKEN={GITHUB}\n"
    for redact in (True, False):
        if not redact:
            monkeypatch.setenv("VEIL_SECURITY__REDACT_SECRETS", "false")
        veil = open_project(project, ScriptedModel([]), ScriptedModel([]), Recorder())
        client = TestClient(create_app(veil), base_url="http://127.0.0.1:5051")
        put = client.put("/memory/MEMORY.md", content=body.encode("utf-8"))
        assert put.status_code == 200, put.text
        on_disk = (project / ".veil" / "memory" / "MEMORY.md").read_text(encoding="utf-8")
        assert on_disk == body  # literal, either way
        got = client.get("/memory/MEMORY.md").text
        if redact:
            assert GITHUB not in got and "GITHUB_TOKEN=[redacted:github_token]" in got
        else:
            assert got == body
        veil.close()


def test_memory_write_redacts_and_says_so(project):
    from veil_memoryfiles.service import MemoryService

    config = load_config(project)
    out = MemoryService(config, "default").write(f"deploy token: {GITHUB}", "agent")
    assert out.status == "written" and out.as_dict()["redacted"] is True
    text = (project / ".veil/memory/agents/default/MEMORY.md").read_text(encoding="utf-8")
    assert GITHUB not in text and "deploy token: [redacted:github_token]" in text
    clean = MemoryService(config, "default").write("Tests run with make check.", "agent")
    assert "redacted" not in clean.as_dict()


def test_hand_written_memory_and_agents_md_reach_the_prompt_redacted(project):
    """Files veil did not write keep their bytes; the memory section of the system prompt (and
    its cache in the session's stored state) shows their credentials redacted."""
    memory = project / ".veil" / "memory" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text(f"<!-- 2025-03-02 -->\nCI pushes with GITHUB_TOKEN={GITHUB}\n")
    (project / "AGENTS.md").write_text(f"Payments: stripe key {STRIPE}\n")
    main = ScriptedModel(["ok"])
    veil = open_project(project, main, ScriptedModel([]), Recorder())
    session = veil.new_session()
    veil.run_turn(session, "hello")
    system = main.calls[0][0]["content"]
    assert "CI pushes with GITHUB_TOKEN=[redacted:github_token]" in system
    assert "stripe key [redacted:stripe_key]" in system
    assert GITHUB not in system and STRIPE not in system
    stored = json.dumps(veil.store.get_session(session.id)["state"])
    assert GITHUB not in stored and STRIPE not in stored
    assert GITHUB in memory.read_text() and STRIPE in (project / "AGENTS.md").read_text()
    veil.close()


def test_the_harness_and_veil_remember_store_no_secret(tmp_path):
    """Another agent loop through VeilHarness: what its host reports (the user's message, the
    reply's tool calls, a tool's output) and what the model asks veil_remember to keep are
    redacted before the store holds them."""
    from veil.harness import VeilHarness

    db = tmp_path / ".veil" / "context.db"
    harness = VeilHarness(db, context_window=4000, use_entry_points=False)
    hooks = harness.get_hooks()
    hooks["on_user_message"](f"deploy with {STRIPE}")
    call = {"command": f"gh auth login --with-token {GITHUB}"}
    hooks["on_assistant_message"](
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "x1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps(call)},
                }
            ],
        }
    )
    hooks["before_tool_call"]("bash", call, "x1")
    hooks["after_tool_call"]("bash", call, "x1", f"GITHUB_TOKEN={GITHUB}\nlogged in")
    out = hooks["call_tool"](
        "veil_remember", json.dumps({"content": f"the token is {GITHUB}", "kind": "fact"}), "x2"
    )
    assert out.startswith("remembered as item_")
    prompt = json.dumps(hooks["build_prompt"]())
    session_id = harness.session.id
    store = harness.veil.store
    held = json.dumps(
        [
            [m for _, m in store.messages(session_id)],
            [i.content for i in store.items(session_id, ("live", "warm", "cold"))],
            store.events(),
        ]
    )
    harness.close()
    for text in (prompt, held, dump_database(db)):
        assert GITHUB not in text and STRIPE not in text
    assert "[redacted:github_token]" in held and "[redacted:stripe_key]" in held


def test_a_credential_is_refused_as_a_model_name_over_http(project, monkeypatch):
    """Issue 17 B4: ``POST /sessions {"model": "<key>"}`` stored the key in the sessions table.
    It is refused with a 400 naming the field, and echoed nowhere; a model name still works.
    Both a key of a known format and a key of no known shape that veil knows (here from the
    environment) are refused."""
    from starlette.testclient import TestClient
    from veil_http import create_app

    known = "".join(_rnd.choice("0123456789abcdef") for _ in range(40))
    monkeypatch.setenv("TOGETHER_API_KEY", known)
    veil = open_project(project, ScriptedModel([]), ScriptedModel([]), Recorder())
    client = TestClient(create_app(veil), base_url="http://127.0.0.1:5051")
    for key in (STRIPE, known):
        refused = client.post("/sessions", json={"model": key})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["message"].startswith("model: ")
        assert key not in refused.text
    created = client.post("/sessions", json={"model": "openrouter/qwen/qwen3-coder"})
    assert created.status_code == 201, created.text
    assert created.json()["model"] == "openrouter/qwen/qwen3-coder"
    veil.close()
    database = dump_database(project / ".veil" / "context.db")
    assert STRIPE not in database and known not in database
    assert "openrouter/qwen/qwen3-coder" in database


def test_a_credential_is_refused_as_a_model_name_on_the_command_line(project, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "veil.cli",
            "--project",
            str(project),
            "--model",
            GITHUB,
            "-p",
            "hi",
        ],
        env={**os.environ, "VEIL_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode != 0
    assert "model:" in run.stderr and "Traceback" not in run.stderr
    assert GITHUB not in run.stdout + run.stderr


def test_compaction_instructions_reach_the_summariser_redacted(project):
    """Issue 17 B4: ``POST /sessions/{id}/compact {"instructions": "... <token>"}`` sent the
    raw token to the summary model."""
    from starlette.testclient import TestClient
    from veil_http import create_app

    main = ScriptedModel(
        [
            # output long enough that the summary shrinks what it replaces (issue 19)
            {"tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 80"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "seq 81 160"}}]},
            "Done.",
            # defaultCompaction summarises with the session's main model
            "## Summary\nThe agent printed numbers.",
        ]
    )
    veil = open_project(project, main, ScriptedModel([]), Recorder())
    session = veil.new_session()
    veil.run_turn(session, "Echo two words.")
    client = TestClient(create_app(veil), base_url="http://127.0.0.1:5051")
    answer = client.post(
        f"/sessions/{session.id}/compact",
        json={"instructions": f"Keep the token {GITHUB} in the summary."},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["compactedCount"] > 0
    assert len(main.calls) == 4
    sent = json.dumps(main.calls[-1])
    assert GITHUB not in sent
    assert "Keep the token [redacted:github_token] in the summary." in sent
    veil.close()


def _aws_key_pair() -> tuple[str, str]:
    """An AWS access key id and a secret access key of the documented shapes (built here,
    never written out whole)."""
    b32 = string.ascii_uppercase + "234567"
    b64 = _B62 + "+/"
    key_id = "AK" + "IA" + "".join(_rnd.choice(b32) for _ in range(16))
    while True:
        secret = "".join(_rnd.choice(b64) for _ in range(40))
        kinds = (str.isupper, str.islower, str.isdigit)
        if all(any(kind(c) for c in secret) for kind in kinds):
            return key_id, secret


@pytest.mark.parametrize(
    "shape",
    ["aws configure get", "aws configure list", "environment listing"],
)
def test_a_bare_aws_secret_after_its_key_id_reaches_no_store_request_or_memory_file(
    make_veil, scripted_server, veil_project, shape
):
    """Issue 33: an AWS secret access key printed on its own after its key id (as ``aws
    configure get`` or a CI log prints it) was stored in context.db, sent to the provider and
    written to MEMORY.md. It arrives here in a ``bash`` result, and the model (which the
    script lets know the secret) copies it into a ``memory_write`` and its final answer."""
    import veil_memoryfiles

    key_id, secret = _aws_key_pair()
    printed = {
        "aws configure get": f"{key_id}\n{secret}\n",
        "aws configure list": (
            "      Name                    Value             Type    Location\n"
            "      ----                    -----             ----    --------\n"
            f"access_key     {key_id} shared-credentials-file\n"
            f"secret_key     {secret} shared-credentials-file\n"
        ),
        "environment listing": f"HOME=/root\nS3_UPLOADER={key_id}\nS3_UPLOADER_SIG={secret}\n",
    }[shape]
    (veil_project / "out.txt").write_text(printed, encoding="utf-8")
    veil = make_veil(
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat out.txt"}}]},
            {
                "tool_calls": [
                    {
                        "name": "memory_write",
                        "arguments": {"content": f"deploy key {key_id}\nits secret {secret}"},
                    }
                ]
            },
            f"The key is {key_id} and the secret {secret}.",
        ],
        server=scripted_server,
        plugins=[veil_memoryfiles],
    )
    session = veil.new_session()
    result = veil.run_turn(session, "Which AWS key does the deploy use?")
    assert result.status == "done"
    veil.store.flush()
    stored = json.dumps([m for _, m in veil.store.messages(session.id)])
    memory = veil_project / ".veil" / "memory" / "agents" / "default" / "MEMORY.md"
    assert len(scripted_server.requests) == 3
    # the tool ran with the real file; what was kept of its output holds neither secret
    assert "[redacted:aws_secret_key]" in stored and "[redacted:aws_access_key]" in stored
    assert secret not in stored and key_id not in stored
    assert not scripted_server.saw(secret) and not scripted_server.saw(key_id)
    third = json.dumps(scripted_server.requests[2].body["messages"])
    assert "[redacted:aws_secret_key]" in third
    assert "[redacted:aws_secret_key]" in memory.read_text(encoding="utf-8")
    assert secret not in memory.read_text(encoding="utf-8")
    assert secret not in dump_database(veil_project / ".veil" / "context.db")
    assert secret in (veil_project / "out.txt").read_text(encoding="utf-8")
