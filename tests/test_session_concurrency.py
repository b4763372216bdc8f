"""Two processes on one session (issue 19 "Sessions and stores"): a change never undoes another's,
and a request that would overlap another process's change is refused before it stores anything.

Every test runs veil in real separate processes (``python -m veil.cli``) against a scripted
OpenAI-compatible server on 127.0.0.1 (:mod:`veil.testing.scripted_server`), as a user would run it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from veil.core.errors import SessionConflict
from veil.core.store import Store
from veil.testing.postgres import project_store
from veil.testing.scripted_server import (
    RecordedRequest,
    Reply,
    ScriptedOpenAIServer,
    configure_project,
)


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        VEIL_HOME=str(tmp_path / "home"),
        VEIL_ALLOW_PROJECT_PROVIDERS="1",  # configure_project's provider is the project's (issue 17)
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )


def _veil(tmp_path: Path, project: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        **kw,
    )


def _last_user(body: dict) -> str:
    """The user's last message in a request body, veil's context notes left out."""
    users = RecordedRequest("POST", "/v1/chat/completions", body=body).user_texts()
    return users[-1] if users else ""


def _wait_for(predicate, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _stored(project: Path, session_id: str) -> tuple[list[str], dict]:
    store = project_store(project, write_behind=False)  # the file, or the test's PostgreSQL
    try:
        contents = [m.get("content") for _, m in store.messages(session_id)]
        return contents, store.get_session(session_id)
    finally:
        store.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def test_a_turn_overlapping_another_process_turn_is_refused_before_anything_is_stored(
    tmp_path, project
):
    release = threading.Event()

    def responder(body: dict) -> Reply:
        text = _last_user(body)
        return Reply("slow answer", wait=release) if text == "slow" else Reply(f"re: {text}")

    with ScriptedOpenAIServer(responder) as server:
        configure_project(project, server)
        first = _veil(tmp_path, project, "-p", "first", "--json")
        assert first.returncode == 0, first.stderr
        sid = json.loads(first.stdout)["sessionId"]
        holder = subprocess.Popen(
            [sys.executable, "-m", "veil.cli", "--project", str(project)]
            + ["--resume", sid, "-p", "slow", "--json"],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: any(_last_user(r.body) == "slow" for r in server.requests), "turn A")
            second = _veil(tmp_path, project, "--resume", sid, "-p", "third", "--json")
            cont = _veil(tmp_path, project, "-c", "-p", "fourth")
        finally:
            release.set()
            out, err = holder.communicate(timeout=120)
    assert holder.returncode == 0, err
    assert json.loads(out)["final"] == "slow answer"
    # the second process: a clear error, no traceback, nothing stored, the model never asked
    assert second.returncode == 1
    error = json.loads(second.stdout)["error"]
    assert error["code"] == "SESSION_BUSY" and sid in error["message"]
    assert cont.returncode == 1 and "is busy" in cont.stderr
    assert "Traceback" not in second.stderr + cont.stderr
    assert [_last_user(r.body) for r in server.requests] == ["first", "slow"]
    contents, row = _stored(project, sid)
    assert contents == ["first", "re: first", "slow", "slow answer"]
    assert row["version"] == 6  # 4 messages + the state saved at the end of each of 2 turns


def test_a_copy_loaded_before_another_process_compacted_cannot_undo_the_compaction(
    tmp_path, project, monkeypatch
):
    from veil.core.app import open_veil

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(
        "VEIL_ALLOW_PROJECT_PROVIDERS", "1"
    )  # configure_project's provider is the project's (issue 17)

    def responder(body: dict) -> str:
        system = body["messages"][0]["content"] if body["messages"] else ""
        if "durable facts" in system:  # memory extraction before compaction
            return "- none"
        if "summar" in system.lower():
            return "SUMMARY: the user said one, two and three."
        return f"re: {_last_user(body)}"

    # messages long enough that the summary shrinks them (a compaction that does not is
    # refused, issue 19)
    more = ", and keep every detail of this message in mind" * 4
    with ScriptedOpenAIServer(responder) as server:
        configure_project(project, server)
        first = _veil(tmp_path, project, "-p", "one" + more, "--json")
        sid = json.loads(first.stdout)["sessionId"]
        for text in ("two", "three"):
            assert _veil(tmp_path, project, "--resume", sid, "-p", text + more).returncode == 0
        veil = open_veil(project)  # this process loads its copy now
        try:
            session = veil.load_session(sid)
            compacted = _veil(tmp_path, project, "compact", "--session", sid, "--json")
            assert compacted.returncode == 0, compacted.stderr
            new_size = json.loads(compacted.stdout)["newSize"]
            assert new_size > 0
            with pytest.raises(SessionConflict) as info:
                veil.run_turn(session, "four", stream=False)
            assert info.value.http_status == 409 and sid in info.value.message
            contents, row = _stored(project, sid)
            assert len(contents) == 6  # "four" was not stored
            assert row["compact_size"] == new_size
            assert row["compact_summary"].startswith("SUMMARY")
            # a fresh copy works, and keeps the compaction
            fresh = veil.load_session(sid)
            assert veil.run_turn(fresh, "four", stream=False).final == "re: four"
        finally:
            veil.close()
    contents, row = _stored(project, sid)
    assert contents[-2:] == ["four", "re: four"]
    assert row["compact_size"] == new_size
    assert row["compact_summary"].startswith("SUMMARY")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path: Path, project: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "serve", "--port", str(port), "--project", str(project)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(_env(tmp_path), VEIL_DISABLE_PLUGINS="veil_repl"),
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"{base}/health", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"veil serve did not start:\n{proc.stdout.read()}")
            time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_two_servers_on_one_session_answer_409_to_the_overlapping_request(tmp_path, project):
    release = threading.Event()

    def responder(body: dict) -> Reply:
        text = _last_user(body)
        return Reply(f"re: {text}", wait=release if text == "slow" else None)

    with ScriptedOpenAIServer(responder) as server:
        configure_project(project, server)
        first, base1 = _serve(tmp_path, project)
        second, base2 = _serve(tmp_path, project)
        try:
            sid = httpx.post(f"{base1}/sessions", timeout=30).json()["id"]
            results: dict[str, httpx.Response] = {}

            def post_slow() -> None:
                results["slow"] = httpx.post(
                    f"{base1}/sessions/{sid}/messages", json={"content": "slow"}, timeout=120
                )

            thread = threading.Thread(target=post_slow)
            thread.start()
            _wait_for(lambda: any(_last_user(r.body) == "slow" for r in server.requests), "turn 1")
            busy = httpx.post(
                f"{base2}/sessions/{sid}/messages", json={"content": "other"}, timeout=60
            )
            streamed = httpx.post(
                f"{base2}/sessions/{sid}/messages/stream", json={"content": "x"}, timeout=60
            )
            compact = httpx.post(f"{base2}/sessions/{sid}/compact", timeout=60)
            close = httpx.post(f"{base2}/sessions/{sid}/close", timeout=60)
            release.set()
            thread.join(120)
            after = httpx.post(
                f"{base2}/sessions/{sid}/messages", json={"content": "after"}, timeout=60
            )
            listed = httpx.get(f"{base2}/sessions/{sid}", timeout=30).json()
        finally:
            release.set()
            _stop(first)
            _stop(second)
    for response in (busy, streamed, compact, close):
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "SESSION_BUSY"
    assert results["slow"].status_code == 200 and results["slow"].json()["final"] == "re: slow"
    # the second server's next request, after the first turn ended, sees that turn
    assert after.status_code == 200, after.text
    assert listed["messageCount"] == 4 and listed["closed"] is False
    assert [_last_user(r.body) for r in server.requests] == ["slow", "after"]
    contents, _ = _stored(project, sid)
    assert contents == ["slow", "re: slow", "after", "re: after"]


def test_the_session_lock_is_reentrant_on_a_thread_and_exclusive_between_threads(tmp_path):
    from veil.core.errors import SessionBusy
    from veil.core.session_locks import SessionLocks

    locks = SessionLocks(tmp_path / "context.db")
    other = SessionLocks(tmp_path / "context.db")  # another opener of the store, same files
    seen: list[str] = []

    def try_hold(which: SessionLocks) -> None:
        try:
            with which.hold("sess_1", "a test"):
                seen.append("held")
        except SessionBusy as exc:
            seen.append(exc.code)

    with locks.hold("sess_1"), locks.hold("sess_1"):  # a turn that compacts: re-entered
        for which in (locks, other):
            thread = threading.Thread(target=try_hold, args=(which,))
            thread.start()
            thread.join()
        with locks.hold("sess_2"):  # another session is independent
            pass
        locks.check_free("sess_1")  # held by this opener: its callers queue, no error
        with pytest.raises(SessionBusy):  # held by another opener (as by another process)
            other.check_free("sess_1")
    other.check_free("sess_1")
    try_hold(other)  # released: free again
    assert seen == ["SESSION_BUSY", "SESSION_BUSY", "held"]
    assert locks.path("sess_1") == tmp_path / "locks" / "sess_1.lock"


def test_writes_from_an_out_of_date_copy_are_refused_whole(tmp_path):
    from veil.core.errors import SessionConflict as Conflict

    store = Store(tmp_path / "context.db", write_behind=False)
    try:
        store.create_session("sess_1", "default", None, {})
        v1 = store.append_message("sess_1", 0, 0, {"role": "user", "content": "a"}, None)
        assert v1 == 1
        assert store.update_session("sess_1", expect_version=1, state={"k": 1}) == 2
        assert store.update_session("sess_1", title="t") == 2  # metadata: no new version
        with pytest.raises(Conflict):
            store.append_message(
                "sess_1", 1, 0, {"role": "user", "content": "b"}, None, expect_version=1
            )
        with pytest.raises(Conflict):
            store.update_session("sess_1", expect_version=1, compact_size=5)
        with pytest.raises(Conflict):  # idx taken: a conflict, not an IntegrityError
            store.append_message("sess_1", 0, 0, {"role": "user", "content": "c"}, None)
        row = store.get_session("sess_1")
        assert (row["version"], row["compact_size"], row["state"]) == (2, 0, {"k": 1})
        assert [m["content"] for _, m in store.messages("sess_1")] == ["a"]
    finally:
        store.close()


def test_a_lock_file_name_fits_a_file_system_whatever_the_id(tmp_path):
    """A 300-character id gave ``OSError: File name too long`` (255 bytes on ext4)."""
    from veil.core.session_locks import SessionLocks

    locks = SessionLocks(tmp_path / "context.db")
    assert locks.path("sess_0a1b2c3d4e5f").name == "sess_0a1b2c3d4e5f.lock"  # ids as made
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    names = {locks.path(long_a).name, locks.path(long_b).name}
    assert len(names) == 2 and all(len(n.encode()) <= 255 for n in names)
    with locks.hold(long_a):  # the file can be made
        assert locks.path(long_a).exists()
