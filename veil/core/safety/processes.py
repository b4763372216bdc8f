"""Process groups of the commands tools run, and their end when veil ends.

Each tool command runs as the leader of its own process group (``start_new_session``), so the
command and everything it started (``cmd &``, pipelines, test runners' workers) can be signalled
at once. The tool kills its group when the command returns, times out or is interrupted
(Ctrl-C); this module also keeps a registry of the groups alive right now, so that when veil
itself ends they end too:

* at interpreter exit (:mod:`atexit`);
* on SIGTERM or SIGHUP to the ``veil`` command (:func:`install_signal_handlers`; the process then
  exits with status 128 + the signal number, after its ``finally`` blocks ran);
* when ``veil serve`` is asked to stop (SIGTERM, Ctrl-C: the HTTP plugin calls :func:`shutdown`),
  so the turns in progress end at once instead of holding the server until their commands finish.

After :func:`shutdown` no new command starts (:class:`ShuttingDownError`) and the agent loop
ends the turn in progress (:func:`shutting_down`). A process that left the group on purpose
(``setsid``) is not followed, and nothing runs when veil is killed with SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

KILL_GRACE_SECONDS = 1.0
"""After SIGTERM, how long a group gets before SIGKILL."""

_lock = threading.Lock()
_live: dict[int, subprocess.Popen] = {}
_closing = threading.Event()


class ShuttingDownError(OSError):
    """veil is shutting down: no new tool command starts."""

    def __init__(self) -> None:
        super().__init__("veil is shutting down; no new command starts")
        self.strerror = "veil is shutting down; no new command starts"


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the process group led by ``proc``, then SIGKILL what is left after ``grace``
    seconds (the leader is waited for, so it leaves no zombie)."""
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def start_group(args: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen:
    """Start ``args`` as the leader of a new process group and register the group.

    Args:
        args: the command (``["bash", "-c", text]``).
        **popen_kwargs: passed to :class:`subprocess.Popen` (``start_new_session`` is forced).

    Returns:
        The :class:`subprocess.Popen`; call :func:`finished` once its group is dealt with.

    Raises:
        ShuttingDownError: :func:`shutdown` has run.
        OSError: the command could not be started.
    """
    popen_kwargs["start_new_session"] = True
    with _lock:  # held across the start, so shutdown() sees every group that exists
        if _closing.is_set():
            raise ShuttingDownError()
        proc = subprocess.Popen(list(args), **popen_kwargs)
        _live[proc.pid] = proc
    return proc


def finished(proc: subprocess.Popen) -> None:
    """Forget ``proc``'s group (its command returned and the group was killed)."""
    with _lock:
        _live.pop(proc.pid, None)


def live_groups() -> list[int]:
    """Process-group ids of the commands running now."""
    with _lock:
        return sorted(_live)


def shutting_down() -> bool:
    """Whether :func:`shutdown` has run (the agent loop ends its turn when it sees this)."""
    return _closing.is_set()


def shutdown(grace: float = KILL_GRACE_SECONDS) -> int:
    """Refuse new commands and kill every registered group: SIGTERM, then SIGKILL after
    ``grace`` seconds for the groups still there. Idempotent and thread-safe.

    Returns:
        How many groups were signalled.
    """
    with _lock:
        _closing.set()
        procs = list(_live.values())
    for proc in procs:
        signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    for proc in procs:  # the leader may be gone while its background jobs live on
        signal_group(proc.pid, signal.SIGKILL)
    return len(procs)


def reopen() -> None:
    """Accept new commands again after :func:`shutdown` (tests that shut down in-process)."""
    _closing.clear()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    shutdown()
    raise SystemExit(128 + signum)


def install_signal_handlers() -> list[int]:
    """Make SIGTERM and SIGHUP kill the running tool commands and exit with status
    128 + signal (``finally`` blocks and :mod:`atexit` run), instead of ending the process at
    once and leaving the commands running.

    Only signals still at their default action are taken (an ignored SIGHUP under ``nohup``, or
    an embedding program's own handler, is left alone); only from the main thread.

    Returns:
        The signals now handled.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    taken = []
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _on_signal)
            taken.append(int(sig))
    return taken


atexit.register(shutdown)
