"""Every hook is documented in one style (issue 33): ``:param NAME:`` for each argument,
``:return:``, when it is fired, and whether it is firstresult or collected. The hooks plugins
declare (``register_hookspecs``) are held to the same style as the core's."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import pytest

from veil.core import plugins

PARAM = re.compile(r"^\s*:param (\w+):", re.M)


def every_hookspec() -> dict[str, Callable]:
    """Hook name -> its declaration, for every hook the default plugins and the installed
    plugin distributions declare together with the core."""
    pm = plugins.load_plugins(plugins.new_plugin_manager())
    return {
        name: caller.spec.function
        for name, caller in sorted(vars(pm.hook).items())
        if getattr(caller, "spec", None) is not None
    }


def style_problems(name: str, function: Callable, firstresult: bool) -> list[str]:
    """What ``function``'s docstring lacks of the hook style, as ``"NAME: ..."`` lines."""
    doc = inspect.getdoc(function) or ""
    problems = []
    arguments = list(inspect.signature(function).parameters)
    documented = PARAM.findall(doc)
    for argument in arguments:
        if argument not in documented:
            problems.append(f"{name}: no ':param {argument}:'")
    for extra in sorted(set(documented) - set(arguments)):
        problems.append(f"{name}: ':param {extra}:' names no argument")
    if len(re.findall(r"^\s*:return:", doc, re.M)) != 1:
        problems.append(f"{name}: not exactly one ':return:'")
    if re.search(r"^\s*(Args|Returns|Raises):\s*$", doc, re.M):
        problems.append(f"{name}: Google-style section (use :param: / :return: / :raises:)")
    if not re.search(r"\b(Fired|Called|Asked)\b", doc):
        problems.append(f"{name}: does not say when it is fired ('Fired ...' / 'Called ...')")
    kind = "(firstresult" if firstresult else "(collected"
    if kind not in doc.split("\n\n")[0]:
        problems.append(f"{name}: its first paragraph does not say {kind})")
    return problems


def test_the_style_check_finds_what_is_missing() -> None:
    def good(session, items):
        """Do a thing (collected).

        Fired after the other thing.

        :param session: the session.
        :param items: the items.
        :return: nothing.
        """

    def bad(session, items):
        """Do a thing (firstresult).

        Args:
            session: the session.

        :param other: nothing.
        :return: nothing.
        :return: twice.
        """

    assert style_problems("good", good, firstresult=False) == []
    assert style_problems("bad", bad, firstresult=False) == [
        "bad: no ':param session:'",
        "bad: no ':param items:'",
        "bad: ':param other:' names no argument",
        "bad: not exactly one ':return:'",
        "bad: Google-style section (use :param: / :return: / :raises:)",
        "bad: does not say when it is fired ('Fired ...' / 'Called ...')",
        "bad: its first paragraph does not say (collected)",
    ]


def test_every_hook_documents_every_argument_its_return_and_its_kind() -> None:
    specs = every_hookspec()
    # the core's hooks and the four that plugins declare are all here
    assert {"capture", "evict", "register_routes", "rebuild_derived", "replay_report"} <= set(specs)
    assert "attempt_recorded" in specs
    pm = plugins.load_plugins(plugins.new_plugin_manager())
    problems = [
        problem
        for name, function in specs.items()
        for problem in style_problems(
            name, function, bool(getattr(pm.hook, name).spec.opts.get("firstresult"))
        )
    ]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    ("hook", "declared_in"),
    [
        ("register_routes", "veil_http.hookspecs"),
        ("rebuild_derived", "veil.default_plugins.doctor.hookspecs"),
        ("replay_report", "veil.default_plugins.replay.hookspecs"),
        ("attempt_recorded", "veil_convergence.hookspecs"),
    ],
)
def test_a_hook_a_plugin_fires_is_declared_by_that_plugin(hook: str, declared_in: str) -> None:
    from veil import hookspecs

    assert not hasattr(hookspecs, hook)
    assert every_hookspec()[hook].__module__ == declared_in
