"""Real coding agents in tests: installing one at a pinned version, running ``veil proxy`` in a
subprocess in front of a scripted upstream, and scripting the upstream's answers by step.

- :func:`install_agent` installs Claude Code, Codex or pi from npm, or mini-swe-agent from PyPI,
  at the version :data:`AGENTS` pins, into a cache folder reused by every test and run
  (``VEIL_TEST_AGENTS_DIR``, default ``~/.cache/veil-test-agents``), npm's download cache
  (``npm-cache``) with them. When the registry cannot be
  reached the test is skipped with the reason, except under ``CI=true``, where it fails.
- :class:`ProxyProcess` serves ``veil proxy`` (``python -m veil.cli proxy``) on a free loopback
  port for a project pointed at a :class:`veil.testing.scripted_server.ScriptedOpenAIServer`.
- :func:`by_step` makes a server script that answers step ``n`` of a task whatever the agent
  sends besides: the step is read from the id of the newest tool result in the request (the
  scripted calls are named ``<prefix><n>``), so a request veil fitted (old results as stubs,
  compacted turns) gets the same answer as the agent's whole history would.
- :func:`replay_per_step` reads the session log an agent wrote with ``veil replay`` (a
  subprocess) and :func:`replay_disagreements` compares its prompt tokens per step with what
  the proxy measured for the same session (:func:`proxy_requests`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock


@dataclass(frozen=True)
class Agent:
    """An agent the tests install: ``package`` at ``version`` from ``registry`` (``npm`` or
    ``pypi``), run as ``command``."""

    package: str
    version: str
    registry: str
    command: str


AGENTS = {
    "claude-code": Agent("@anthropic-ai/claude-code", "2.1.332", "npm", "claude"),
    "codex": Agent("@openai/codex", "0.171.0", "npm", "codex"),
    "pi": Agent("@mariozechner/pi-coding-agent", "0.73.1", "npm", "pi"),
    "mini-swe-agent": Agent("mini-swe-agent", "2.4.6", "pypi", "mini"),
}
"""The agents and the versions the tests pin."""

MINI_EXTRA = ("tenacity==9.2.1", "platformdirs==4.14.9")
"""mini-swe-agent's requirements that veil's test environment does not already hold (the rest:
litellm, openai, pydantic, jinja2, pyyaml, rich, typer, prompt_toolkit, python-dotenv,
requests are veil's own or its dependencies'). It is installed beside them, so it runs with the
test environment's litellm."""

INSTALL_TIMEOUT_S = 900

UNREACHABLE_MARKERS = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "Temporary failure in name resolution",
    "Failed to establish a new connection",
    "No matching distribution found",
    "Could not find a version that satisfies",
)
"""What npm and pip print when the registry cannot be reached (the install is then skipped
outside CI); any other failure fails the test."""


def agents_dir() -> Path:
    """The cache folder installs go to (``VEIL_TEST_AGENTS_DIR``, else
    ``~/.cache/veil-test-agents``)."""
    given = os.environ.get("VEIL_TEST_AGENTS_DIR")
    return Path(given) if given else Path.home() / ".cache" / "veil-test-agents"


def _unavailable(reason: str) -> None:
    """Skip the test with ``reason``, or fail it under ``CI=true`` (CI must run it)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the agent must be installable in CI)")
    pytest.skip(reason)


def install_agent(name: str) -> AgentInstall:
    """The agent ``name`` of :data:`AGENTS`, installed at its pinned version (once per cache
    folder; a file lock keeps parallel test processes from installing it twice).

    Raises:
        pytest.skip.Exception: the registry or its client cannot be reached (outside CI:
            :data:`UNREACHABLE_MARKERS` in its output, or npm missing).
        pytest.fail.Exception: the same under ``CI=true``, or the install broke otherwise.
    """
    agent = AGENTS[name]
    folder = agents_dir() / f"{name}-{agent.version}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    marker = folder / ".installed"
    with FileLock(str(folder) + ".lock"):
        if not marker.exists():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir()
            _install(agent, folder)
            marker.write_text(agent.version, encoding="utf-8")
    return AgentInstall(name, agent, folder)


def _install(agent: Agent, folder: Path) -> None:
    if agent.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            _unavailable("npm is not installed: it installs the agent")
        command = [
            npm,
            "install",
            "--prefix",
            str(folder),
            "--no-audit",
            "--no-fund",
            "--no-save",
            # one download cache for the three npm agents, kept with their installs (a CI cache
            # of agents_dir() keeps it too); what it holds is not asked of the registry again
            "--cache",
            str(folder.parent / "npm-cache"),
            "--prefer-offline",
            f"{agent.package}@{agent.version}",
        ]
    else:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(folder / "site"),
            f"{agent.package}=={agent.version}",
            *MINI_EXTRA,
        ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(folder, ignore_errors=True)
        _unavailable(f"installing {agent.package} {agent.version} timed out")
        return
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        output = done.stderr + done.stdout
        reason = f"installing {agent.package} {agent.version} failed:\n{output[-1500:]}"
        if any(marker in output for marker in UNREACHABLE_MARKERS):
            _unavailable(reason)
        pytest.fail(reason)


@dataclass(frozen=True)
class AgentInstall:
    """An installed agent: its ``name``, :class:`Agent` and install ``folder``."""

    name: str
    agent: Agent
    folder: Path

    def argv(self, *args: str) -> list[str]:
        """The command line that runs the agent with ``args``."""
        if self.agent.registry == "npm":
            return [str(self.folder / "node_modules" / ".bin" / self.agent.command), *args]
        return [sys.executable, "-m", "minisweagent.run.mini", *args]

    def env(self) -> dict[str, str]:
        """Variables the agent's command needs (``PYTHONPATH`` for mini-swe-agent)."""
        if self.agent.registry == "npm":
            return {}
        paths = [str(self.folder / "site"), os.environ.get("PYTHONPATH", "")]
        return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """Run the agent to its end (stdin closed, output captured)."""
        merged = {**os.environ, **self.env(), **env}
        return subprocess.run(
            self.argv(*args),
            cwd=cwd,
            env=merged,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProxyProcess:
    """``veil proxy`` in a subprocess on a free port of 127.0.0.1 (a context manager).

    Args:
        project: the project (its ``.veil/settings.json`` and ``auth.json`` point at the
            upstream).
        home: ``VEIL_HOME`` for the process.
        upstream_model: ``--upstream-model``.
        env: more variables for the process.

    Attributes:
        url: ``http://127.0.0.1:<port>``.
        log: the file the process's output goes to.
    """

    def __init__(
        self,
        project: Path,
        home: Path,
        upstream_model: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.project = project
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = project.parent / f"veil-proxy-{self.port}.log"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
        clean.update(
            VEIL_HOME=str(home),
            VEIL_ALLOW_PROJECT_PROVIDERS="1",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            HF_HUB_OFFLINE="1",
            **(env or {}),
        )
        self._env = clean
        self._argv = [
            sys.executable,
            "-m",
            "veil.cli",
            "proxy",
            "--port",
            str(self.port),
            "--project",
            str(project),
            "--upstream-model",
            upstream_model,
        ]
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ProxyProcess:
        import httpx

        handle = self.log.open("wb")
        self._proc = subprocess.Popen(
            self._argv, stdout=handle, stderr=subprocess.STDOUT, env=self._env, cwd=self.project
        )
        handle.close()
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{self.url}/v1/models", timeout=2)
                return self
            except httpx.TransportError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    pytest.fail(f"veil proxy did not start:\n{self.output()}")
                time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=20)

    def output(self) -> str:
        """What the process wrote so far."""
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""


def newest_result_id(body: Any) -> str | None:
    """The id of the call the newest tool result of a request answers, in any of the three
    APIs (chat ``tool`` messages, Anthropic ``tool_result`` blocks, Responses
    ``function_call_output`` items), or None when it holds none."""
    if not isinstance(body, dict):
        return None
    found: str | None = None
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            found = message.get("tool_call_id")
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found = block.get("tool_use_id")
    items = body.get("input")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
                found = item.get("call_id")
    return found


SUMMARY = "Summary: the agent read the project's files one by one and wrote its notes."
"""What :func:`by_step` answers a request that offers no tools (a summary veil's compaction,
or the agent's own, asks for)."""


def by_step(
    steps: Sequence[dict[str, Any] | str], prefix: str = "call_veil_"
) -> Callable[[dict[str, Any]], dict[str, Any] | str]:
    """A server script answering ``steps[n]``, where ``n`` follows the step whose call the
    request's newest tool result answers (0 when it answers none). Each step's tool calls get
    the ids ``<prefix><n>`` (and ``<prefix><n>_<k>`` for a second call and on); the last
    step repeats for anything after. A request that offers no tools gets :data:`SUMMARY`."""

    def numbered(n: int) -> dict[str, Any] | str:
        step = steps[min(n, len(steps) - 1)]
        if isinstance(step, str):
            return step
        calls = [
            {**c, "id": f"{prefix}{n}" + (f"_{k}" if k else "")}
            for k, c in enumerate(step.get("tool_calls") or [])
        ]
        return {**step, "tool_calls": calls}

    def script(body: dict[str, Any]) -> dict[str, Any] | str:
        if not body.get("tools"):
            return SUMMARY
        newest = newest_result_id(body)
        if not newest or not str(newest).startswith(prefix):
            return numbered(0)
        done = str(newest)[len(prefix) :].split("_", 1)[0]
        return numbered(int(done) + 1 if done.isdigit() else 0)

    return script


def proxy_requests(project: Path) -> dict[str, list[dict[str, Any]]]:
    """What ``veil proxy`` measured for each request of each conversation of ``project``
    (:meth:`veil_proxy.conversations.Conversation.record_request`): conversation key -> the
    figures of its requests in order. Read from the store once the proxy has stopped."""
    from veil.core.app import open_veil
    from veil.core.settings import load_config

    book = project / ".veil" / "proxy" / "sessions.json"
    keys = json.loads(book.read_text(encoding="utf-8")) if book.exists() else {}
    # read with the settings the proxy ran with (:class:`ProxyProcess` passes it no VEIL_*
    # variable of the test's): the project's provider is the scripted server the test wrote,
    # allowed as for the proxy, and the store is the project's own, even when the test itself
    # runs on another (``--veil-store=postgresql`` sets VEIL_STORE__* for each test)
    saved = {k: v for k, v in os.environ.items() if k.startswith("VEIL_")}
    for name in saved:
        if name.startswith("VEIL_STORE__"):
            del os.environ[name]
    os.environ["VEIL_ALLOW_PROJECT_PROVIDERS"] = "1"
    try:
        veil = open_veil(project, config=load_config(project), use_entry_points=False)
    finally:
        for name in [k for k in os.environ if k.startswith("VEIL_")]:
            if name not in saved:
                del os.environ[name]
        os.environ.update(saved)
    try:
        out = {}
        for key, session_id in keys.items():
            state = veil.live_session(session_id).state.get("proxy") or {}
            out[key] = list(state.get("requests") or [])
        return out
    finally:
        veil.close()


def write_settings(project: Path, upstream: Any, model: str, window: int, provider: str) -> None:
    """Point ``project`` at ``upstream``: ``.veil/auth.json`` with one provider of type
    ``provider`` (``openai`` or ``anthropic``) at the server, ``.veil/settings.json`` with
    ``model`` as models.main and its window of ``window`` tokens."""
    veil_dir = project / ".veil"
    veil_dir.mkdir(parents=True, exist_ok=True)
    base = upstream.url if provider != "anthropic" else upstream.url.removesuffix("/v1")
    entry = {**upstream.provider(), "type": provider, "base_url": base}
    (veil_dir / "auth.json").write_text(
        json.dumps({"providers": {"scripted": entry}}), encoding="utf-8"
    )
    settings = {"models": {"main": {"model": model, "contextWindow": window}}}
    (veil_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


REPLAY_TOLERANCE = 0.02
"""How far ``veil replay``'s figures for an agent's own log may be from what the proxy measured
for the same session (issue 31: within 2%)."""


def replay_per_step(log: Path, scratch: Path) -> list[int]:
    """``veil replay LOG --per-step`` in a subprocess (in a project and a ``VEIL_HOME`` of its
    own under ``scratch``): the prompt tokens of the ``full`` policy (the agent's whole history,
    nothing evicted) at each step of the session ``log`` holds.

    Raises:
        AssertionError: the command failed (its output in the message).
    """
    from veil.testing.cli import run_veil

    project = scratch / "replay-project"
    project.mkdir(parents=True, exist_ok=True)
    done = run_veil(project, "replay", str(log), "--per-step", home=scratch / "replay-home")
    assert done.returncode == 0, f"veil replay {log} failed:\n{done.stdout}\n{done.stderr}"
    (result,) = json.loads(done.stdout)["files"]
    return [int(step["prompt_tokens"]) for step in result["full"]["per_step"]]


def replay_disagreements(
    replayed: Sequence[int],
    measured: Sequence[Mapping[str, Any]],
    tolerance: float = REPLAY_TOLERANCE,
) -> list[str]:
    """Where ``veil replay``'s prompt tokens per step (:func:`replay_per_step`) and the proxy's
    figures for the same session (:func:`proxy_requests`, ``client_tokens`` per request) differ
    by more than ``tolerance``, one line per step; [] when they agree.

    Both count cl100k_base over message contents. What an agent's log does not hold (Claude
    Code's system prompt and the environment it sends as a system turn; the proxy leaves the
    system prompt out, Codex's rollout holds it) is the same at every step, so each side is
    compared from its first step: the history a step adds, as the log rebuilds it and as the
    agent sent it. A step count that differs is a disagreement too.
    """
    sent = [int(f["client_tokens"]) for f in measured]
    if len(sent) != len(replayed):
        return [f"{len(replayed)} steps replayed, {len(sent)} requests measured"]
    out = []
    for step, (replay, proxy) in enumerate(zip(replayed, sent, strict=True)):
        grown_replay, grown_proxy = replay - replayed[0], proxy - sent[0]
        if abs(grown_replay - grown_proxy) > tolerance * max(grown_replay, grown_proxy, 1):
            out.append(
                f"step {step}: replay {replay} ({grown_replay:+d} since step 0), proxy {proxy} "
                f"({grown_proxy:+d})"
            )
    return out


_CAUGHT_AS = {
    "chat": ("must be followed by tool messages", "have no tool messages"),
    "anthropic": ("`tool_use` ids were found without `tool_result` blocks",),
    "responses": ("No tool output found for function call",),
}
"""How each API's check words a tool call left without its result."""


def uncaught_breakages(
    upstream: Any, request: Any, window: int, expected: Sequence[str]
) -> list[str]:
    """Break a request ``upstream`` (a :class:`~veil.testing.scripted_server.ScriptedOpenAIServer`)
    accepted each way :func:`veil.testing.provider_checks.broken_copies` knows, and check the
    server's :meth:`~veil.testing.scripted_server.ScriptedOpenAIServer.check` refuses every copy
    for that reason: what went wrong, one line each ([] when each copy named in ``expected``
    could be made and was caught). So a test shows its validator can fail on the agent's own
    requests, not only on hand-written ones.

    Args:
        upstream: the server that recorded ``request``.
        request: a :class:`~veil.testing.scripted_server.RecordedRequest` it accepted.
        window: the window the completion room is pushed over.
        expected: the names of the copies this agent's request must allow.
    """
    from veil.testing import provider_checks as checks

    reasons = {
        checks.UNPAIRED_CALL: _CAUGHT_AS[request.api],
        checks.UNSIGNED_THINKING: ("Invalid `signature` in `thinking` block",),
        checks.BARE_REASONING: ("not persisted when `store` is set to false",),
        checks.ROOM_OVER_WINDOW: (f"over the window of {window}",),
    }
    out = []
    if upstream.check(request.api, request.body, request.headers):
        out.append("the request itself was refused: nothing to break")
    copies = checks.broken_copies(request.api, request.body, window)
    out += [
        f"{name}: could not be made from the request" for name in expected if name not in copies
    ]
    for name, body in copies.items():
        found = upstream.check(request.api, body, request.headers)
        if not any(reason in p for p in found for reason in reasons[name]):
            out.append(f"{name}: not caught (the check said {found})")
    return out


def fenced_block(markdown: Path, after: str, lang: str) -> str:
    """The text of the first fenced code block in ``lang`` (```` ```toml ````...) that follows
    the first line of ``markdown`` containing ``after``: a set-up a README shows, for the test
    that runs it to compare with its own.

    Raises:
        AssertionError: no such line, or no such block after it (the README lost the set-up).
    """
    lines = markdown.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if after in line), None)
    assert start is not None, f"{markdown}: no line with {after!r}"
    opening = next((i for i in range(start, len(lines)) if lines[i].strip() == f"```{lang}"), None)
    assert opening is not None, f"{markdown}: no ```{lang} block after {after!r}"
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].strip() == "```")
    return "\n".join(lines[opening + 1 : closing]) + "\n"
