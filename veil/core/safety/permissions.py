"""Permission rules for tool calls: which calls run, which are refused, which ask the user first.

A serious coding agent does not run shell commands or change files without asking (issue 21).
veil's rules follow the habits users bring from Claude Code (``Bash(npm run test:*)``, allow and
deny lists, deny wins, modes) and Codex (approval modes), in veil's own words:

* **Free tools** never ask. What a tool does is declared when it is registered
  (:attr:`veil.core.types.Tool.effect`), never read from its name (issue 33: a plugin's tool
  named ``memory_sync`` ran unasked, in ``deny`` mode too): a tool that declares ``"read"``
  (``read``, ``grep``, ``ls``; a plugin's tool that only reads) changes nothing; one that
  declares ``"memory"`` changes only veil's own store and the agent's memory files under
  ``.veil/memory/`` (bounded by ``memory.maxFileBytes``), never the project's files or the
  shell, so asking before each would only teach users to say yes. ``"memory"`` counts only
  for a tool one of veil's own plugins registered (:data:`veil.default_plugins.OWN_PLUGINS`:
  the twelve ``veil_*`` tools, ``memory_write`` / ``memory_read`` / ``memory_search``);
  another plugin's such tool asks, as veil cannot vouch for what it writes
  (:func:`granted_effect`).
* **Asking tools**: ``bash``, ``write``, ``edit`` and every other tool (``"change"``, the
  default effect: an MCP server's tools, say): veil cannot tell what those do.
* **Rules**, ``tool`` or ``tool(pattern)`` in ``permissions.allow`` / ``permissions.deny``:

  - ``bash(pattern)`` matches the command: a shell glob (``fnmatch``, ``*`` matches anything,
    spaces and ``/`` included), or Claude Code's prefix form ``bash(npm run test:*)`` = the
    command ``npm run test`` alone or followed by arguments.
  - ``read(pattern)``, ``write(...)``, ``edit(...)``, ``grep(...)``, ``ls(...)`` match the path
    (:func:`path_matches`), relative to the project root or absolute (``/tmp/*``, ``~/notes/*``)
    for paths outside it, in gitignore's manner as Claude Code's Read and Edit rules are: a
    pattern without a slash matches a file or folder name at any depth of the project
    (``.env*`` covers ``sub/.env.local``); one with a slash (``src/*``, ``./.env``) is anchored
    at the project root, ``*`` crossing folders; either covers what lies inside a folder it
    matches. Paths are resolved first (``..`` and symbolic links), so ``src/../.git/config`` is
    ``.git/config``.
  - A ``read(...)`` deny rule covers every built-in tool that shows a file's contents or names
    (:attr:`PermissionVocabulary.read_covered_tools`, declared by ``veil.coding_tools``): ``grep`` and ``ls`` are refused a path it covers and leave
    the files it covers out of a search or a listing of a folder, saying how many; ``edit`` is
    refused a file it covers (its answer would tell whether a text is in the file). ``bash``
    is not covered: a command may read any file (``cat .env``); deny those commands with
    ``bash(...)`` rules, or keep ``bash`` asking.
  - ``tool`` alone or ``tool(*)``: every call of that tool. Tool names compare without case
    (``Bash(pytest*)`` is ``bash(pytest*)``). Other tools take no pattern but ``*``.

* **Order**: a deny rule wins over everything (``--yes`` too); then an allow rule, or a rule the
  user allowed for this session; then the tool's default under ``permissions.mode``:

  =============== ==================== ============================ ===================
  mode            free tools           write / edit                 bash, other tools
  =============== ==================== ============================ ===================
  ``ask``         run                  ask                          ask
  ``acceptEdits`` run                  run inside the project, ask  ask
                                       outside and under ``.git/``
                                       or ``.veil/``
  ``allow``       run                  run                          run
  ``deny``        run                  refused                      refused
  =============== ==================== ============================ ===================

* **Shell commands and allow rules**: an allow rule for ``bash`` lets a command run only when
  every simple command of it (split at ``;``, ``&&``, ``||``, ``|``, ``&`` and new lines)
  matches the rule's pattern and it has no command substitution (``$(...)``, backquotes,
  ``<(...)``) and writes to no file through a redirection (``>``, ``>>``; ``2>&1`` and
  ``>/dev/null`` are fine). ``bash(pytest*)`` does not allow ``pytest; rm -rf ~``. A deny rule
  refuses a command when the whole command or any of its simple commands matches.

Where the answer is "ask", the loop calls the ``ask_permission`` hook (a front end answers:
``"once"``, ``"session"`` or ``"deny"``); with nobody to ask (``veil -p`` without a terminal,
HTTP, the harness) the call is refused with a reason that names the rule or flag to add. A
refused call is answered to the model by a tool result that says so, so every tool call keeps
its result.

Who may set what (:func:`merge_permission_layers`): a project's ``.veil/settings.json`` comes
with a clone, so it may add deny rules and narrow the mode (``ask``, ``deny``) but neither add
allow rules nor widen the mode (``acceptEdits``, ``allow``); only the user's
``~/.veil/settings.json``, ``VEIL_PERMISSIONS__*`` variables and ``--yes`` can.
"""

from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import functools
import os
import re
import shlex
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from veil.core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

Mode = Literal["ask", "acceptEdits", "allow", "deny"]
Verdict = Literal["allow", "deny", "ask"]
Answer = Literal["once", "session", "deny"]

MODES: tuple[str, ...] = ("deny", "ask", "acceptEdits", "allow")
"""The modes, narrowest first (a project file may only move the mode towards the start)."""

PROJECT_MODES = frozenset({"ask", "deny"})
"""Modes a project's settings.json may set: the ones that allow nothing by themselves."""

FREE_EFFECTS: dict[str, str] = {
    "read": "only reads",
    "memory": "changes only veil's memory",
}
"""The effects that are never asked (:attr:`veil.core.types.Tool.effect`), with the words a
decision gives for each."""


@dataclass(frozen=True)
class PermissionVocabulary:
    """What the rules know of the tools that take a pattern, declared by the plugins that
    register them (the ``permission_vocabulary`` hook; default plugin ``veil.coding_tools``
    declares its six tools'): the core names no tool.

    Asked of every installed plugin when the settings load (blocked ones too, as
    ``register_settings``), so a rule such as ``bash(pytest*)`` is checked then, before any tool
    is registered; answers are merged (:meth:`merged`).

    Attributes:
        path_tools: tools whose rule pattern matches the ``path`` argument.
        command_tools: tools whose rule pattern matches the ``command`` argument.
        edit_tools: tools that change a file; ``acceptEdits`` runs them inside the project
            without asking.
        read_tool: the tool whose deny rules also cover :attr:`read_covered_tools` (None:
            none does).
        read_covered_tools: tools a deny rule of :attr:`read_tool` covers besides it, as they
            show what it would (a file's lines, its name, whether a text is in it). Claude Code
            applies its Read rules to Grep and Glob alike
            (https://code.claude.com/docs/en/permissions, "Read and Edit").
    """

    path_tools: frozenset[str] = frozenset()
    command_tools: frozenset[str] = frozenset()
    edit_tools: frozenset[str] = frozenset()
    read_tool: str | None = None
    read_covered_tools: frozenset[str] = frozenset()

    def merged(self, other: PermissionVocabulary) -> PermissionVocabulary:
        """Both vocabularies in one (sets joined; ``other``'s :attr:`read_tool` when this one
        has none)."""
        return PermissionVocabulary(
            self.path_tools | other.path_tools,
            self.command_tools | other.command_tools,
            self.edit_tools | other.edit_tools,
            self.read_tool or other.read_tool,
            self.read_covered_tools | other.read_covered_tools,
        )

    def covered_by_read(self, rule_tool: str, tool: str) -> bool:
        """Whether a deny rule on ``rule_tool`` covers ``tool`` as the reading tool's does."""
        return (
            self.read_tool is not None
            and rule_tool == self.read_tool
            and tool in self.read_covered_tools
        )


_LOADING: contextvars.ContextVar[PermissionVocabulary | None] = contextvars.ContextVar(
    "veil_permission_vocabulary", default=None
)
# the vocabulary of the settings being loaded (load_config sets it around validation, with the
# plugins it was given besides the installed ones)


@contextlib.contextmanager
def loading_vocabulary(vocabulary: PermissionVocabulary) -> Iterator[None]:
    """Validate rules with ``vocabulary`` inside the block (:func:`veil.core.settings.load_config`:
    the installed plugins' and the extra ones')."""
    token = _LOADING.set(vocabulary)
    try:
        yield
    finally:
        _LOADING.reset(token)


@functools.cache
def installed_vocabulary() -> PermissionVocabulary:
    """The vocabulary the installed plugins declare (veil's default plugins and the ``veil``
    entry points; read once per process)."""
    from veil.core.plugin_settings import installed_plugins, plugin_vocabulary

    return plugin_vocabulary(installed_plugins()[0])


def current_vocabulary() -> PermissionVocabulary:
    """The vocabulary rules are checked with now: the settings being loaded's, else the
    installed plugins' (:func:`installed_vocabulary`)."""
    loading = _LOADING.get()
    return loading if loading is not None else installed_vocabulary()


def vocabulary_of(settings: Any) -> PermissionVocabulary:
    """The vocabulary ``settings`` (a :class:`~veil.core.settings.PermissionSettings`) was
    validated with, else :func:`current_vocabulary`."""
    found = getattr(settings, "vocabulary", None)
    return found if isinstance(found, PermissionVocabulary) else current_vocabulary()


PROTECTED_FOLDERS = frozenset({".git", ".veil"})
"""Folder names ``acceptEdits`` still asks about, at any depth of the project: a write under a
``.git/`` (hooks, config; a nested repository's too, or a submodule's) can run code at the next
git command there, one under a ``.veil/`` changes veil's configuration (a nested project's
too). Compared as a file system that ignores case and Unicode's invisible characters would
(:func:`protected_name`), as macOS's default one does."""


def user_settings_hint() -> str:
    """Where the user's own settings file is, as messages name it: ``~/.veil/settings.json``, or
    under ``$VEIL_HOME`` when that is set (home written ``~``)."""
    from veil.core.safety.trust import display_path
    from veil.core.settings import user_config_dir

    return display_path(user_config_dir() / "settings.json")


_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_.-]{1,64})\s*(?:\((.*)\))?\s*$", re.DOTALL)
# Characters of shell operators: ; & | ( ) and new lines start a new simple command (bash(1)
# "Lists", "Pipelines"); < and > redirect.
_OPERATOR_CHARS = ";&|()<>\n"
# Where a line a deny rule cannot parse may hold another command.
_CRUDE_SPLIT = re.compile(r"[;&|\n()`<>]+|\$\(")
# Redirections that write nothing veil cares about: fd duplication and the null device.
_HARMLESS_REDIRECTS = re.compile(r"(?<![^\s;&|])\d*>>?\s*(?:&\d+|/dev/null)(?=$|[\s;&|])")


@dataclass(frozen=True)
class Rule:
    """One parsed rule: ``tool`` (lower case) and its ``pattern`` (None: every call).

    Attributes:
        tool: the tool name, lower case.
        pattern: the glob (or ``prefix:*`` for bash), None for the whole tool.
        text: the rule as written, for messages.
    """

    tool: str
    pattern: str | None
    text: str


def parse_rule(text: str, vocabulary: PermissionVocabulary | None = None) -> Rule:
    """Parse ``tool`` or ``tool(pattern)``.

    Args:
        text: the rule as written in settings (``bash(pytest*)``, ``read``, ``Edit(src/*)``).
        vocabulary: which tools take a pattern; default :func:`current_vocabulary`.

    Returns:
        The :class:`Rule`; ``tool(*)`` and ``tool()`` are the whole tool (pattern None).

    Raises:
        ValueError: not of that shape, or a pattern on a tool that takes none (the message says
            which tools take patterns).
    """
    match = _RULE_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{text!r} is not a rule: write a tool name, or tool(pattern) such as "
            "bash(pytest*), bash(npm run test:*), edit(src/*), read(*)"
        )
    tool = match.group(1).lower()
    pattern = match.group(2)
    pattern = pattern.strip() if pattern is not None else None
    if pattern in (None, "", "*", "**"):
        return Rule(tool, None, text)
    known = vocabulary or current_vocabulary()
    if tool not in known.path_tools and tool not in known.command_tools:
        takes = ", ".join(sorted(known.path_tools | known.command_tools))
        raise ValueError(
            f"{text!r}: only {takes} take a pattern (the command or the path); write "
            f"{tool!r} alone for every call of it"
        )
    return Rule(tool, pattern, text)


def check_rules(rules: Sequence[str]) -> list[str]:
    """Validate a ``permissions.allow`` / ``deny`` list (for settings validation).

    Raises:
        ValueError: the first malformed rule, named with its index.
    """
    for i, text in enumerate(rules):
        try:
            parse_rule(text)
        except ValueError as exc:
            raise ValueError(f"{i}: {exc}") from exc
    return list(rules)


def own_plugin(pm: Any, name: str) -> bool:
    """Whether the plugin registered as ``name`` in ``pm`` is one of veil's own: its name and
    its module's are a pair of :data:`veil.default_plugins.OWN_PLUGINS` (a third-party plugin
    that takes such a name is not, its module being another)."""
    from veil.default_plugins import OWN_PLUGINS

    plugin = pm.get_plugin(name) if pm is not None else None
    return (name, getattr(plugin, "__name__", None)) in OWN_PLUGINS


def granted_effect(veil: Any, tool: str) -> str:
    """The effect the permission rules take ``tool`` to have (:func:`evaluate`'s ``effect``):
    the one the registered tool of that name declares (:attr:`veil.core.types.Tool.effect`),
    except that ``"memory"`` holds only for a tool of veil's own plugins (:func:`own_plugin`);
    ``"change"`` for anything else, a tool veil does not know included (a harness host's own).

    Args:
        veil: the open project (its ``tools`` and plugin manager ``pm``).
        tool: the tool's name as the model called it.
    """
    found = getattr(veil, "tools", {}).get(tool)
    effect = getattr(found, "effect", "change")
    if effect == "memory" and not own_plugin(getattr(veil, "pm", None), found.plugin):
        return "change"
    return effect if effect in FREE_EFFECTS else "change"


# -- what a call is about ----------------------------------------------------------------------


def call_subject(
    tool: str,
    arguments: dict[str, Any],
    project_dir: Path,
    vocabulary: PermissionVocabulary | None = None,
) -> str | None:
    """What a rule's pattern is matched against: the command of a command tool (``bash``), the
    resolved path of a path tool (relative to ``project_dir`` in POSIX form when inside it,
    absolute otherwise; ``.`` when a ``grep`` / ``ls`` names no path); None for other tools.
    ``vocabulary``: which tools those are (default :func:`current_vocabulary`)."""
    known = vocabulary or current_vocabulary()
    if tool in known.command_tools:
        command = arguments.get("command")
        return command if isinstance(command, str) else ""
    if tool in known.path_tools:
        raw = arguments.get("path")
        return display_path(raw if isinstance(raw, str) and raw else ".", project_dir)
    return None


def display_path(raw: str, project_dir: Path) -> str:
    """``raw`` resolved against ``project_dir`` (``~`` expanded, ``..`` and links resolved):
    relative POSIX when inside the project (``.`` for the root), absolute otherwise."""
    root = project_dir.resolve()
    path = Path(os.path.expanduser(raw))
    try:
        resolved = (path if path.is_absolute() else root / path).resolve()
    except (OSError, ValueError, RuntimeError):  # NUL byte, link loop: the tool refuses it too
        return raw
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return resolved.as_posix()
    return rel.as_posix() or "."


def inside_project(subject: str) -> bool:
    """Whether a :func:`display_path` result lies in the project (it is relative)."""
    return not os.path.isabs(subject)


def protected_name(part: str) -> bool:
    """Whether one path component names a :data:`PROTECTED_FOLDERS` folder on some file system
    veil runs on: compared after Unicode normalisation (NFC), without the characters HFS+ and
    APFS ignore in names (format characters such as U+200C, category Cf) and without trailing
    dots and spaces (which Windows drops), and ignoring case (``.GIT``, ``.Git\u200c`` and
    ``.git.`` all name ``.git`` there; the same tricks as git's CVE-2014-9390)."""
    name = "".join(c for c in unicodedata.normalize("NFC", part) if unicodedata.category(c) != "Cf")
    return name.rstrip(". ").casefold() in PROTECTED_FOLDERS


def _plain_project_file(subject: str) -> bool:
    """Whether ``acceptEdits`` may write ``subject`` without asking: inside the project and no
    component of it a ``.git`` (hooks and config run code) or ``.veil`` (veil's settings and
    store) folder or file, at any depth (:func:`protected_name`)."""
    if not inside_project(subject):
        return False
    return not any(protected_name(part) for part in Path(subject).parts)


def simple_commands(command: str) -> list[str] | None:
    """Split a shell command line into its simple commands (words joined by single spaces).

    Returns:
        The simple commands, or None when the line cannot be judged safely: unbalanced quotes,
        command or process substitution, or a redirection that writes a file.
    """
    if "`" in command or "$(" in command or "<(" in command or ">(" in command:
        return None
    line = _HARMLESS_REDIRECTS.sub(" ", command)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"  # a new line separates commands: it stays a token
    commands: list[str] = []
    words: list[str] = []
    try:
        tokens = list(lexer)
    except ValueError:  # no closing quotation
        return None
    for token in tokens:
        if token and set(token) <= set(_OPERATOR_CHARS):
            if ">" in token:
                return None  # writes a file through a redirection
            if "<" in token:
                words.append(token)  # reads a file: part of this command
                continue
            if words:
                commands.append(" ".join(words))
            words = []
        else:
            words.append(token)
    if words:
        commands.append(" ".join(words))
    return commands


def _glob(pattern: str, subject: str) -> bool:
    if pattern.endswith(":*"):  # Claude Code's prefix form: "npm run test:*"
        prefix = pattern[:-2].rstrip()
        return subject == prefix or subject.startswith(prefix + " ")
    return fnmatch.fnmatchcase(subject, pattern)


def _path_pattern(pattern: str, project_dir: Path) -> str:
    """A path pattern in the form :func:`display_path` gives subjects."""
    return _pattern_in_subject_form(pattern, project_dir.resolve().as_posix())


def _pattern_in_subject_form(pattern: str, root: str) -> str:
    """:func:`_path_pattern` with the project root already resolved (``root``, POSIX)."""
    if pattern.startswith("~") or os.path.isabs(pattern):
        expanded = os.path.expanduser(pattern)
        if expanded == root:
            return "."
        if expanded.startswith(root + "/"):
            return expanded[len(root) + 1 :]
        return expanded
    return pattern[2:] if pattern.startswith("./") else pattern


def _folders_above(subject: str) -> list[str]:
    """The folders ``subject`` lies in, outermost first, in its own form: ``a/b/c`` ->
    ``["a", "a/b"]``, ``/x/y/z`` -> ``["/x", "/x/y"]`` (neither the project root nor ``/``)."""
    parts = subject.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i])]


def path_matches(
    pattern: str,
    subject: str,
    project_dir: Path,
    *,
    is_dir: bool | Callable[[], bool] = False,
) -> bool:
    """Whether a path rule's ``pattern`` covers ``subject``, in gitignore's manner.

    Claude Code's Read and Edit rules "follow the gitignore specification"
    (https://code.claude.com/docs/en/permissions); veil keeps its own glob for ``*`` (it
    crosses folders, as before) and takes gitignore's anchoring and folder rules
    (https://git-scm.com/docs/gitignore, "PATTERN FORMAT"):

    * A pattern without a slash (``.env*``, ``*.pem``, ``secrets``) matches a file or folder
      *name* at any depth of the project: ``.env*`` covers ``.env`` and ``sub/.env.local``.
    * A pattern with a slash at its start or in its middle (``src/*``, ``config/secrets``), or
      written ``./name``, absolute or ``~/...``, is anchored: it matches the whole path
      (relative to the project root inside it, absolute outside). A leading ``**/`` also matches
      at the root (``**/.env`` covers ``.env``).
    * Either covers everything inside a folder it matches (``secrets`` covers
      ``lib/secrets/key.pem``; ``config/secrets`` covers ``config/secrets/a``).
    * A trailing slash (``build/``) matches folders only.
    * The project root itself (``.``) is matched only by a pattern naming it (``.``, or its
      absolute path), so ``read(.*)`` does not cover listing the project.
    * A pattern without a slash names paths inside the project: ``.env*`` does not cover
      ``/elsewhere/.env`` (write ``/elsewhere/.env*`` or ``~/...`` for those).
    * Case is ignored and names are compared in Unicode's NFC form, as macOS's default file
      system opens them (``.env*`` covers ``.ENV``): these are deny rules, read wide.

    Args:
        pattern: the rule's pattern as written (``.env*``, ``./src/*``, ``~/notes/*``).
        subject: the resolved path, as :func:`display_path` gives it (``sub/.env.local``,
            ``.``, ``/tmp/x``).
        project_dir: the project root (absolute patterns inside it are made relative).
        is_dir: whether ``subject`` is a folder (a bool, or a callable asked only when a
            trailing-slash pattern needs it).

    Returns:
        True when the pattern covers the path.
    """
    return _PathGlob.of(pattern, project_dir.resolve().as_posix()).matches(subject, is_dir)


@dataclass(frozen=True)
class _PathGlob:
    """A path rule's pattern made ready for :func:`path_matches` (built once per pattern and
    project root: a search tests every file of a folder against it)."""

    body: str  # the glob in subject form, without a trailing slash
    anchored: bool  # matched against whole paths (a slash, ./, absolute or ~), not names
    folders_only: bool  # written with a trailing slash
    match: Callable[[str], Any]  # the glob compiled (fnmatch's translation; * crosses /)

    @staticmethod
    def of(pattern: str, root: str) -> _PathGlob:
        """``pattern`` ready for subjects under the resolved project ``root`` (POSIX)."""
        return _path_glob(pattern, root, os.path.expanduser("~"))  # ~ may change (tests)

    def _whole(self, path: str) -> bool:
        if self.body.endswith(":*"):  # the prefix form rules of every tool accept
            return _glob(self.body, path)
        return self.match(path) is not None

    def matches(self, subject: str, is_dir: bool | Callable[[], bool]) -> bool:
        """Whether it covers ``subject`` (:func:`path_matches` says how)."""
        body = self.body
        subject = unicodedata.normalize("NFC", subject)
        if subject == ".":
            return body == "."
        # whether the subject itself may match (a folders-only pattern needs it to be a folder)
        subject_counts = not self.folders_only or (is_dir() if callable(is_dir) else is_dir)
        if self.anchored or not inside_project(subject):
            candidates = _folders_above(subject) + ([subject] if subject_counts else [])
            if any(self._whole(path) for path in candidates):
                return True
            if body.startswith("**/"):  # gitignore: a leading "**/" matches in every folder
                rest = re.compile(fnmatch.translate(body[3:]), re.IGNORECASE).match
                return any(rest(path) is not None for path in candidates)
            return False
        names = subject.split("/")
        last = len(names) if subject_counts else len(names) - 1
        match = self.match
        if any(match(names[i]) is not None for i in range(last)):
            return True
        return subject_counts and self._whole(subject)  # the whole path, as before (* crosses)


@functools.lru_cache(maxsize=1024)
def _path_glob(pattern: str, root: str, home: str) -> _PathGlob:
    """:meth:`_PathGlob.of`, kept per pattern, project root and home folder."""
    glob = _pattern_in_subject_form(pattern, root)
    folders_only = len(glob) > 1 and glob.endswith("/")
    body = glob.rstrip("/") if folders_only else glob
    by_form = pattern.startswith(("./", "~", "/")) or os.path.isabs(pattern)
    # Deny rules are read wide: ignoring case and in one Unicode normal form, since macOS's
    # default file system opens ".ENV" and an NFD "café" as ".env" and the NFC "café"
    body = unicodedata.normalize("NFC", body)
    compiled = re.compile(fnmatch.translate(body), re.IGNORECASE).match
    return _PathGlob(body, by_form or "/" in body, folders_only, compiled)


def rule_matches(
    rule: Rule,
    tool: str,
    subject: str | None,
    project_dir: Path,
    *,
    for_allow: bool,
    vocabulary: PermissionVocabulary | None = None,
) -> bool:
    """Whether ``rule`` covers a call of ``tool`` about ``subject`` (:func:`call_subject`).

    ``for_allow`` selects the shell rule of the module docstring: an allow rule must cover every
    simple command of the line; a deny rule refuses when it covers the line or any part. For
    paths, a deny rule matches in gitignore's manner (:func:`path_matches`: ``.env*`` covers
    ``sub/.env.local``) while an allow rule matches the whole path as written (``src/*`` covers
    ``src/a/b.py``; ``src`` covers only ``src``): a rule widens only what it refuses, never
    what it lets run unasked. ``vocabulary``: which tools take a command (default
    :func:`current_vocabulary`).
    """
    if rule.tool != tool.lower():
        return False
    if rule.pattern is None:
        return True
    if subject is None:
        return False
    if tool in (vocabulary or current_vocabulary()).command_tools:
        parts = simple_commands(subject)
        if for_allow:
            return bool(parts) and all(_glob(rule.pattern, p) for p in parts)
        if parts is None:  # not parsed safely: any stretch between operators may be a command
            parts = [p.strip() for p in _CRUDE_SPLIT.split(subject) if p.strip()]
        return _glob(rule.pattern, subject.strip()) or any(_glob(rule.pattern, p) for p in parts)
    if for_allow:
        return _allow_path_matches(_path_pattern(rule.pattern, project_dir), subject)
    return path_matches(
        rule.pattern, subject, project_dir, is_dir=lambda: _is_folder(subject, project_dir)
    )


def _allow_path_matches(pattern: str, subject: str) -> bool:
    """Whether an allow rule's path ``pattern`` (subject form, :func:`_path_pattern`) lets a
    call about ``subject`` run: the whole path matches as written (``*`` crosses folders), and
    the rule says where it reaches: a pattern relative to the project never covers a path
    outside it (``edit(*.json)`` does not reach ``~/.veil/settings.json``; write the absolute
    or ``~`` path for that), and only a pattern that names a ``.git`` or ``.veil`` folder
    itself covers a path inside one (``edit(*.json)`` does not reach ``.veil/settings.json``;
    ``edit(.veil/memory/*)`` does)."""
    if not inside_project(subject) and inside_project(pattern):
        return False
    if any(protected_name(part) for part in Path(subject).parts) and not any(
        protected_name(part) for part in pattern.split("/")
    ):
        return False
    return _glob(pattern, subject)


def _is_folder(subject: str, project_dir: Path) -> bool:
    """Whether a :func:`display_path` subject names a folder on disk now."""
    return (Path(subject) if not inside_project(subject) else project_dir / subject).is_dir()


def deny_rule_covers(
    rule: Rule,
    tool: str,
    subject: str | None,
    project_dir: Path,
    vocabulary: PermissionVocabulary | None = None,
) -> bool:
    """Whether the deny rule ``rule`` refuses a call of ``tool`` about ``subject``: a rule for
    that tool, or a ``read(...)`` rule when ``tool`` is one the reading tool's rules cover
    (:meth:`PermissionVocabulary.covered_by_read`; default :func:`current_vocabulary`)."""
    known = vocabulary or current_vocabulary()
    tool = tool.lower()
    if known.covered_by_read(rule.tool, tool):
        return rule_matches(
            rule, rule.tool, subject, project_dir, for_allow=False, vocabulary=known
        )
    return rule_matches(rule, tool, subject, project_dir, for_allow=False, vocabulary=known)


@dataclass(frozen=True)
class PathDenial:
    """The deny rules that keep paths out of what a search or listing tool shows.

    A ``grep`` of a folder, or an ``ls`` of one, asks :meth:`rule_for` about each file or
    folder it meets and leaves out the ones a rule covers (:func:`path_denial` builds it).

    Attributes:
        rules: the deny rules for the tool and the ``read(...)`` deny rules.
        root: the project root, resolved.
    """

    rules: tuple[Rule, ...]
    root: Path
    _globs: tuple[_PathGlob | None, ...] = field(init=False, repr=False, compare=False)
    _root: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        root = self.root.as_posix()
        globs = tuple(
            None if r.pattern is None else _PathGlob.of(r.pattern, root) for r in self.rules
        )
        object.__setattr__(self, "_globs", globs)
        object.__setattr__(self, "_root", root)

    def subject(self, resolved: str | Path) -> str:
        """``resolved`` (an absolute path, links already resolved) in :func:`display_path`'s
        form: relative POSIX inside the project, absolute outside (string work only: a
        search asks this of every file)."""
        path = os.fspath(resolved)
        root = self._root
        if path == root:
            return "."
        if root == "/":
            return path[1:]
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
        return path

    def rule_for(self, resolved: str | Path, *, is_dir: bool) -> str | None:
        """The first deny rule (as written) that covers ``resolved``, or None.

        Args:
            resolved: the absolute path with links resolved.
            is_dir: whether it is a folder (for patterns with a trailing slash).
        """
        subject = self.subject(resolved)
        for rule, glob in zip(self.rules, self._globs, strict=True):
            if glob is None or glob.matches(subject, is_dir):
                return rule.text
        return None


def path_denial(settings: Any, project_dir: Path, tool: str) -> PathDenial | None:
    """The deny rules that leave paths out of a search or listing by ``tool`` (``grep``,
    ``ls``): its own path rules and the ``read(...)`` ones; None when there are none.

    Args:
        settings: a :class:`~veil.core.settings.PermissionSettings` (its ``deny`` list).
        project_dir: the project root.
        tool: the tool's name.
    """
    known = vocabulary_of(settings)
    tool = tool.lower()
    rules = []
    for text in settings.deny:
        rule = parse_rule(text, known)
        if rule.tool == tool or known.covered_by_read(rule.tool, tool):
            rules.append(rule)
    return PathDenial(tuple(rules), project_dir.resolve()) if rules else None


# -- decisions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermissionRequest:
    """A tool call waiting for the user's answer (what ``ask_permission`` receives).

    Attributes:
        tool: the tool's name (``bash``).
        arguments: its arguments as the model sent them, credentials redacted.
        subject: the command or resolved path rules match against (None for other tools).
        tool_call_id: the call's id.
        session_rule: the rule an answer of ``"session"`` remembers for the rest of the
            session (``bash(pytest:*)``, ``edit``), shown to the user.
        reason: why veil asks (the mode's default for this tool).
    """

    tool: str
    arguments: dict[str, Any]
    subject: str | None
    tool_call_id: str
    session_rule: str
    reason: str

    def describe(self) -> str:
        """``bash(pytest -q)``: the call in rule form, for prompts and messages."""
        return f"{self.tool}({self.subject})" if self.subject is not None else self.tool


@dataclass(frozen=True)
class PermissionDecision:
    """The answer for one call.

    Attributes:
        verdict: ``"allow"``, ``"deny"`` or ``"ask"`` (only before the user was asked).
        reason: why, in words the user and the model read (names the rule or the mode).
        rule: the rule that decided, when one did.
        request: the call the decision is about (what the user is, or would have been, asked).
    """

    verdict: Verdict
    reason: str
    rule: str | None = None
    request: PermissionRequest | None = field(default=None, compare=False)

    @property
    def allowed(self) -> bool:
        """True when the call may run."""
        return self.verdict == "allow"

    def tool_result_text(self) -> str:
        """The tool message content sent to the model for a refused call."""
        return f"Permission denied: this {self._what()} was not run. {self.reason}"

    def _what(self) -> str:
        return f"{self.request.tool} call" if self.request else "tool call"


def session_rule_for(
    tool: str, subject: str | None, vocabulary: PermissionVocabulary | None = None
) -> str:
    """The rule an answer of "allow for this session" remembers: for a command tool (``bash``),
    the command's program in prefix form (``bash(pytest:*)``; the first word, two when the first
    is a runner such as ``npm run`` or ``python -m``); for every other tool, the tool itself
    (Claude Code's "allow all edits during this session"). ``vocabulary``: which tools take a
    command (default :func:`current_vocabulary`)."""
    if tool in (vocabulary or current_vocabulary()).command_tools and subject:
        parts = simple_commands(subject)
        words = (parts[0] if parts else subject.strip()).split()
        if not words:
            return tool
        keep = 2 if len(words) > 1 and words[0] in _RUNNERS and not words[1].startswith("-") else 1
        if len(words) > 2 and words[0] in ("python", "python3") and words[1] == "-m":
            keep = 3
        return f"{tool}({' '.join(words[:keep])}:*)"
    return tool


_RUNNERS = frozenset({"npm", "pnpm", "yarn", "cargo", "go", "make", "uv", "poetry", "git"})


def evaluate(
    settings: Any,
    project_dir: Path,
    tool: str,
    arguments: dict[str, Any],
    *,
    session_rules: Iterable[str] = (),
    tool_call_id: str = "",
    effect: str = "change",
) -> PermissionDecision:
    """Decide one call by the rules alone (deny rules, then allow rules and the session's, then
    the tool's effect and ``settings.mode``; module docstring).

    Args:
        settings: a :class:`~veil.core.settings.PermissionSettings`.
        project_dir: the project root (paths are matched relative to it).
        tool: the tool's name.
        arguments: the call's arguments (a dict; ``{}`` when they did not parse).
        session_rules: rules the user allowed for this session.
        tool_call_id: the call's id, copied into the request.
        effect: what the tool does as the rules take it (:func:`granted_effect`): ``"read"``
            and ``"memory"`` are never asked, ``"change"`` (the default, for a tool nothing is
            known of) follows ``settings.mode``. The name never decides it.

    Returns:
        A :class:`PermissionDecision`; ``"ask"`` carries the :class:`PermissionRequest`.
    """
    known = vocabulary_of(settings)
    subject = call_subject(tool, arguments, project_dir, known)
    request = PermissionRequest(
        tool=tool,
        arguments=arguments,
        subject=subject,
        tool_call_id=tool_call_id,
        session_rule=session_rule_for(tool, subject, known),
        reason="",
    )
    described = request.describe()
    for text in settings.deny:
        rule = parse_rule(text, known)
        if deny_rule_covers(rule, tool, subject, project_dir, known):
            also = (
                f" (a {rule.tool} rule covers {tool} too)"
                if known.covered_by_read(rule.tool, tool.lower())
                else ""
            )
            return PermissionDecision(
                "deny",
                f"{described} matches the deny rule {text!r} (permissions.deny){also}.",
                text,
                request,
            )
    for text in settings.allow:
        rule = parse_rule(text, known)
        if rule_matches(rule, tool, subject, project_dir, for_allow=True, vocabulary=known):
            return PermissionDecision(
                "allow", f"allowed by {text!r} (permissions.allow)", text, request
            )
    for text in session_rules:
        rule = parse_rule(text, known)
        if rule_matches(rule, tool, subject, project_dir, for_allow=True, vocabulary=known):
            return PermissionDecision(
                "allow", f"allowed for this session by {text!r}", text, request
            )
    mode = settings.mode
    if effect in FREE_EFFECTS:
        return PermissionDecision(
            "allow", f"{tool} {FREE_EFFECTS[effect]}; it is never asked", request=request
        )
    if mode == "allow":
        return PermissionDecision("allow", "permissions.mode is allow (--yes)", request=request)
    edits = tool in known.edit_tools
    if mode == "acceptEdits" and edits and subject and _plain_project_file(subject):
        return PermissionDecision(
            "allow", "permissions.mode acceptEdits: edits in the project", request=request
        )
    if mode == "deny":
        return PermissionDecision(
            "deny",
            f"permissions.mode is deny and no allow rule covers {described}; "
            + _how_to_allow(request, project_dir, known),
            request=request,
        )
    reason = f"{tool} asks before it runs (permissions.mode {mode})"
    return PermissionDecision(
        "ask",
        reason,
        request=PermissionRequest(**{**request.__dict__, "reason": reason}),
    )


def _how_to_allow(
    request: PermissionRequest, project_dir: Path, known: PermissionVocabulary
) -> str:
    """What would let ``request`` run: the allow rule "allow for this session" would remember,
    when that rule covers it, and ``--yes`` always. A command no rule can cover (a redirection
    into a file, a substitution: :func:`simple_commands` cannot judge it; or a chain whose other
    programs the rule does not name, ``echo hi && rm -rf x``) is not sent to a rule that would
    not work."""
    rule = request.session_rule
    everything = "run with --yes (VEIL_PERMISSIONS__MODE=allow) to allow every call"
    if rule_matches(
        parse_rule(rule, known),
        request.tool,
        request.subject,
        project_dir,
        for_allow=True,
        vocabulary=known,
    ):
        return f'to allow it, add "{rule}" to permissions.allow in {user_settings_hint()}, or ' + (
            everything
        )
    return (
        "no allow rule can cover this command (it writes a file by redirection, substitutes a "
        f"command, or runs programs a rule such as {rule} does not name); " + everything
    )


def authorize(
    session: Session,
    tool: str,
    arguments: dict[str, Any],
    tool_call_id: str,
    *,
    ask: Callable[[PermissionRequest], str | None] | None = None,
) -> PermissionDecision:
    """Decide one call of the agent loop, asking the front end when the rules say "ask".

    ``ask`` (the harness's host callback) replaces the ``ask_permission`` hook when given. The
    answer ``"once"`` (run it), ``"session"`` (run it and remember
    :attr:`PermissionRequest.session_rule` in ``session.permission_grants`` until the process
    ends) or ``"deny"``; no answer (no front end that can ask: ``veil -p`` without a terminal,
    HTTP, the harness) refuses the call with a reason naming the rule and the flag that would
    allow it.

    Returns:
        A final :class:`PermissionDecision`: ``"allow"`` or ``"deny"``, never ``"ask"``.

    Raises:
        PluginResultInvalid: an ``ask_permission`` implementation answered something that is
            not an answer (the call does not run).
    """
    decision = evaluate(
        session.config.settings.permissions,
        session.cwd,
        tool,
        arguments,
        session_rules=session.permission_grants,
        tool_call_id=tool_call_id,
        effect=granted_effect(session.veil, tool),
    )
    if decision.verdict != "ask":
        return decision
    request = decision.request
    assert request is not None  # evaluate() always attaches it to "ask"
    answer = ask(request) if ask is not None else _asked(session, request)
    if isinstance(answer, str) and answer not in ("once", "session", "deny"):
        answer = parse_answer(answer)  # "y", "yes", "n"... as a user would type them
    if answer == "once":
        return PermissionDecision("allow", "allowed once by the user", request=request)
    if answer == "session":
        session.permission_grants.append(request.session_rule)
        return PermissionDecision(
            "allow",
            f"allowed for this session: {request.session_rule}",
            request.session_rule,
            request,
        )
    if answer == "deny":
        return PermissionDecision(
            "deny",
            "The user refused it; do not retry it, ask the user what to do instead.",
            request=request,
        )
    return PermissionDecision(
        "deny",
        f"{request.describe()} needs permission and nobody could be asked (no interactive "
        f"terminal); {_how_to_allow(request, session.cwd, vocabulary_of(session.config.settings.permissions))}.",
        request=request,
    )


def _asked(session: Session, request: PermissionRequest) -> Answer | str | None:
    """The ``ask_permission`` hook's answer, checked: a plugin that answers something else
    (``True`` meaning "allow", a word no prompt accepts) stops the turn with one line naming
    it (:class:`~veil.core.errors.PluginResultInvalid`) instead of being read as "nobody could
    be asked"; the call does not run either way.

    Raises:
        PluginResultInvalid: the answer is not None, "once", "session", "deny" or one of
            :data:`ANSWER_WORDS`.
    """
    from veil.core.errors import PluginResultInvalid
    from veil.core.plugins import answering_plugins

    pm = session.veil.pm
    answer = pm.hook.ask_permission(session=session, request=request)
    if answer is None or (isinstance(answer, str) and parse_answer(answer) is not None):
        return answer
    got = f"{answer!r}" if isinstance(answer, str) else type(answer).__name__
    raise PluginResultInvalid(
        answering_plugins(pm, "ask_permission"),
        "ask_permission",
        got,
        '"once", "session", "deny" or None',
    )


ANSWER_WORDS: dict[str, Answer] = {
    "y": "once",
    "yes": "once",
    "1": "once",
    "once": "once",
    "a": "session",
    "s": "session",
    "2": "session",
    "always": "session",
    "session": "session",
    "n": "deny",
    "no": "deny",
    "3": "deny",
    "d": "deny",
    "deny": "deny",
}
"""What a user may type at a permission prompt (``y`` / ``a`` / ``n``, or 1 / 2 / 3)."""

PROMPT_CHOICES = "[y] yes, once   [a] yes, for this session: {rule}   [n] no, tell the model"
"""The choices line of a permission prompt (``{rule}``: :attr:`PermissionRequest.session_rule`)."""


def parse_answer(text: str) -> Answer | None:
    """The answer a user typed at a permission prompt (:data:`ANSWER_WORDS`, any case), or
    None when it is none of them (ask again)."""
    return ANSWER_WORDS.get(text.strip().lower())


# -- settings layers ---------------------------------------------------------------------------


def narrower_mode(a: str, b: str) -> str:
    """The narrower of two modes (:data:`MODES` order)."""
    return a if MODES.index(a) <= MODES.index(b) else b


def merge_permission_layers(
    user: dict[str, Any], project: dict[str, Any], project_path: Path
) -> dict[str, Any]:
    """The ``permissions`` section of the user's and the project's settings files combined.

    The user's file gives ``mode``, ``allow`` and ``deny``; the project's file may only add
    deny rules and narrow the mode (module docstring).

    Args:
        user: the user's ``permissions`` object (``{}`` when absent).
        project: the project's ``permissions`` object (``{}`` when absent).
        project_path: the project's settings.json, for messages.

    Returns:
        The merged ``permissions`` object (camelCase keys as in the files, still to validate).

    Raises:
        ConfigError: the project file has allow rules or a widening mode (names the file and
            the field, and where the user puts it instead).
    """
    if not isinstance(project, dict) or not project:
        return dict(user) if isinstance(user, dict) else user
    if project.get("allow"):
        raise ConfigError(
            f"{project_path}: permissions.allow: a project file may not allow tool calls (a "
            f"cloned repository could grant itself the shell); put the rules you trust in "
            f"{user_settings_hint()} or VEIL_PERMISSIONS__ALLOW, or remove them from this file"
        )
    mode = project.get("mode")
    if mode is not None and mode not in PROJECT_MODES:
        raise ConfigError(
            f"{project_path}: permissions.mode: a project file may only narrow the mode (ask or "
            f"deny), not set {mode!r}; set it in {user_settings_hint()}, with "
            "VEIL_PERMISSIONS__MODE or with --yes instead"
        )
    merged = dict(user) if isinstance(user, dict) else {}
    if mode is not None:
        merged["mode"] = narrower_mode(mode, merged.get("mode", "ask"))
    deny = project.get("deny")
    if isinstance(deny, list):
        merged["deny"] = list(dict.fromkeys([*(merged.get("deny") or []), *deny]))
    elif deny is not None:
        merged["deny"] = deny  # the wrong shape: validation names it
    return merged
