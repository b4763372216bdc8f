"""Loading on background threads, and a process end that never hangs on them.

veil loads what a command may need later on daemon threads, so the user does not wait for it:
the embedding model while the REPL waits for the first message, ``bpe-openai``'s tokenizer
while the model answers. :func:`start_loader` starts such a thread and registers it.

Why the registry: when the interpreter shuts down, CPython freezes the daemon threads that are
still running wherever they are. A loader frozen while it holds the import lock (it was importing
torch or litellm) deadlocks the main thread at the first import a finalizer makes, and
litellm's ``AsyncHTTPHandler.__del__`` makes one (its aiohttp transport): ``/exit`` then hung
until killed (issue 30; faulthandler showed the main thread in ``importlib._bootstrap.
_get_module_lock`` under ``http_handler.py``'s ``__del__``). And the teardown of the modules
themselves is slow: 6.4 s after ``import litellm``, 8 s after ``import sentence_transformers``
on this project's loaded 2-core machine. So every ``veil`` command ends with :func:`finish`,
which stops the loaders (the next module a loader imports raises :class:`LoaderStopped`: a
``sys.meta_path`` finder that acts only in a stopped loader's thread ends an import chain of
thousands of modules within one module), closes litellm's and the openai SDK's clients, runs
the :mod:`atexit` handlers and leaves with :func:`os._exit`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

log = logging.getLogger(__name__)

STOP_WAIT_S = 2.0
"""Longest :func:`stop_loaders` waits by default for the loaders to stop (seconds): one
module's import after the stop is asked, a C extension's load at worst (torch's takes about a
second on a loaded machine)."""

FINISH_WAIT_S = 0.25
"""Longest :func:`finish` waits for the loaders: it leaves with :func:`os._exit`, so a loader
still inside a C extension's load can neither hang the exit nor be harmed by it; the short wait
only lets one between two imports end by itself."""


class LoaderStopped(BaseException):
    """Raised by an import in a loader thread once the process is ending. A BaseException, so
    a library's ``except Exception`` / ``except ImportError`` around an optional import does
    not swallow it and go on loading."""


_lock = threading.Lock()
_loaders: set[threading.Thread] = set()  # started and not yet ended
_in_loader = threading.local()  # .active is True in a loader's own thread
_stopping = threading.Event()
_finder_installed = False


class _StopImports:
    """A ``sys.meta_path`` finder that refuses every new import of a loader thread after
    :func:`stop_loaders` (and finds nothing otherwise: the next finder goes on)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if _stopping.is_set() and getattr(_in_loader, "active", False):
            raise LoaderStopped(f"veil is exiting: import of {name} stopped")
        return None


def _install_finder() -> None:
    global _finder_installed
    if not _finder_installed:
        sys.meta_path.insert(0, _StopImports())
        _finder_installed = True


def start_loader(name: str, target: Callable[[], Any]) -> threading.Thread | None:
    """Run ``target()`` on a daemon thread named ``name``, registered as a loader.

    ``target`` should only load (import modules, read model files): when the process ends it
    is stopped at its next import (:class:`LoaderStopped`, caught here). An exception of its
    own is logged at debug level and dropped: whoever needs what it loads meets the same error
    and reports it.

    Returns:
        The started thread, or None when the process is already ending (nothing starts then).
    """
    with _lock:
        if _stopping.is_set():
            return None
        _install_finder()
        thread = threading.Thread(target=_run, args=(target,), name=name, daemon=True)
        _loaders.add(thread)
        thread.start()
    return thread


def _run(target: Callable[[], Any]) -> None:
    _in_loader.active = True
    try:
        target()
    except LoaderStopped:
        pass
    except Exception as exc:  # noqa: BLE001 - the user of what it loads reports the error
        log.debug("background loading failed: %s", exc)
    finally:
        with _lock:
            _loaders.discard(threading.current_thread())


def running_loaders() -> list[str]:
    """Names of the loader threads running now."""
    with _lock:
        return sorted(t.name for t in _loaders if t.is_alive())


def stop_loaders(timeout: float = STOP_WAIT_S) -> list[str]:
    """Stop every loader (its next import raises :class:`LoaderStopped`; no new one starts) and
    wait up to ``timeout`` seconds in all for them to end.

    Returns:
        The names of the loaders still running after the wait.
    """
    with _lock:
        _stopping.set()
        threads = list(_loaders)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return running_loaders()


def close_litellm_clients() -> None:
    """Close litellm's cached HTTP clients, when litellm was imported (never imports it).

    Runs litellm's own ``close_litellm_async_clients`` coroutine on a fresh event loop, then
    imports the aiohttp transport module that ``AsyncHTTPHandler.__del__`` imports, so the
    handlers still alive at interpreter shutdown (litellm's module-level clients) find it
    loaded and import nothing then. Every failure is ignored: this only tidies up.
    """
    if "litellm" not in sys.modules:
        return
    import asyncio

    with contextlib.suppress(Exception):
        from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

        asyncio.run(close_litellm_async_clients())
    with contextlib.suppress(Exception):
        import litellm.llms.custom_httpx.aiohttp_transport  # noqa: F401


def close_openai_clients() -> None:
    """Close the ``openai`` SDK's clients veil made (:func:`veil.core.models.openai_chat.
    close_clients`), when that module was imported (never imports it). Failures are ignored:
    this only tidies up."""
    chat = sys.modules.get("veil.core.models.openai_chat")
    if chat is not None:
        with contextlib.suppress(Exception):
            chat.close_clients()


def finish(code: int) -> NoReturn:
    """End the process: its background work first, while the interpreter is whole, then a
    prompt exit with status ``code``.

    1. stop the loaders (:func:`stop_loaders`, up to :data:`FINISH_WAIT_S`) and wait for the
       other threads that are not daemons, as the interpreter would (``threading._shutdown``,
       which it calls);
    2. close litellm's clients (:func:`close_litellm_clients`) and the ``openai`` SDK's
       (:func:`close_openai_clients`);
    3. run the :mod:`atexit` handlers (veil's own: the tool commands killed; the log handlers
       flushed; litellm's) and flush stdout and stderr;
    4. leave with :func:`os._exit`, skipping the interpreter's teardown of every module: with
       litellm and torch loaded it took 6-8 s on this project's loaded 2-core machine (1.5 s
       idle) and it is where a loader frozen inside an import deadlocks (the module docstring).

    The caller has saved and closed what it holds (the CLI closes the project's store first).
    """
    left = stop_loaders(FINISH_WAIT_S)
    if left:
        log.debug("loaders still running at exit: %s", ", ".join(left))
    # what Py_FinalizeEx does first: the threading module's exit callbacks (a
    # ThreadPoolExecutor's workers are told to stop there), then a join of every thread that
    # is not a daemon
    wait_for_threads = getattr(threading, "_shutdown", None)
    if wait_for_threads is not None and threading.current_thread() is threading.main_thread():
        wait_for_threads()
    close_litellm_clients()
    close_openai_clients()
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)  # what Py_FinalizeEx calls
    if run_exit_handlers is not None:
        with contextlib.suppress(BaseException):
            run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def reset_for_tests() -> None:
    """Accept new loaders again after :func:`stop_loaders` (tests that end a process's
    background work in-process)."""
    _stopping.clear()
