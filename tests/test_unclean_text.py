"""Text that is not clean (issue 19): veil reads and writes UTF-8 whatever the locale, and
replaces what cannot be encoded instead of crashing or losing the turn.

Every case runs the real ``veil`` command in a subprocess; model replies come from a scripted
OpenAI-compatible server on 127.0.0.1 (:mod:`veil.testing.scripted_server`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.store import Store
from veil.core.text import clean_text
from veil.testing.scripted_server import Reply, ScriptedOpenAIServer, configure_project

REPLACEMENT = "\ufffd"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("LC_") or k in ("LANG", "LANGUAGE", "PYTHONIOENCODING", "PYTHONUTF8"))
    }
    env.update(
        VEIL_HOME=str(tmp_path / "home"),
        VEIL_ALLOW_PROJECT_PROVIDERS="1",  # configure_project's provider is the project's (issue 17)
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    env.update(extra)
    return env


def _veil(tmp_path, project, *args, env=None, stdin: bytes | None = None):
    if args[0] == "memory":  # its subcommands take their own --project
        args = (*args, "--project", str(project))
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=env or _env(tmp_path),
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )


def _messages(project: Path, session_id: str) -> list[dict]:
    store = Store(project / ".veil" / "context.db", write_behind=False)
    try:
        return [m for _, m in store.messages(session_id)]
    finally:
        store.close()


def test_clean_text_replaces_lone_surrogates_only():
    assert clean_text("plain é 日本 \U0001f600") == "plain é 日本 \U0001f600"
    assert clean_text("a\ud800b\udce9c") == f"a{REPLACEMENT}b{REPLACEMENT}c"
    assert clean_text("\ud83d\ude00") == "\U0001f600"  # a pair is one character, kept


def test_a_lone_surrogate_in_the_model_reply_is_replaced_and_the_reply_kept(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    # the JSON escape \ud800 reaches Python as a lone surrogate, which UTF-8 cannot encode
    reply = Reply(content_json='"ok \\ud800 done"')
    with ScriptedOpenAIServer(lambda body: reply) as server:
        configure_project(project, server)
        out = _veil(tmp_path, project, "-p", "hello", "--json")
        plain = _veil(tmp_path, project, "-c", "-p", "again")
    assert out.returncode == 0, out.stderr.decode()
    result = json.loads(out.stdout)
    assert result["final"] == f"ok {REPLACEMENT} done"
    stored = _messages(project, result["sessionId"])
    assert plain.returncode == 0, plain.stderr.decode()
    assert [m["content"] for m in stored] == ["hello", f"ok {REPLACEMENT} done"] + [
        "again",
        f"ok {REPLACEMENT} done",
    ]
    assert plain.stdout.decode("utf-8") == f"ok {REPLACEMENT} done\n"


def test_a_latin1_byte_in_the_task_becomes_a_replacement_character(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    with ScriptedOpenAIServer(lambda body: "noted") as server:
        configure_project(project, server)
        out = _veil(tmp_path, project, "-p", b"caf\xe9 au lait", "--json")
        sent = server.requests[0].user_texts()
    assert out.returncode == 0, out.stderr.decode()
    result = json.loads(out.stdout)
    assert result["final"] == "noted"
    assert sent == [f"caf{REPLACEMENT} au lait"]
    assert [m["content"] for m in _messages(project, result["sessionId"])] == [
        f"caf{REPLACEMENT} au lait",
        "noted",
    ]


# PYTHONUTF8=0 keeps Python from switching itself to UTF-8 under the C locale (as an embedding
# or an older Python would): standard streams and argv then use ASCII. The first two cases
# failed before the fix; the last two pass either way (with LANG=C alone Python coerces the
# locale to C.UTF-8, with LC_ALL=C alone it turns on its UTF-8 mode) and stay as guards.
LOCALES = [
    {"LC_ALL": "C", "PYTHONUTF8": "0"},
    {"LC_ALL": "POSIX", "PYTHONUTF8": "0"},
    {"LANG": "C", "PYTHONUTF8": "0"},
    {"LC_ALL": "C"},
]


@pytest.mark.parametrize(
    "locale", LOCALES, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items())
)
def test_memory_and_print_mode_speak_utf8_under_a_non_utf8_locale(tmp_path, locale):
    project = tmp_path / "p"
    project.mkdir()
    env = _env(tmp_path, **locale)
    fact = "Café naïve — 日本語 ✓"
    with ScriptedOpenAIServer(lambda body: "réponse: 日本語 ✓") as server:
        configure_project(project, server)
        written = _veil(tmp_path, project, "memory", "write", "-", env=env, stdin=fact.encode())
        shown = _veil(tmp_path, project, "memory", "show", env=env)
        answered = _veil(tmp_path, project, "-p", "dis 日本語", env=env)
        sent = server.requests[0].user_texts()
    assert written.returncode == 0, written.stderr.decode()
    assert written.stdout == b"written\n"
    memory = project / ".veil" / "memory" / "agents" / "default" / "MEMORY.md"
    assert fact in memory.read_bytes().decode("utf-8")  # UTF-8 on disk, no mojibake
    assert shown.returncode == 0, shown.stderr.decode()
    assert fact in shown.stdout.decode("utf-8")
    assert answered.returncode == 0, answered.stderr.decode()
    assert answered.stdout.decode("utf-8") == "réponse: 日本語 ✓\n"
    assert sent == ["dis 日本語"]


def test_the_store_keeps_a_message_holding_a_lone_surrogate(tmp_path):
    store = Store(tmp_path / "context.db", write_behind=False)
    try:
        store.create_session("sess_1", "default", None, {})
        message = {"role": "tool", "tool_call_id": "c\udce9", "content": "caf\udce9"}
        assert store.append_message("sess_1", 0, 1, message) == 1
        assert store.messages("sess_1") == [
            (1, {"role": "tool", "tool_call_id": f"c{REPLACEMENT}", "content": f"caf{REPLACEMENT}"})
        ]
    finally:
        store.close()
