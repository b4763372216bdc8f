"""A plugin whose hook returns a value of the wrong type stops the operation with one line
naming the plugin and the hook (``plugin NAME: hook HOOK returned GOT, expected WHAT``), the
same class of error as a hook that raises (:class:`~veil.core.errors.PluginHookFailed`); and
``veil plugins`` lists every plugin with the broken one marked, where before it crashed.

The CLI checks install a fake distribution ``veil_nu12`` (a ``.dist-info`` with a ``veil``
entry point) on ``PYTHONPATH`` and run the real command line against a scripted
OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import two_step_recording
from veil.core.errors import PluginHookFailed, PluginResultInvalid
from veil.core.prompt.context import build_prompt
from veil.hookspecs import hookimpl
from veil.testing.cli import install_fake_plugin, run_veil
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

NU12 = """
import os

from veil.hookspecs import hookimpl

BAD = os.environ.get("NU12_BAD", "")


@hookimpl
def register_tools(veil):
    if BAD == "register_tools":
        return [{"name": "nu12_echo", "description": "echo"}]
    if BAD == "register_tools_raises":
        raise RuntimeError("tool index unreadable")
    return None


@hookimpl
def register_commands(cli):
    if BAD == "register_commands":
        raise RuntimeError("no commands today")


@hookimpl
def system_prompt_sections(session):
    if BAD == "system_prompt_sections":
        return "Always answer in French."
    return None


@hookimpl
def capture(session, event):
    if BAD == "capture" and event.phase == "user":
        return {"content": "a dict, not items"}
    return None


@hookimpl(optionalhook=True)  # a hook a plugin declares
def replay_report(session):
    if BAD == "replay_report":
        return [("nu12", 1)]
    return {"nu12": {"steps": session.step}}
"""

TOOLS_LINE = (
    "plugin veil_nu12: hook register_tools returned a list holding dict at [0], "
    "expected a list of veil.core.types.Tool"
)


@pytest.fixture
def cli(tmp_path, project):
    """``cli(*args, **env)`` runs ``veil --project PROJECT ARGS`` with ``veil_nu12`` installed."""
    site = tmp_path / "site"
    install_fake_plugin(site, "veil_nu12", NU12)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        # configure_project's provider is the project's own
        env = {"VEIL_ALLOW_PROJECT_PROVIDERS": "1", **env}
        return run_veil(project, *args, home=tmp_path / "home", site=site, cwd=tmp_path, env=env)

    return run


@pytest.mark.parametrize(
    ("bad", "line"),
    [
        ("register_tools", TOOLS_LINE),
        (
            "system_prompt_sections",
            "plugin veil_nu12: hook system_prompt_sections returned str, expected a "
            "veil.core.types.PromptSection or a list of them",
        ),
        (
            "capture",
            "plugin veil_nu12: hook capture returned dict, expected a list of "
            "veil.core.types.ContextItem",
        ),
    ],
)
def test_veil_p_names_the_plugin_whose_hook_returned_the_wrong_type(cli, project, bad, line):
    with ScriptedOpenAIServer(["never sent"]) as server:
        configure_project(project, server)
        proc = cli("-p", "hi", NU12_BAD=bad)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"veil: error: {line}"
    assert server.requests == []  # every one of these stops before the model is asked


def test_veil_replay_names_the_plugin_whose_report_is_not_a_dict(cli, project):
    recording = two_step_recording(project)
    proc = cli(
        "replay", str(recording), "--policies", "veil,full", "--json", NU12_BAD="replay_report"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "veil: error: plugin veil_nu12: hook replay_report returned list, expected a dict or None"
    )
    good = cli("replay", str(recording), "--policies", "veil,full", "--json")
    assert good.returncode == 0, good.stderr[-2000:]
    assert json.loads(good.stdout)["files"][0]["nu12"] == {"steps": 2}


def test_json_mode_names_plugin_and_hook(cli, project):
    with ScriptedOpenAIServer(["never sent"]) as server:
        configure_project(project, server)
        proc = cli("-p", "hi", "--json", NU12_BAD="system_prompt_sections")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert (error["code"], error["plugin"], error["hook"]) == (
        "PLUGIN_FAILED",
        "veil_nu12",
        "system_prompt_sections",
    )


@pytest.mark.parametrize(
    ("bad", "line"),
    [
        ("register_tools", TOOLS_LINE),
        (
            "register_tools_raises",
            "plugin veil_nu12 failed in hook register_tools: RuntimeError: tool index unreadable",
        ),
        (
            "register_commands",
            "plugin veil_nu12 failed in hook register_commands: RuntimeError: no commands today",
        ),
    ],
)
def test_veil_plugins_lists_every_plugin_and_marks_the_broken_one(cli, bad, line):
    proc = cli("plugins", NU12_BAD=bad)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    nu12 = lines.index("veil_nu12 0.1")
    assert lines[nu12 + 1] == f"  error: {line}"
    assert "veil.coding_tools 0.1.0 (default)" in lines  # the others are still listed
    assert "broken: veil_nu12" in proc.stderr
    listed = {
        p["name"]: p for p in json.loads(cli("plugins", "--json", NU12_BAD=bad).stdout)["plugins"]
    }
    assert listed["veil_nu12"]["errors"] == [line]
    assert listed["veil.coding_tools"]["errors"] == []
    # every command that opens the project still stops on it, naming it in one line (veil
    # plugins no longer creates the store, so `veil sessions` here would find none to open)
    other = cli("-p", "hi", NU12_BAD=bad)
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert other.stderr.strip().splitlines()[-1] == f"veil: error: {line}"


def test_veil_plugins_with_nothing_broken_is_unchanged(cli):
    proc = cli("plugins")
    assert proc.returncode == 0, proc.stderr
    assert "error:" not in proc.stdout and "broken" not in proc.stderr


# -- in process: the hooks the core reads fields from --------------------------------------------


class _Junk:
    """Answers every hook the core reads with something of the wrong type."""

    @hookimpl
    def recall(self, session, query, limit, tags):
        return [{"id": "x", "score": 1.0}]

    @hookimpl
    def register_slash_commands(self, veil):
        return {"name": "/junk"}

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        return "a summary as a bare str"


def test_recall_results_of_the_wrong_type_name_the_plugin(make_veil):
    veil = make_veil(plugins=[("junk", _Junk())])
    with pytest.raises(PluginResultInvalid) as refused:
        veil.recall("anything")
    assert refused.value.message == (
        "plugin junk: hook recall returned a list holding dict at [0], "
        "expected a list of veil.core.types.RecallHit"
    )
    assert isinstance(refused.value, PluginHookFailed)
    assert (refused.value.plugin, refused.value.hook, refused.value.code) == (
        "junk",
        "recall",
        "PLUGIN_FAILED",
    )


def test_slash_commands_of_the_wrong_type_name_the_plugin(make_veil):
    veil = make_veil(plugins=[("junk", _Junk())])
    with pytest.raises(PluginResultInvalid, match=r"^plugin junk: hook register_slash_commands "):
        veil.slash_commands()


def test_a_summary_of_the_wrong_type_names_the_plugin(make_veil):
    from veil_compaction.testing import SeedPlanner

    veil = make_veil(
        ["ok"], plugins=[("junk", _Junk()), ("planner", SeedPlanner())], disable=["veil_compaction"]
    )
    session = veil.new_session()
    veil.run_turn(session, "hello")
    with pytest.raises(PluginResultInvalid) as refused:
        veil.compact(session.id)
    assert refused.value.message == (
        "plugin junk: hook summarise returned str, expected a veil.core.types.Summary or None"
    )


def test_the_answer_of_the_first_plugin_that_answers_is_the_one_checked(make_veil):
    """A plugin returning None passes the question on; the next one's answer is used."""
    from veil.core import plugins
    from veil.core.types import Summary

    class Passes:
        @hookimpl
        def summarise(self, messages):
            return None

    class Answers:
        @hookimpl
        def summarise(self, messages):
            return Summary(text=f"{len(messages)} folded")

    pm = plugins.new_plugin_manager()
    pm.register(Answers(), name="answers")
    pm.register(Passes(), name="passes")  # registered last: asked first
    call = {
        "session": None,
        "messages": [1, 2],
        "previous": None,
        "instructions": [],
        "mode": "full",
    }
    assert plugins.first_answer(pm, "summarise", **call) == ("answers", Summary(text="2 folded"))
    assert pm.hook.summarise(**call) == Summary(text="2 folded")  # as pluggy answers


def _pass_under_pressure(registered: dict, live_items: list) -> None:
    """One eviction pass (``manage_pressure``) over ``live_items``, 20 tokens used of a budget
    of 10, with the plugins ``registered`` (name -> plugin) in a plugin manager of their own
    and a session that holds only what the pass reads."""
    from types import SimpleNamespace

    from veil.core import plugins
    from veil.core.prompt.fit import manage_pressure

    pm = plugins.new_plugin_manager()
    for name, plugin in registered.items():
        pm.register(plugin, name=name)
    session = SimpleNamespace(
        veil=SimpleNamespace(pm=pm, context_layer_on=True),
        live_items=live_items,
        clock=lambda: 0.0,
        task_tags=frozenset(),
        page_in_candidates=list,
    )
    manage_pressure(session, budget_tokens=10, used_tokens=20)


def test_a_plan_of_the_wrong_type_names_the_eviction_plugin():
    class Scorer:
        @hookimpl
        def score(self, items):
            return [0.5] * len(items)

    class Policy:
        @hookimpl
        def evict(self, items):
            return {"to_warm": []}

    with pytest.raises(PluginResultInvalid) as refused:
        _pass_under_pressure({"scorer": Scorer(), "policy": Policy()}, ["one"])
    assert refused.value.message == (
        "plugin policy: hook evict returned dict, expected a veil.core.types.EvictionPlan or None"
    )


def test_a_wrapper_keeps_pluggys_call_and_the_error_names_the_candidates():
    from veil.core import plugins

    class Wraps:
        @hookimpl(wrapper=True)
        def recall(self):
            return (yield)

    class Good:
        @hookimpl
        def recall(self):
            return []

    class Bad:
        @hookimpl
        def recall(self):
            return "hit"

    pm = plugins.new_plugin_manager()
    for name, plugin in (("good", Good()), ("bad", Bad()), ("wraps", Wraps())):
        pm.register(plugin, name=name)
    answers = list(
        plugins.results_by_plugin(pm, "recall", session=None, query="q", limit=1, tags=None)
    )
    assert answers == [("bad or good", "hit"), ("bad or good", [])]


def test_score_signals_of_the_wrong_type_name_the_scorer(make_veil):
    class Scorer:
        @hookimpl(tryfirst=True)
        def score(self, items):
            return [0.5] * len(items)

        @hookimpl(tryfirst=True)
        def score_signals(self, items):
            return [0.5] * len(items)  # a list, not {signal: scores}

    veil = make_veil(["ok"], plugins=[("scorer", Scorer())])
    session = veil.new_session()
    veil.run_turn(session, "hello")
    with pytest.raises(PluginResultInvalid) as refused:
        veil.score_items(session)
    assert refused.value.message == (
        "plugin scorer: hook score_signals returned list, expected a dict of signal name -> "
        "scores, or None"
    )


@pytest.mark.parametrize(
    ("answer", "got"),
    [
        ([0.5, 0.5], "2 scores for 3 items"),
        ([[0.1, 0.2, 0.3]], "an array of shape (1, 3)"),
        (["high", "low", "low"], "list holding str"),
        ({"a": 1}, "dict"),
        ([0.2, float("nan"), 0.3], "a score of nan at [1]"),
        ([0.2, 0.3, 1.7], "a score of 1.7 at [2]"),
        ([-0.5, 0.3, 0.2], "a score of -0.5 at [0]"),
    ],
)
def test_scores_that_break_the_hookspec_are_refused_naming_the_scorer(answer, got):
    from veil.core.plugins import checked_scores

    with pytest.raises(PluginResultInvalid) as refused:
        checked_scores(lambda: "scorer", answer, 3)
    assert refused.value.message == (
        f"plugin scorer: hook score returned {got}, expected 3 numbers in [0, 1], one per item"
    )


def test_scores_in_range_pass_as_they_are_and_rounding_is_clipped():
    import numpy as np

    from veil.core.plugins import checked_scores

    array = np.array([0.0, 0.25, 1.0])
    assert checked_scores(lambda: "never asked", array, 3) is array  # no copy on the hot path
    assert checked_scores(lambda: "s", [0, 1, 0.5], 3).tolist() == [0.0, 1.0, 0.5]
    rounded = checked_scores(lambda: "s", [1.0 + 1e-12, -1e-12, 0.5], 3)
    assert rounded.tolist() == [1.0, 0.0, 0.5]
    assert checked_scores(lambda: "s", [], 0).tolist() == []


def test_scores_of_the_wrong_length_stop_an_eviction_pass_naming_the_scorer():
    class Scorer:
        @hookimpl
        def score(self, items):
            return [0.5] * (len(items) - 1)  # one score short

    class Policy:
        @hookimpl
        def evict(self, items, scores):
            return [float(v) for v in scores]  # reads them: scoring happens here

    with pytest.raises(PluginResultInvalid) as refused:
        _pass_under_pressure({"short_scorer": Scorer(), "policy": Policy()}, ["one", "two"])
    assert refused.value.message == (
        "plugin short_scorer: hook score returned 1 scores for 2 items, expected 2 numbers in "
        "[0, 1], one per item"
    )


def test_score_items_refuses_scores_out_of_range_naming_the_scorer(make_veil):
    class Scorer:
        @hookimpl(tryfirst=True)
        def score(self, items):
            return [2.0] * len(items)  # a rank, not a score in [0, 1]

    veil = make_veil(["ok"], plugins=[("ranker", Scorer())])
    session = veil.new_session()
    veil.run_turn(session, "hello")
    with pytest.raises(PluginResultInvalid) as refused:
        veil.score_items(session)
    assert refused.value.message.startswith(
        "plugin ranker: hook score returned a score of 2.0 at [0]"
    )


def test_rebuilt_views_of_the_wrong_type_name_the_plugin():
    from veil.core import plugins
    from veil.default_plugins.doctor.command import _rebuild_derived

    class Views:
        @hookimpl(optionalhook=True)  # a hook a plugin declares
        def rebuild_derived(self, store):
            return "beliefs"  # one name alone is a list of it

    class Broken:
        @hookimpl(optionalhook=True)  # a hook a plugin declares
        def rebuild_derived(self, store):
            return {"beliefs": True}

    pm = plugins.new_plugin_manager()
    pm.register(Views(), name="views")
    assert _rebuild_derived(pm, store=None) == [["beliefs"]]
    pm.register(Broken(), name="broken")
    with pytest.raises(PluginResultInvalid) as refused:
        _rebuild_derived(pm, store=None)
    assert refused.value.message == (
        "plugin broken: hook rebuild_derived returned dict, expected a list of str or None"
    )


def test_belief_answers_of_the_wrong_type_name_the_plugin(make_veil):
    from veil.core import context_ops

    class Beliefs:
        @hookimpl(tryfirst=True)
        def belief_conflicts(self, session):
            return "no conflicts"

        @hookimpl(tryfirst=True)
        def resolve_conflict(self, session, conflict_id, keep):
            return {"kept": keep}

    veil = make_veil(plugins=[("beliefs", Beliefs())])
    session = veil.new_session()
    with pytest.raises(PluginResultInvalid) as refused:
        context_ops.open_conflicts(session)
    assert refused.value.message == (
        "plugin beliefs: hook belief_conflicts returned str, expected a list of conflict dicts"
    )
    with pytest.raises(PluginResultInvalid) as refused:
        context_ops.resolve_conflict(session, "conflict_1", "belief_1")
    assert refused.value.message == (
        "plugin beliefs: hook resolve_conflict returned dict, expected a str"
    )


class _BadOpening:
    @hookimpl(tryfirst=True)
    def base_prompt(self):
        return ["You are a list."]


class _ShortElision:
    @hookimpl(tryfirst=True)
    def elide_messages(self, messages):
        return messages[:-1]


def test_an_opening_text_that_is_not_a_str_names_the_plugin(make_veil):
    veil = make_veil(["never"], plugins=[("opening", _BadOpening())])
    with pytest.raises(PluginResultInvalid) as refused:
        build_prompt(veil.new_session())
    assert refused.value.message == (
        "plugin opening: hook base_prompt returned list, expected a str or None"
    )


def test_an_elision_that_drops_a_message_names_the_plugin(make_veil):
    """``elide_messages`` must return as many messages as it was given (a change moment, here
    the first prompt, fires it)."""
    veil = make_veil(["never"], plugins=[("short", _ShortElision())])
    session = veil.new_session()
    session.append({"role": "user", "content": "hello"})
    session.append({"role": "assistant", "content": "hi"})
    with pytest.raises(PluginResultInvalid) as refused:
        build_prompt(session)
    assert refused.value.message == (
        "plugin short: hook elide_messages returned 1 messages for 2, expected a list of as many "
        "messages (dicts) as it was given, or None"
    )
