"""Exception types the core raises and front ends map (HTTP status, CLI exit code).

Every error carries a stable ``code`` string; the HTTP plugin maps ``http_status`` and renders
``{"error": {"code", "message"}}``. Codes COMPACTION_DISABLED, SESSION_CLOSED and SESSION_NOT_FOUND
come from seed 000 ("Default Compaction", error responses).
"""

from __future__ import annotations


class VeilError(Exception):
    """Base class of veil's own errors.

    Attributes:
        code: stable upper-case identifier of the error (e.g. ``"SESSION_NOT_FOUND"``).
        http_status: status code a front end over HTTP answers with.
    """

    code = "VEIL_ERROR"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(VeilError):
    """A settings, agent or auth file (or a ``VEIL_*`` variable) holds a wrong value.

    The message always names the file (or variable) and the field, e.g.
    ``.veil/settings.json: compaction.threshold: Input should be less than or equal to 1``.
    """

    code = "CONFIG_INVALID"
    http_status = 400


class BadRequest(VeilError):
    """Input from a caller (tool arguments, HTTP body, file name) is malformed."""

    code = "BAD_REQUEST"
    http_status = 400


class UnsafePath(BadRequest):
    """A file or agent name would escape the folder it must stay in (``..``, ``/``, NUL...)."""

    code = "INVALID_PATH"


class UnsafeVeilPath(UnsafePath, ConfigError):
    """A path veil opens under ``.veil/`` is a symbolic link, not a regular file, or resolves
    outside ``.veil/`` (:mod:`veil.core.safety.paths`). The message names the path and the link.

    It is both an :class:`UnsafePath` (tool and HTTP callers see a refused path) and a
    :class:`ConfigError` (front ends that open a project report it cleanly at start). HTTP
    answers 409: the project's files, not the request, need fixing.
    """

    code = "UNSAFE_VEIL_PATH"
    http_status = 409


class AgentNotFound(VeilError):
    """An agent was named that the project does not have: neither the settings' default agent
    nor a folder ``.veil/agents/<name>/`` (a typo would otherwise run with default settings)."""

    code = "AGENT_NOT_FOUND"
    http_status = 404


class SessionNotFound(VeilError):
    """No session with that id exists (seed 000: ``404 SESSION_NOT_FOUND``)."""

    code = "SESSION_NOT_FOUND"
    http_status = 404


class SessionClosed(VeilError):
    """The session was closed; it can be read but not changed (seed 000: ``400 SESSION_CLOSED``)."""

    code = "SESSION_CLOSED"
    http_status = 400


class SessionBusy(VeilError):
    """Another process (or thread) holds the session's lock: a turn, a compaction or another
    change is running on it (409 ``SESSION_BUSY``). Raised before anything is stored; the
    caller may retry once the other change ends."""

    code = "SESSION_BUSY"
    http_status = 409


class SessionConflict(VeilError):
    """The session changed in the store since this copy of it was loaded (another process ran a
    turn or a compaction on it), so writing from this copy would undo that change (409
    ``SESSION_CONFLICT``). Nothing of the refused change is stored; load the session again."""

    code = "SESSION_CONFLICT"
    http_status = 409


class CompactionDisabled(VeilError):
    """``defaultCompaction.enabled`` is false for the session's agent (seed 000: ``400``)."""

    code = "COMPACTION_DISABLED"
    http_status = 400


class CompactionRejected(VeilError):
    """A compaction's summary would not shrink the prompt (or held no visible text): it was not
    applied and the session is unchanged (issue 19). ``502``: the model's answer was unusable."""

    code = "COMPACTION_REJECTED"
    http_status = 502


class NotAvailable(VeilError):
    """A capability was asked for but no loaded plugin provides it (e.g. no ``summarise`` implementation)."""

    code = "NOT_AVAILABLE"
    http_status = 501


class PromptTooLarge(VeilError):
    """Even the current request and the newest step, with everything else behind pointers,
    exceed the prompt's budget (context window less the system prompt, tool schemas and
    completion reserve; issue 19). Raised before the request is sent, so no provider is asked
    for a prompt it must refuse; the message names the sizes and what to change."""

    code = "PROMPT_TOO_LARGE"
    http_status = 413


class ProviderError(VeilError):
    """Every provider in the routing list failed (connection error, rate limit, timeout...)."""

    code = "PROVIDER_ERROR"
    http_status = 502


class TurnInterrupted(VeilError):
    """The user interrupted the turn (Ctrl-C); the session is kept and stays consistent."""

    code = "INTERRUPTED"
    http_status = 499


class PluginHookFailed(VeilError):
    """A plugin's hook implementation raised an exception that is not one of veil's own errors
    (a bug in the plugin, or something it depends on that broke).

    veil does not skip the hook and go on (a skipped hook can be a skipped redaction or
    permission): the operation stops, the turn with it; what was stored before stays. Front
    ends show :attr:`message`, one line: ``plugin NAME failed in hook HOOK: ExcType: text``
    (``veil -p`` prefixes ``veil: error:``; HTTP answers 500 with it; the REPL prints it and
    goes on). The original exception is ``__cause__`` (its traceback: ``VEIL_DEBUG=1``).

    Attributes:
        plugin: the name the plugin is registered under (``veil.beliefs``, an entry point's).
        hook: the hook whose implementation raised (``capture``, ``turn_end``...).
        error: the exception it raised.
    """

    code = "PLUGIN_FAILED"
    http_status = 500

    def __init__(self, plugin: str, hook: str, error: BaseException) -> None:
        detail = " ".join(str(error).split())  # one line whatever the exception's text holds
        kind = type(error).__name__
        super().__init__(
            f"plugin {plugin} failed in hook {hook}: {kind}" + (f": {detail}" if detail else "")
        )
        self.plugin = plugin
        self.hook = hook
        self.error = error


class PluginResultInvalid(PluginHookFailed):
    """A plugin's hook implementation returned a value of the wrong type where the core reads
    its fields (``register_tools`` returning dicts instead of :class:`~veil.core.types.Tool`,
    ``system_prompt_sections`` a ``str`` instead of a
    :class:`~veil.core.types.PromptSection`...). Checked where the core collects the answers,
    one implementation at a time, so the plugin is known; the operation stops as for
    :class:`PluginHookFailed`, whose front-end handling it shares (``veil: error:`` and exit 1,
    HTTP 500, a REPL line). :attr:`message`: ``plugin NAME: hook HOOK returned GOT, expected
    EXPECTED``.

    Attributes:
        plugin, hook: as :class:`PluginHookFailed`.
        error: a :class:`TypeError` with the same text (there is no exception of the plugin's).
        got: what was returned, described (``dict``, ``a list holding str at [0]``).
        expected: what the hook's specification asks for (``a list of veil.core.types.Tool``).
    """

    def __init__(self, plugin: str, hook: str, got: str, expected: str) -> None:
        text = f"hook {hook} returned {got}, expected {expected}"
        VeilError.__init__(self, f"plugin {plugin}: {text}")
        self.plugin = plugin
        self.hook = hook
        self.error = TypeError(text)
        self.got = got
        self.expected = expected
