"""The secret redactor (veil.core.safety.redaction, veil.core.safety.secret_formats): its precision and recall
over a corpus of credential shapes and look-alikes, the two gates agreeing, idempotence, names
and values of assignments, the secrets veil knows, the setting, and the guard that keeps a
placeholder out of files."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import string
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.core.errors import ConfigError
from veil.core.safety import redaction
from veil.core.safety.redaction import Redactor, environment_secrets, placeholders
from veil.core.safety.secret_formats import RULES, secret_name, secret_value
from veil.core.settings import load_config
from veil.core.types import ToolResult

GATES = ["plain"] + (["aho"] if redaction._aho is not None else [])
HERE = Path(__file__).resolve().parent
TRAJ = HERE.parent / ".." / "shared" / "data" / "trajectories" / "mini-swe-agent"


def _corpus():
    spec = importlib.util.spec_from_file_location("redaction_corpus", HERE / "redaction_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


corpus = _corpus()
secret_cases, lookalike_cases = corpus.secret_cases, corpus.lookalike_cases
known_secret_case = corpus.known_secret_case


def test_the_corpus_is_big_enough():
    cases = secret_cases()
    assert len(cases) >= 30 and sum(len(c.secrets) for c in cases) >= 30
    assert len(lookalike_cases()) >= 30
    # distinct shapes: every expected NAME family is represented more than a handful of times
    assert len({name for c in cases for _, name in c.secrets}) >= 25


@pytest.mark.parametrize("gate", GATES)
def test_precision_and_recall_over_the_corpus(gate, capsys):
    """Recall: share of the corpus's secrets that are gone from the output, each under its
    expected NAME. Precision: share of changed texts that held a secret (a look-alike that
    changes is a false positive)."""
    red = Redactor([known_secret_case()[0]], gate=gate)
    found = missed = wrong_name = 0
    for case in secret_cases():
        out = red.text(case.text)
        for secret, name in case.secrets:
            if secret in out:
                missed += 1
            else:
                found += 1
                wrong_name += f"[redacted:{name}]" not in out
    key, text = known_secret_case()
    out = red.text(text)
    found, missed = found + (key not in out), missed + (key in out)
    wrong_name += "[redacted:veil_known]" not in out
    changed_lookalikes = [label for label, t in lookalike_cases() if red.text(t) != t]
    recall = found / (found + missed)
    precision = found / (found + len(changed_lookalikes))
    with capsys.disabled():
        print(
            f"\nredaction corpus ({gate} gate): {found + missed} secrets in "
            f"{len(secret_cases()) + 1} texts, {len(lookalike_cases())} look-alikes: "
            f"recall {recall:.3f}, precision {precision:.3f}"
        )
    assert recall == 1.0
    assert precision == 1.0, changed_lookalikes
    assert wrong_name == 0


@pytest.mark.parametrize("gate", GATES)
def test_only_the_secret_goes_and_context_stays(gate):
    red = Redactor(gate=gate)
    case = next(c for c in secret_cases() if c.label == "AWS credentials file")
    out = red.text(case.text)
    assert out == (
        "[default]\naws_access_key_id = [redacted:aws_access_key]\n"
        "aws_secret_access_key = [redacted:aws_secret_key]\n"
    )
    url = next(c for c in secret_cases() if c.label == "Database URL")
    assert (
        red.text(url.text)
        == "DATABASE_URL=postgres://app:[redacted:url_password]@db.internal:5432/app"
    )


def test_redacting_is_idempotent_and_returns_the_same_object_when_clean():
    red = Redactor()
    for case in secret_cases():
        once = red.text(case.text)
        assert red.text(once) == once, case.label
    for _, text in lookalike_cases():
        assert red.text(text) is text


@pytest.mark.skipif(redaction._aho is None, reason="ahocorasick-rs is not installed")
def test_both_gates_agree_on_real_tool_output():
    if not TRAJ.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{TRAJ} is missing in CI")
        pytest.skip(f"reference data not present at {TRAJ}")
    texts = []
    for path in sorted(TRAJ.glob("*.json"))[:6]:
        for message in json.loads(path.read_text(encoding="utf-8")).get("messages", []):
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
    secrets = [s for c in secret_cases() for s, _ in c.secrets]
    rnd = random.Random(5)
    plain, aho = Redactor(gate="plain"), Redactor(gate="aho")
    for text in texts[:300]:
        cut = rnd.randrange(len(text) + 1)
        mixed = text[:cut] + " " + rnd.choice(secrets) + " " + text[cut:]
        assert plain.text(text) == aho.text(text)
        assert plain.text(mixed) == aho.text(mixed)
    # no real trajectory holds a credential: nothing is changed there
    assert all(aho.text(t) is t for t in texts)


_PIECES = [s for c in secret_cases()[:20] for s, _ in c.secrets] + [
    "API_KEY=",
    "password: ",
    '"token": "',
    "Authorization: Bearer ",
    " key=",
    "--token ",
    "://u:",
    "@",
    "\n",
    "é",
    "sk-",
    "[redacted:x]",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_PIECES),
            st.text(alphabet=string.ascii_letters + string.digits + " =:_-\"'\n", max_size=30),
        ),
        max_size=12,
    )
)
def test_gates_agree_and_redaction_is_idempotent_on_generated_text(pieces):
    text = "".join(pieces)
    plain = Redactor(gate="plain").text(text)
    if redaction._aho is not None:
        assert Redactor(gate="aho").text(text) == plain
    assert Redactor(gate="plain").text(plain) == plain


def test_every_plain_gate_word_covers_its_rules_anchors():
    """The plain gate of a rule with gate words must open whenever one of its anchors occurs."""
    for rule in RULES:
        for anchor in rule.anchors:
            if rule.gate_words:
                assert any(w in anchor.lower() for w in rule.gate_words), (rule.name, anchor)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("aws_secret_access_key", True),
        ("PGPASSWORD", True),
        ("DB_PASS", True),
        ("apiKey", True),
        ("X-API-Key", True),
        ("client_secret", True),
        ("_authToken", True),
        ("GITLAB_PAT", True),
        ("TOKEN_LIMIT", False),
        ("max_tokens", False),
        ("password_field", False),
        ("key", False),
        ("PWD", False),
        ("sort_key", False),
        ("primary_key", False),
        ("public_key", False),
        ("next_token", False),
        ("eos_token", False),
        ("monkey", False),
        ("api_key_env", False),
    ],
)
def test_secret_names(name, secret):
    assert secret_name(name) is secret


@pytest.mark.parametrize(
    ("value", "password", "secret"),
    [
        ("hunter22!", True, True),
        ("a8Fz0qLm2Wx7", False, True),
        ("9f86d081884c7d659a2feaa0c55ad015", False, True),
        ("Required", True, False),
        ("changeme", True, False),
        ("${DB_PASSWORD}", True, False),
        ("********", True, False),
        ("os.environ", False, False),
        ("/etc/app/secret.key", False, False),
        ("12345678", True, False),
        ("true", False, False),
        ("MY_SECRET_TOKEN", False, False),
        ("my-secret-pass", True, False),
        ("passwordField", True, False),
        ("your_api_key_here", False, False),
        ("aaaa1111", False, False),
    ],
)
def test_secret_values(value, password, secret):
    assert secret_value(value, password=password) is secret


def test_environment_secrets_follow_the_name_and_value_rules():
    env = {
        "OPENAI_API_KEY": "k" + "9Xq2LmP0aZ7wE4rT1yU6iO3pA8sD5f",
        "HOME": "/root",
        "PWD": "/work/app",
        "MAX_TOKENS": "4096",
        "DB_PASSWORD": "s3cr3t-Pw!",
        "GIT_ASKPASS": "/usr/bin/askpass",
        "DEBUG_TOKEN": "true",
    }
    assert sorted(environment_secrets(env)) == sorted([env["OPENAI_API_KEY"], env["DB_PASSWORD"]])


def test_the_project_knows_the_keys_of_both_auth_files(project, monkeypatch, tmp_path):
    """A project auth.json that overrides a provider's key leaves the user's key known too."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("VEIL_HOME", str(home))
    monkeypatch.setenv(
        "VEIL_ALLOW_PROJECT_PROVIDERS", "1"
    )  # a provider of the project file: the user allows it (issue 17)
    user_key, project_key = "u" * 3 + "9fA2kL0pQ7zX4wV1", "p" * 3 + "7gH3jK9sD2fL6mN0"
    (home / "auth.json").write_text(
        json.dumps({"providers": {"openai": {"type": "openai", "api_key": user_key}}})
    )
    (project / ".veil").mkdir()
    (project / ".veil" / "auth.json").write_text(
        json.dumps({"providers": {"openai": {"type": "openai", "api_key": project_key}}})
    )
    monkeypatch.setenv("VEIL_HTTP_TOKEN", "tok-" + "Zz81Yy72Xx63Ww54")
    config = load_config(project)
    known = config.redactor.known
    assert user_key in known and project_key in known and "tok-Zz81Yy72Xx63Ww54" in known
    assert config.redactor.text(f"a {user_key} b") == "a [redacted:veil_known] b"


def test_a_project_file_may_not_turn_redaction_off(project, monkeypatch):
    (project / ".veil").mkdir()
    (project / ".veil" / "settings.json").write_text('{"security": {"redactSecrets": false}}')
    with pytest.raises(ConfigError) as err:
        load_config(project)
    message = str(err.value)
    assert "settings.json: security.redactSecrets" in message
    assert "VEIL_SECURITY__REDACT_SECRETS=false" in message
    (project / ".veil" / "settings.json").write_text('{"security": {"redactSecrets": true}}')
    assert load_config(project).redactor.enabled
    (project / ".veil" / "settings.json").unlink()
    monkeypatch.setenv("VEIL_SECURITY__REDACT_SECRETS", "false")
    config = load_config(project)
    assert not config.settings.security.redact_secrets and not config.redactor.enabled
    text = next(c for c in secret_cases() if c.label == "GitHub classic token in .env").text
    assert config.redactor.text(text) is text


def test_messages_and_tool_call_arguments():
    red = Redactor()
    token = next(c for c in secret_cases() if c.label == "GitHub classic token in .env").secrets
    token = token[0][0]
    arguments = json.dumps({"command": f"git push https://{token}@github.com/acme/app"})
    message = {
        "role": "assistant",
        "content": f"using {token}",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}},
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"path": "."}'},
            },
        ],
    }
    out = red.message(message)
    assert out is not message and message["content"] == f"using {token}"  # input untouched
    assert out["content"] == "using [redacted:github_token]"
    assert json.loads(out["tool_calls"][0]["function"]["arguments"]) == {
        "command": "git push https://[redacted:github_token]@github.com/acme/app"
    }
    assert out["tool_calls"][1] is message["tool_calls"][1]  # clean calls are kept as they are
    clean = {"role": "user", "content": "hello"}
    assert red.message(clean) is clean
    # a structure: a secret-named key whose value looks random is replaced whole
    assert red.value({"env": {"SERVICE_TOKEN": "a8Fz0qLm2Wx7Yt5", "DEBUG": "1"}}) == {
        "env": {"SERVICE_TOKEN": "[redacted:assignment:SERVICE_TOKEN]", "DEBUG": "1"}
    }
    result = ToolResult("ok", meta={"hits": [{"content": f"token {token}"}]})
    captured = red.tool_result(result, "ok")
    assert captured.meta == {"hits": [{"content": "token [redacted:github_token]"}]}
    assert red.tool_result(ToolResult("plain"), None).content == "plain"


@pytest.mark.parametrize("gate", GATES)
def test_a_password_runs_past_its_punctuation_to_the_end_of_the_value(gate):
    """Red-team misses (issue 17): "&" cut the value, leaving its tail in the store; a query
    parameter after a token still ends it."""
    red = Redactor(gate=gate)
    assert red.text("password: Tr0ub4dor&3xyzQ") == "password: [redacted:assignment:password]"
    assert (
        red.text("DB_PASSWORD=hunter2&Sup3r$ecretTail\nDEBUG=1")
        == "DB_PASSWORD=[redacted:assignment:DB_PASSWORD]\nDEBUG=1"
    )
    assert (
        red.text("GET /cb?access_token=aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW&page=2&sort=asc")
        == "GET /cb?access_token=[redacted:assignment:access_token]&page=2&sort=asc"
    )
    assert red.text("export DB_PASSWORD=$VAULT_DB_PASSWORD") == (
        "export DB_PASSWORD=$VAULT_DB_PASSWORD"
    )


@pytest.mark.parametrize("gate", GATES)
def test_terminal_colour_codes_do_not_hide_a_token(gate):
    """An escape sequence glued to a token (``ESC[31mghp_...``) is a boundary: the token goes,
    and with it the colour codes of that text; a coloured text without a secret is untouched."""
    red = Redactor(gate=gate)
    token = "gh" + "p_" + "1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU6v"
    assert red.text(f"token: \x1b[31m{token}\x1b[0m\n") == "token: [redacted:github_token]\n"
    assert red.text(f"printf 'token: \\033[31m{token}\\033[0m'") == (
        "printf 'token: [redacted:github_token]'"
    )
    # in a tool call's JSON arguments, the escape is written \u001b
    args = json.dumps({"command": f"printf 'token: \x1b[31m{token}\x1b[0m'"})
    assert json.loads(red.arguments(args)) == {"command": "printf 'token: [redacted:github_token]'"}
    sha = "\x1b[33mcommit 3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c\x1b[m\n"
    assert red.text(sha) is sha


@pytest.mark.parametrize("gate", GATES)
def test_cookies_and_url_encoded_keys(gate):
    red = Redactor(gate=gate)
    sid = "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW"
    assert red.text(f"Cookie: session={sid}; theme=dark") == (
        "Cookie: session=[redacted:cookie]; theme=dark"
    )
    assert red.text(f"Set-Cookie: sid={sid}; Path=/; Max-Age=3600; HttpOnly") == (
        "Set-Cookie: sid=[redacted:cookie]; Path=/; Max-Age=3600; HttpOnly"
    )
    assert red.text(f"/x?api_key%3D{sid}%26page%3D2") == (
        "/x?api_key%3D[redacted:assignment:api_key]%26page%3D2"
    )


def _aws_pair(seed: int) -> tuple[str, str]:
    rnd = random.Random(seed)
    b32 = string.ascii_uppercase + "234567"
    b64 = string.ascii_letters + string.digits + "+/"
    key_id = "AK" + "IA" + "".join(rnd.choice(b32) for _ in range(16))
    while True:  # as any real secret: both cases and a digit
        secret = "".join(rnd.choice(b64) for _ in range(40))
        kinds = (str.isupper, str.islower, str.isdigit)
        if all(any(kind(c) for c in secret) for kind in kinds):
            return key_id, secret


@pytest.mark.parametrize("gate", GATES)
def test_a_bare_aws_secret_goes_only_near_its_key_id(gate):
    """Issue 33: a 40-character secret printed on its own after its key id was kept (the
    credential rules need a telling name). Near an AKIA / ASIA id, within three lines either
    way, it is that key's secret; elsewhere a random 40-character token stays."""
    red = Redactor(gate=gate)
    key_id, secret = _aws_pair(33)
    # the id on one line, the secret on the next; then the secret one line before the id
    assert red.text(f"{key_id}\n{secret}\n") == (
        "[redacted:aws_access_key]\n[redacted:aws_secret_key]\n"
    )
    assert red.text(f"{secret}\n{key_id}") == "[redacted:aws_secret_key]\n[redacted:aws_access_key]"
    # three lines away still counts, four lines away does not
    near = f"{key_id}\n" + "x\n" * 2 + f"{secret}\n"
    far = f"{key_id}\n" + "x\n" * 3 + f"{secret}\n"
    assert secret not in red.text(near)
    assert red.text(far) == "[redacted:aws_access_key]\n" + "x\n" * 3 + f"{secret}\n"
    # with no key id around, a random 40-character token is no credential
    alone = f"build id {secret}\n"
    assert red.text(alone) is alone
    # next to a key id: a git SHA (one case), a path, AWS's documented example key, a longer
    # base-64 blob, a JWT segment and an identifier are not secrets
    sha = "3f2a9b1c4d5e6f708192a3b4c5d6e7f8091a2b3c"
    path = "home/runner/work/MyProject/MyProject/src"
    example = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    blob = secret + "AbC4"
    kept = [
        f"commit {sha}",
        f"cd /{path}",
        f"secret: {example}",
        f"data: {blob}==",
        f"sig: abc.{secret}.xyz",
        f"name: my_{secret}",
    ]
    for line in kept:
        assert red.text(f"{key_id}\n{line}\n") == f"[redacted:aws_access_key]\n{line}\n", line
    # once redacted, the text is redacted again to itself (the id's placeholder still anchors)
    once = red.text(f"{key_id}\n{secret}")
    assert red.text(once) == once
    assert red.text(f"[redacted:aws_access_key]\n{secret}") == (
        "[redacted:aws_access_key]\n[redacted:aws_secret_key]"
    )


def test_placeholders_are_counted():
    text = "a [redacted:openai_key] b [redacted:openai_key] [redacted] [redacted:jwt]"
    assert placeholders(text) == {"[redacted:openai_key]": 2, "[redacted:jwt]": 1}


def test_the_write_and_edit_tools_refuse_to_put_a_placeholder_in_a_file(make_veil, project):
    """The model saw [redacted:NAME] where a file held a secret: writing that back would lose
    the secret, so write and edit refuse to add a placeholder (and keep ones already there)."""
    from veil.core.types import ToolContext

    (project / ".env").write_text("API_TOKEN=real-Secret-9f8e7d\nDEBUG=1\n")
    veil = make_veil()
    session = veil.new_session()
    ctx = ToolContext(session=session, tool_call_id="c1")
    write, edit = veil.tools["write"].handler, veil.tools["edit"].handler
    out = write(ctx, {"path": ".env", "content": "API_TOKEN=[redacted:assignment:API_TOKEN]\n"})
    assert out.is_error and "content: holds [redacted:assignment:API_TOKEN]" in out.content
    assert (project / ".env").read_text() == "API_TOKEN=real-Secret-9f8e7d\nDEBUG=1\n"
    out = edit(
        ctx,
        {"path": ".env", "old_string": "DEBUG=1", "new_string": "DEBUG=0 # [redacted:jwt]"},
    )
    assert out.is_error and "new_string: holds [redacted:jwt]" in out.content
    out = edit(ctx, {"path": ".env", "old_string": "DEBUG=1", "new_string": "DEBUG=0"})
    assert not out.is_error
    assert (project / ".env").read_text() == "API_TOKEN=real-Secret-9f8e7d\nDEBUG=0\n"
    (project / "notes.md").write_text("keys show as [redacted:openai_key]\n")
    out = edit(ctx, {"path": "notes.md", "old_string": "keys", "new_string": "Keys"})
    assert not out.is_error  # the placeholder was already there: nothing added
