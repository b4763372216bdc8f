"""The belief store: beliefs derived from an append-only event log, conflicts kept with provenance.

The durable record is the ``events`` table (kinds ``belief.assert``, ``belief.reinforce``,
``belief.retract``, ``conflict.resolve``), each with time, session, step and tool call id. The
tables ``beliefs`` and ``belief_conflicts`` are a *view* derived from it: :meth:`rebuild` drops
and replays them from the log alone. Their statements and migrations are this plugin's
(:mod:`veil.default_plugins.beliefs.tables`); this module holds the rule and
what each event does.

Detection rule (no LLM; :mod:`veil.default_plugins.beliefs.claims` holds it and its
vocabulary): a statement is parsed into a claim ``(subject, predicate, value)`` with
single-valued predicates ("is", "listens on port", "version is", "runs on", "is set to",
"defaults to", "is located in"). Two *active* beliefs conflict when they have

1. the same subject (normalised: no articles, code quotes or leading "So," / list markers),
2. the same aspect: the same predicate and a value of the same kind -- version, number with its
   unit, path, URL, code literal, type ("a ``Const``"), a state on one scale of exclusive states
   (running / stopped, passing / failing, empty / non-empty, correct / wrong...), or a name of an
   attribute ("the git branch is main"); free-text values have no kind a rule can compare, so
   "the server is running" and "the server is slow" never conflict,
3. incompatible values: different values of that kind, opposite sides of a state scale, or a
   value and its negation ("x is empty" / "x is not empty"),

and come from different tool calls: facts read from one command's output never conflict with
each other. A conflict lists only the beliefs that contradict another one. Statements that
assert nothing about a stable subject -- questions, conditionals and hypotheses ("If x is
empty...", "Maybe..."), a pronoun or a discourse noun as subject ("This is the bug", "the issue
is that...") -- are stored as beliefs but never conflict. Asserting a statement equal to an
active belief reinforces it instead of adding a second one. Precision and recall of the rule on
real statement pairs: ``tests/test_belief_pairs.py``.

Facts come from ``veil_remember`` with kind ``fact``, from memory extraction before compaction,
and from tool results, where :func:`facts_in_tool_output` recognises (by rule): a server's
listening address ("Running on http://127.0.0.1:5051", "listening on port 8080"), the Python
version printed by ``python --version``, and the git branch from ``git status``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from veil import BadRequest, insert_event, new_id
from veil.default_plugins.beliefs import tables
from veil.default_plugins.beliefs.claims import PATTERNS, Claim, contradicts, parse_claim

__all__ = [
    "PATTERNS",
    "BeliefStore",
    "Claim",
    "facts_in_tool_output",
    "replay",
    "parse_claim",
]

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession, Store

log = logging.getLogger(__name__)

_LISTEN = re.compile(
    r"(?:running|listening|serving|started server)\s+(?:on|at)\s+(?:port\s+(\d{2,5})|"
    r"(?:https?://)?(?:[\w.-]+|\[[0-9a-f:]+\]):(\d{2,5}))",
    re.I,
)
_PYVER = re.compile(r"^Python (\d+\.\d+\.\d+)\s*$", re.M)
_BRANCH = re.compile(r"^On branch (\S+)\s*$", re.M)


def facts_in_tool_output(command: str, output: str) -> list[str]:
    """Facts recognised in a tool result by rule (see the module docstring), as statements.

    A fact the output gives two values for (two ports, two Python versions) is left out: the
    output does not say which one holds."""
    facts: list[str] = []
    low = output.lower()
    # substring checks first: the case-insensitive regex costs ~0.1 ms per KB of output
    listens = any(word in low for word in ("running", "listening", "serving", "started server"))
    for m in _LISTEN.finditer(output) if listens else ():
        facts.append(f"the server listens on port {m.group(1) or m.group(2)}")
    if "--version" in command or command.strip() in ("python -V", "python3 -V"):
        for m in _PYVER.finditer(output):
            facts.append(f"python version is {m.group(1)}")
    if command.strip().startswith("git status"):
        for m in _BRANCH.finditer(output):
            facts.append(f"the git branch is {m.group(1)}")
    return _unambiguous(list(dict.fromkeys(facts)))


def _unambiguous(facts: list[str]) -> list[str]:
    """``facts`` without those whose subject and predicate get two values in the same output (a
    log listing two servers' ports says which port neither server has alone)."""
    values: dict[tuple[str, str], set[str]] = {}
    for fact in facts:
        claim = parse_claim(fact)
        if claim is not None:
            values.setdefault((claim.subject, claim.predicate), set()).add(claim.value)
    out = []
    for fact in facts:
        claim = parse_claim(fact)
        if claim is None or len(values[(claim.subject, claim.predicate)]) == 1:
            out.append(fact)
    return out


def replay(conn: Any) -> None:
    """Apply every belief event of the log to the view (emptied by the caller), in log order,
    inside the caller's transaction."""
    for r in tables.belief_events(conn):
        BeliefStore._apply(
            conn,
            r["kind"],
            json.loads(r["payload"]),
            r["session_id"],
            r["step"],
            r["tool_call_id"],
            r["ts"],
        )


class BeliefStore:
    """Beliefs and conflicts over a :class:`~veil.core.store.Store`'s event log.

    Args:
        store: the project's store; the view's migrations
            (:func:`veil.default_plugins.beliefs.tables.migrations`) are applied if it was
            opened without them (a store a test or a tool opened by itself).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        store.migrate_plugins(tables.migrations())

    # -- writing: every change is an event, then applied to the view ----------------------------

    def _append(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        session_id: str | None,
        step: int | None,
        tool_call_id: str | None,
        ts: float,
    ) -> None:
        with self.store.transaction() as conn:
            _log(
                conn,
                kind,
                payload,
                session_id=session_id,
                step=step,
                tool_call_id=tool_call_id,
                ts=ts,
            )
            self._apply(conn, kind, payload, session_id, step, tool_call_id, ts)

    def assert_fact(
        self,
        session: PluginSession | None,
        statement: str,
        *,
        tool_call_id: str | None = None,
        source: str = "veil_remember",
        ts: float | None = None,
    ) -> dict[str, Any]:
        """Record a fact. Returns ``{"belief": id, "status": "asserted" | "reinforced",
        "conflict": conflict id or None}``.

        Raises:
            BadRequest: empty statement.
        """
        statement = " ".join((statement or "").split())
        if not statement:
            raise BadRequest("statement: empty")
        ts = ts if ts is not None else (session.clock() if session else time.time())
        claim = parse_claim(statement)
        session_id = session.id if session else None
        step = session.step if session else None
        where = {"session_id": session_id, "step": step, "tool_call_id": tool_call_id, "ts": ts}
        with self.store.transaction() as conn:
            same = _active_same(conn, statement, claim)
            if same is None:
                belief_id = new_id("belief")
                payload = {
                    "belief": belief_id,
                    "statement": statement,
                    "source": source,
                    "subject": claim.subject if claim else None,
                    "predicate": claim.predicate if claim else None,
                    "value": claim.value if claim else None,
                }
                # the row before the event: the view's unique index (tables.UNIQUE_SQL)
                # refuses a second active copy even when another process asserted the same
                # claim between the read above and this insert; it is then reinforced
                same = self._apply(conn, "belief.assert", payload, **where)
                if same == belief_id:
                    _log(conn, "belief.assert", payload, **where)
                    same = None
                elif same is not None:
                    _log(conn, "belief.reinforce", {"belief": same}, **where)
            else:
                self._apply(conn, "belief.reinforce", {"belief": same}, **where)
                _log(conn, "belief.reinforce", {"belief": same}, **where)
        if same is not None:
            return {"belief": same, "status": "reinforced", "conflict": self._conflict_of(same)}
        return {"belief": belief_id, "status": "asserted", "conflict": self._conflict_of(belief_id)}

    def resolve(self, session: PluginSession | None, conflict_id: str, keep: str) -> str:
        """Keep belief ``keep`` in an open conflict; the others are retracted (never deleted).

        Raises:
            BadRequest: unknown or closed conflict, or ``keep`` is not one of its beliefs.
        """
        conflict = tables.conflict(self.store.reader, conflict_id)
        if conflict is None or conflict["status"] != "open":
            raise BadRequest(f"conflict_id: no open conflict {conflict_id!r}")
        members = [b["id"] for b in self._members(conflict["subject"], conflict["predicate"])]
        if keep not in members:
            raise BadRequest(
                f"keep: {keep!r} is not in conflict {conflict_id} ({', '.join(members)})"
            )
        ts = session.clock() if session else time.time()
        self._append(
            "conflict.resolve",
            {"conflict": conflict_id, "keep": keep, "retract": [m for m in members if m != keep]},
            session_id=session.id if session else None,
            step=session.step if session else None,
            tool_call_id=None,
            ts=ts,
        )
        return f"{conflict_id} resolved: kept {keep}; retracted {', '.join(m for m in members if m != keep)}"

    # -- the view ------------------------------------------------------------------------------

    @staticmethod
    def _apply(
        conn: Any,
        kind: str,
        p: dict[str, Any],
        session_id: str | None,
        step: int | None,
        tool_call_id: str | None,
        ts: float,
    ) -> str | None:
        """Apply one event to the view; for ``belief.assert``, return the belief it landed on:
        its own id, or that of the active belief making the same claim, which it reinforces
        (a replay of a log written before the view's unique indexes merges duplicates the same
        way)."""
        if kind == "belief.assert":
            # the view applies today's rule to the statement (the payload keeps what the rule
            # gave when it was asserted), so a rebuild also applies a corrected rule
            claim = parse_claim(p["statement"])
            p = {
                **p,
                "subject": claim.subject if claim else None,
                "predicate": claim.predicate if claim else None,
                "value": claim.value if claim else None,
            }
            added = tables.insert_belief(
                conn,
                p["belief"],
                p["statement"],
                p["subject"],
                p["predicate"],
                p["value"],
                session_id=session_id,
                step=step,
                tool_call_id=tool_call_id,
                source=p.get("source"),
                created_at=ts,
            )
            if not added:
                same = _active_same(conn, " ".join(p["statement"].split()), claim)
                if same is not None:
                    tables.reinforce(conn, same)
                return same
            if p["subject"] is not None:
                BeliefStore._detect(conn, p["subject"], p["predicate"], ts, p["belief"])
            return p["belief"]
        elif kind == "belief.reinforce":
            tables.reinforce(conn, p["belief"])
        elif kind == "belief.retract":
            tables.retract(conn, p["belief"], ts)
        elif kind == "conflict.resolve":
            for bid in p["retract"]:
                tables.retract(conn, bid, ts)
            tables.resolve_conflict(conn, p["conflict"], p["keep"], ts)
        return None

    @staticmethod
    def _detect(conn: Any, subject: str, predicate: str, ts: float, trigger: str) -> None:
        if not _contradicting(tables.active_about(conn, subject, predicate)):
            return
        if tables.open_conflict_id(conn, subject, predicate) is None:
            # named after the belief that opened it, so a rebuild from the log gives the same id
            conflict_id = "conflict_" + trigger.split("_", 1)[1]
            tables.insert_conflict(conn, conflict_id, subject, predicate, ts)

    def rebuild(self) -> None:
        """Drop the view tables, create them again from their migrations and derive their rows
        from the event log alone (one transaction: a table missing or damaged is rebuilt too)."""
        with self.store.transaction() as conn:
            tables.drop_view(conn)
            self.store.forget_plugin_migrations(tables.PLUGIN_NAME)
            self.store.migrate_plugins(tables.migrations())
            replay(conn)

    # -- reading -------------------------------------------------------------------------------

    def _members(self, subject: str, predicate: str) -> list[dict[str, Any]]:
        """Active beliefs about ``subject`` / ``predicate`` that contradict another one."""
        return _contradicting(tables.active_about(self.store.reader, subject, predicate))

    def _conflict_of(self, belief_id: str) -> str | None:
        row = tables.open_conflict_of(self.store.reader, belief_id)
        if row is None:
            return None
        members = self._members(row["subject"], row["predicate"])
        return row["id"] if any(m["id"] == belief_id for m in members) else None

    def beliefs(self, include_retracted: bool = False) -> list[dict[str, Any]]:
        """Beliefs, oldest first (active only unless ``include_retracted``)."""
        return tables.beliefs(self.store.reader, include_retracted)

    def open_conflicts(self) -> list[dict[str, Any]]:
        """Open conflicts: ``[{"id", "subject", "predicate", "beliefs": [belief rows with
        provenance and a readable "when"]}]``."""
        out = []
        for c in tables.open_conflicts(self.store.reader):
            members = self._members(c["subject"], c["predicate"])
            if len(members) < 2:  # opened by an older rule, or its beliefs retracted since
                continue
            for m in members:
                m["when"] = time.strftime("%Y-%m-%d %H:%M", time.localtime(m["created_at"]))
            out.append(
                {
                    "id": c["id"],
                    "subject": f"{c['subject']} {c['predicate']} …",
                    "predicate": c["predicate"],
                    "beliefs": members,
                }
            )
        return out

    def history(self, subject: str | None = None) -> list[dict[str, Any]]:
        """The belief events in log order; with ``subject``, only those about beliefs whose
        statement contains it (case-insensitive), including reinforcements and resolutions."""
        events = self.store.events(kinds=tables.EVENT_KINDS)
        if not subject:
            return events
        needle = subject.lower()
        ids = {
            e["payload"]["belief"]
            for e in events
            if e["kind"] == "belief.assert" and needle in e["payload"]["statement"].lower()
        }

        def about(e: dict[str, Any]) -> bool:
            p = e["payload"]
            return (
                p.get("belief") in ids
                or p.get("keep") in ids
                or bool(ids & set(p.get("retract", [])))
            )

        return [e for e in events if about(e)]


def _active_same(conn: Any, statement: str, claim: Claim | None) -> str | None:
    """The active belief an assertion of ``statement`` (parsed as ``claim``) would repeat."""
    if claim is not None:
        return tables.active_claim(conn, claim.subject, claim.predicate, claim.value)
    return tables.active_statement(conn, statement)


def _log(
    conn: Any,
    kind: str,
    payload: dict[str, Any],
    *,
    session_id: str | None,
    step: int | None,
    tool_call_id: str | None,
    ts: float,
) -> None:
    insert_event(
        conn,
        kind,
        json.dumps(payload),
        ts=ts,
        session_id=session_id,
        step=step,
        tool_call_id=tool_call_id,
    )


def _contradicting(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that contradict at least one other row
    (:func:`veil.default_plugins.beliefs.claims.contradicts`), in their order; two rows from the
    same tool call never contradict each other."""
    rows = [r for r in rows if r["value"] is not None]
    claims = [Claim(r["subject"], r["predicate"], r["value"]) for r in rows]
    involved = set()
    for i, a in enumerate(rows):
        for j in range(i + 1, len(rows)):
            b = rows[j]
            if a["tool_call_id"] and a["tool_call_id"] == b["tool_call_id"]:
                continue
            if contradicts(claims[i], claims[j]):
                involved.update((i, j))
    return [r for i, r in enumerate(rows) if i in involved]
