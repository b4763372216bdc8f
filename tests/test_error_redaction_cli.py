"""A provider's error message reaches the user with known keys removed, but only the keys: a
word that shares a few characters with a key stays whole (issue 30). Through ``veil -p`` in a
subprocess against the scripted server, whose key is ``sk-scripted-test-key``."""

from __future__ import annotations

import json

from veil.testing.cli import run_veil
from veil.testing.scripted_server import SCRIPTED_API_KEY, Reply, ScriptedOpenAIServer


def _home(tmp_path, server):
    home = tmp_path / "home"
    home.mkdir()
    auth = {
        "providers": {"scripted": server.provider()},
        "models": {"main": {"model": "scripted-main", "contextWindow": 64000}},
    }
    (home / "auth.json").write_text(json.dumps(auth))
    project = tmp_path / "project"
    project.mkdir()
    return home, project


def test_a_word_sharing_part_of_the_key_is_not_redacted_but_the_key_is(tmp_path):
    assert SCRIPTED_API_KEY == "sk-scripted-test-key"  # "scripted-" is 9 of its characters
    message = (
        f"The model scripted-main does not exist (key {SCRIPTED_API_KEY}; "
        f"prefix {SCRIPTED_API_KEY[:14]}...)"
    )
    with ScriptedOpenAIServer(default=Reply(message, status=404)) as server:
        home, project = _home(tmp_path, server)
        done = run_veil(project, "-p", "hi", home=home)
    assert done.returncode != 0
    err = done.stderr
    assert "Traceback" not in err
    assert "The model scripted-main does not exist" in err, err
    # the whole key and its 14-character prefix (a fragment of 12 or more) are gone
    assert SCRIPTED_API_KEY not in err and SCRIPTED_API_KEY[:14] not in err, err
    assert "[redacted" in err
