"""A credential as a request's ``model`` is answered 400 in the API's own error shape, naming the
field without the value, and goes nowhere: not upstream, not into the store (sessions, usage
rows), not into the answer. Before, the key was forwarded as the model, echoed back as the
answer's ``model`` and stored in the usage table. ``--upstream-model`` refuses one as well."""

from __future__ import annotations

import httpx
import openai
import pytest

from veil.core.errors import ConfigError
from veil.testing.cli import run_veil

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
REFUSAL = "model: this looks like an API key or token, not a model name"
MESSAGES = [{"role": "user", "content": "hi"}]
FOLLOW_UP = [
    *MESSAGES,
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "go"},
]
"""The client's next request in the conversation :func:`_converse` started."""


def _files_holding(folder, secret: str) -> list:
    """Every file under ``folder`` whose bytes hold ``secret`` (the store and its WAL too)."""
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def _converse(run, path: str = "/v1/chat/completions") -> None:
    """One exchange under a real model name, so the next request continues a conversation the
    proxy holds (its session exists: before, only a new session checked the model name)."""
    body = {"model": "gpt-4o-mini", "max_tokens": 64, "messages": MESSAGES}
    with httpx.Client(base_url=run.url, timeout=60) as http:
        r = http.post(path, json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    assert len(run.upstream.requests) == 1


def _nothing_went_anywhere(run) -> None:
    """The key reached neither the upstream (only :func:`_converse`'s request did) nor a file
    under ``.veil/`` (sessions, messages, usage rows, the proxy's conversation map)."""
    assert len(run.upstream.requests) == 1
    assert not run.upstream.saw(KEY)
    assert _files_holding(run.veil.config.project_dir / ".veil", KEY) == []
    assert [s["model"] for s in run.veil.list_sessions()] == ["gpt-4o-mini"]


def test_openai_sdk_gets_a_400_and_nothing_is_forwarded(run_proxy):
    run = run_proxy(["hello"], default="never sent")
    _converse(run)
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=KEY, messages=FOLLOW_UP)
    assert caught.value.status_code == 400
    error = caught.value.body
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(REFUSAL)
    assert KEY not in caught.value.response.text
    _nothing_went_anywhere(run)


@pytest.mark.parametrize("upstream_model", [None, "gpt-4o-mini"])
def test_a_streamed_request_is_refused_too_also_when_the_upstream_model_is_fixed(
    run_proxy, upstream_model
):
    # with --upstream-model the request's model is not sent on, but a key there is still a
    # key in the wrong field: refused rather than carried into the conversation
    run = run_proxy(["hello"], default="never sent", upstream_model=upstream_model)
    _converse(run)
    body = {"model": KEY, "messages": FOLLOW_UP, "stream": True}
    with httpx.Client(base_url=run.url, timeout=60) as http:
        r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["message"].startswith(REFUSAL)
    assert KEY not in r.text
    _nothing_went_anywhere(run)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_anthropic_routes_answer_in_anthropics_error_shape(run_proxy, path):
    run = run_proxy(["hello"], default="never sent")
    _converse(run, "/v1/messages")
    body = {"model": KEY, "max_tokens": 64, "messages": FOLLOW_UP}
    with httpx.Client(base_url=run.url, timeout=60) as http:
        r = http.post(path, json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith(REFUSAL)
    assert KEY not in r.text
    _nothing_went_anywhere(run)


def test_a_model_name_still_goes_through(run_proxy):
    run = run_proxy(["hello"])
    client = openai.OpenAI(base_url=run.url + "/v1", api_key="unused", max_retries=0)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message.content == "hello"
    assert run.upstream.requests[0].body["model"] == "gpt-4o-mini"


def test_upstream_model_option_refuses_a_key(run_proxy, tmp_path):
    from veil_proxy import create_app

    run = run_proxy(default="never sent")
    with pytest.raises(ConfigError) as caught:
        create_app(run.veil, upstream_model=KEY)
    assert str(caught.value).startswith("--upstream-model: this looks like an API key")
    assert KEY not in str(caught.value)

    project = tmp_path / "cli"
    project.mkdir()
    proc = run_veil(project, "proxy", "--port", "0", "--upstream-model", KEY, home=tmp_path / "h")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--upstream-model: this looks like an API key" in proc.stderr
    assert "Traceback" not in proc.stderr and KEY not in proc.stdout + proc.stderr
