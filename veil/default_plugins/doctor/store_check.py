"""``veil doctor``'s check of a project's store (``.veil/context.db``) and its repair.

The check (read-only):

* SQLite's own ``PRAGMA integrity_check`` (pages, indexes) and ``PRAGMA foreign_key_check``;
* every row veil parses, by the rules of :mod:`veil.core.store.row_codec`: sessions (listed columns,
  snapshot, state), messages (an OpenAI chat message, an integer step, usage), items (tags,
  targets), events (payload); text that is not valid UTF-8 counts as damage too;
* gaps in a session's message numbers (rows moved aside earlier) are noted, not counted as
  problems: a load stands in for them.

The repair (``--repair``), in one transaction: each damaged row is copied, whole, to the
``quarantine`` table (table, key, every column as JSON, the reason), then

* a message row whose only damage is its ``usage`` (token counts) keeps its message, with
  ``usage`` set to null;
* a damaged message or event row leaves its table (a session load stands in for a missing
  message; views derived from the event log, such as the ``veil.beliefs`` plugin's beliefs, are
  rebuilt afterwards by the plugins that keep them: the ``rebuild_derived`` hook);
* a damaged session row stays, with its damaged columns reset: snapshot to the agent's current
  configuration (or ``{}``), state to ``{}``, bad times to now, a bad compact_size or version
  to 0, an unreadable model, title or compact summary to null (and compact_size to 0 with the
  summary, so the whole history is sent again);
* a damaged item keeps its row (its content, its cold copy), with bad tags / targets reset to
  ``[]``.

Nothing is deleted without its copy in ``quarantine``. Damage SQLite itself reports
(integrity_check) is not repaired here: the report says so and the exit status stays non-zero
(SQLite's ``.recover`` command is the tool for it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from veil import connect_sqlite, raw_rows
from veil import row_codec as rows
from veil.default_plugins.doctor import quarantine


@dataclass
class Finding:
    """One damaged row.

    Attributes:
        table: ``sessions``, ``messages``, ``items`` or ``events``.
        key: the row's key (``sess_1``, ``sess_1#3`` for message 3, an item id, an event seq).
        problems: what is wrong, one entry per column.
        repaired: moved aside / reset by ``--repair``.
        repairable: False when the repair cannot fix it (a session row whose id or agent is
            not text).
        rowid: the row's SQLite rowid (how the repair finds it, whatever its key holds).
    """

    table: str
    key: str
    problems: list[str]
    repaired: bool = False
    repairable: bool = True
    rowid: int | None = None


@dataclass
class DoctorReport:
    """What :func:`check_store` / :func:`repair_store` found and did.

    Attributes:
        path: the database file.
        integrity: ``PRAGMA integrity_check`` lines other than ``ok``.
        foreign_keys: ``PRAGMA foreign_key_check`` rows, as text.
        findings: damaged rows.
        notes: facts that are not problems (message gaps, rows in quarantine).
        rebuilt: derived views rebuilt by the repair (what ``rebuild_derived`` answered:
            ``beliefs`` with the ``veil.beliefs`` plugin loaded).
    """

    path: str
    integrity: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)

    @property
    def problems_left(self) -> int:
        """Problems still in the store: integrity errors, foreign-key errors and damaged rows
        not repaired. ``veil doctor`` exits 1 when this is not 0."""
        return (
            len(self.integrity)
            + len(self.foreign_keys)
            + sum(1 for f in self.findings if not f.repaired)
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form (``veil doctor --json``), with ``ok`` and ``problemsLeft``."""
        return {
            "path": self.path,
            "ok": self.problems_left == 0,
            "problemsLeft": self.problems_left,
            "integrity": self.integrity,
            "foreignKeys": self.foreign_keys,
            "findings": [asdict(f) for f in self.findings],
            "notes": self.notes,
            "rebuilt": self.rebuilt,
        }


def _text(value: Any, what: str) -> tuple[Any, str | None]:
    """A column read as bytes (``CAST AS BLOB``) decoded as UTF-8, or the problem."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8"), None
        except UnicodeDecodeError as exc:
            return None, f"{what}: not valid UTF-8 (byte {exc.start})"
    return value, None


def _json(value: Any, kind: type, what: str, *, nullable: bool = False) -> tuple[Any, str | None]:
    if nullable and value is None:
        return None, None
    text, problem = _text(value, what)
    if problem:
        return None, problem
    return rows.json_value(text, kind, what)


def _session_findings(conn: Any) -> list[Finding]:
    out = []
    found = raw_rows.session_rows(conn)
    for r in found:
        problems = rows.decode_session_text(dict(r)) + rows.session_row_problems(r)
        repairable = not any(p.startswith(("id:", "agent:")) for p in problems)
        for col in ("snapshot", "state"):
            raw = r[col] if r[col] is not None or col == "snapshot" else b"{}"
            _, problem = _json(raw, dict, col)
            if problem:
                problems.append(problem)
        if problems:
            out.append(
                Finding("sessions", str(r["id"]), problems, repairable=repairable, rowid=r["rowid"])
            )
    return out


def _message_findings(conn: Any, notes: list[str]) -> list[Finding]:
    out = []
    found = raw_rows.message_rows(conn)
    numbers: dict[str, list[int]] = {}
    for r in found:
        problems = []
        message, problem = _json(r["message"], dict, "message")
        if problem is None:
            problem = rows.message_problem(message)
        if problem:
            problems.append(problem)
        if not isinstance(r["step"], int):
            problems.append(f"step: {r['step']!r}, expected an integer")
        _, problem = _json(r["usage"], dict, "usage", nullable=True)
        if problem:
            problems.append(problem)
        if problems:
            key = f"{r['session_id']}#{r['idx']}"
            out.append(Finding("messages", key, problems, rowid=r["rowid"]))
        if isinstance(r["idx"], int):
            numbers.setdefault(str(r["session_id"]), []).append(r["idx"])
    for session_id, idxs in numbers.items():
        missing = sorted(set(range(max(idxs) + 1)) - set(idxs))
        if missing:
            notes.append(
                f"session {session_id}: message rows {missing} are missing (moved aside); a load "
                "stands in for them"
            )
    return out


def _item_findings(conn: Any) -> list[Finding]:
    out = []
    found = raw_rows.item_rows(conn)
    for r in found:
        problems = []
        for col in ("tags", "targets"):
            value, problem = _json(r[col], list, col)
            if problem is None and not all(isinstance(v, str) for v in value):
                problem = f"{col}: a JSON array holding something other than text"
            if problem:
                problems.append(problem)
        if problems:
            out.append(Finding("items", str(r["id"]), problems, rowid=r["rowid"]))
    return out


def _event_findings(conn: Any) -> list[Finding]:
    out = []
    for r in raw_rows.event_payloads(conn):
        _, problem = _json(r["payload"], dict, "payload")
        if problem:
            out.append(Finding("events", str(r["seq"]), [problem], rowid=r["seq"]))
    return out


def check_store(path: str) -> DoctorReport:
    """Check a store without changing it (see the module's docstring for what is checked).

    Args:
        path: the database file (``.veil/context.db``).

    Returns:
        A :class:`DoctorReport`.

    Raises:
        sqlite3.DatabaseError: the file is not a SQLite database.
    """
    conn = connect_sqlite(path)
    try:
        return _check(conn, path, quarantine.has_table(conn))
    finally:
        conn.close()


def check_open_store(store: Any) -> DoctorReport:
    """Check an open :class:`veil.core.store.Store` without changing it: the same checks as
    :func:`check_store`, through the store's own connection (a PostgreSQL store, which has no
    file to open).

    Returns:
        A :class:`DoctorReport` naming the store by ``store.path`` (for PostgreSQL, the server
        without its password and the project)."""
    store.migrate_plugins(quarantine.migrations())  # where it was opened without the hook's
    return _check(store.conn, store.path)


def _check(conn: Any, path: str, has_quarantine: bool = True) -> DoctorReport:
    report = DoctorReport(path=str(path))
    report.integrity = raw_rows.integrity_problems(conn)
    report.foreign_keys = [
        f"{table} row {rowid} points to a missing {parent} row"
        for table, rowid, parent in raw_rows.foreign_key_problems(conn)
    ]
    report.findings = [
        *_session_findings(conn),
        *_message_findings(conn, report.notes),
        *_item_findings(conn),
        *_event_findings(conn),
    ]
    kept = quarantine.kept_count(conn) if has_quarantine else 0
    if kept:
        report.notes.append(f"{kept} row(s) kept in the quarantine table")
    return report


def _row_json(row: Any) -> str:
    """Every column of a row as JSON text, ASCII only so that any value, damaged or not, can be
    stored: text as text; bytes that are not UTF-8 (a blob, or text that is not UTF-8) as
    ``{"hex": ...}``."""
    out = {}
    for key in row.keys():  # noqa: SIM118 - iterating a sqlite Row gives its values
        value = _plain(row[key])
        out[key] = {"hex": bytes(value).hex()} if isinstance(value, (bytes, bytearray)) else value
    return json.dumps(out, ensure_ascii=True)


def _plain(value: Any) -> Any:
    """Bytes that decode as UTF-8 as text; anything else unchanged."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def repair_store(
    store: Any,
    snapshot_for: Callable[[str], dict[str, Any]] | None = None,
    rebuild_derived: Callable[[Any], list[Any]] | None = None,
) -> DoctorReport:
    """Check a store, move its damaged rows aside (see the module's docstring), have the
    derived views rebuilt, and check it again.

    Args:
        store: the project's :class:`veil.core.store.Store`.
        snapshot_for: agent name -> the configuration snapshot a session of that agent gets
            (:meth:`veil.core.app.Veil.agent_snapshot`); without it a damaged snapshot
            becomes ``{}``.
        rebuild_derived: called with ``store`` once rows were repaired; returns the answers of
            the ``rebuild_derived`` hook (lists of the names of the views rebuilt). ``veil
            doctor --repair`` passes the hook itself; without it nothing is rebuilt.

    Returns:
        The report of the check *after* the repair, with the repaired findings of the first
        check (``repaired=True``) in front of what is left and the views rebuilt in
        ``rebuilt``.
    """
    store.migrate_plugins(quarantine.migrations())  # where it was opened without the hook's
    conn = store.conn
    before = _check(conn, store.path)
    now = time.time()
    repaired: list[Finding] = []
    with store.transaction() as conn:
        for finding in before.findings:
            if not finding.repairable:
                continue
            _repair(conn, finding, now, snapshot_for)
            finding.repaired = True
            repaired.append(finding)
    after = _check(conn, store.path)
    if repaired and rebuild_derived is not None:
        # views of the event log: rebuilt without what left it
        for names in rebuild_derived(store):
            after.rebuilt.extend([names] if isinstance(names, str) else names or [])
    after.findings = [*repaired, *after.findings]
    return after


def _repair(
    conn: Any, finding: Finding, now: float, snapshot_for: Callable[[str], dict] | None
) -> None:
    reason = "; ".join(finding.problems)
    table = finding.table
    row = raw_rows.whole_row(conn, table, finding.rowid)
    if row is None:  # gone since the check
        return
    quarantine.keep(conn, now, table, finding.key, _row_json(row), reason)
    bad = {p.split(":", 1)[0] for p in finding.problems}
    if table == "messages" and bad == {"usage"}:
        # only the token counts are unreadable: the message stays in the conversation
        raw_rows.clear_message_usage(conn, finding.rowid)
        return
    if table in ("messages", "events"):
        raw_rows.delete_row(conn, table, finding.rowid)
        return
    if table == "items":
        for col in bad & {"tags", "targets"}:
            raw_rows.reset_item_list(conn, col, finding.rowid)
        return
    fixes: dict[str, Any] = {}
    if "snapshot" in bad:
        snapshot: dict[str, Any] = {}
        if snapshot_for is not None:
            try:
                snapshot = snapshot_for(_plain(row["agent"]))
            except Exception:  # noqa: BLE001 - an unusable agent config leaves {}
                snapshot = {}
        fixes["snapshot"] = rows.dumps(snapshot)
    if "state" in bad:
        fixes["state"] = "{}"
    for col in bad & {"created_at", "updated_at"}:
        fixes[col] = now
    if "closed_at" in bad:
        fixes["closed_at"] = now
    if "compact_size" in bad or "compact_summary" in bad:
        fixes["compact_size"] = 0  # without a readable summary the whole history is sent
    if "version" in bad:
        fixes["version"] = 0
    for col in bad & set(rows.SESSION_TEXT_COLUMNS):
        fixes[col] = None
    if fixes:
        raw_rows.set_session_columns(conn, finding.rowid, fixes)
