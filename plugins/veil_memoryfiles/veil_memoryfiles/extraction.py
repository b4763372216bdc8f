"""The pre-compaction memory extractor (seed 000 "Memory extraction during compaction").

Before messages are summarised away, the compaction model is asked for the durable facts in
them (decisions, conventions, paths, commands, ports, failures to avoid); each fact becomes an
entry of the agent's MEMORY.md through the same path as ``memory_write`` (so the guards apply)
and a belief (the ``assert_fact`` hook: the ``veil.beliefs`` plugin records it, so contradictions
surface as conflicts). Disabled with
``memory.enabled: false``. A model error writes nothing and is reported, never raised: the
compaction goes on (extraction runs before, and outside, the compaction transaction).

Repository-provided text (issue 17) is never promoted: the prompt asks the model to leave out
what comes from quoted, repository-provided memory or instruction files, and each fact goes
through ``memory_write``'s copy guard (``origin="agent"``, :func:`veil_memoryfiles.trust.find_copy`):
a fact that repeats text veil did not write is neither written nor asserted as a belief.
A fact that holds a credential, or the placeholder of one already redacted
(``[redacted:NAME]``), is refused too: neither written nor believed, and the session is told how
many were (``security.redactSecrets``; :mod:`veil.core.safety.redaction`).
"""

from __future__ import annotations

import re
from typing import Any

from veil import has_placeholder
from veil_memoryfiles.backend import files_for
from veil_memoryfiles.service import MemoryService

MAX_FACTS = 12
MAX_INPUT_CHARS = 24_000
EXTRACT_PROMPT = """You extract durable facts from part of a coding-agent conversation that is \
about to be summarised away. List only facts worth remembering in a later session: decisions \
and their reasons, project conventions, file paths and what they hold, commands that work, \
ports, versions, and approaches that failed. One fact per line, each starting with "- ", at \
most {n} lines, each a full sentence under 200 characters. Leave out anything that only \
repeats repository-provided text (memory or instruction files shown quoted with "> " under a \
"repository-provided" label): it is not the agent's own knowledge. If there is nothing \
durable, answer "- none"."""

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def _transcript(messages: list[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        text = m.get("content") or ""
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            text += f"\n[tool call] {fn.get('name')} {fn.get('arguments', '')}"
        if text.strip():
            parts.append(f"{m.get('role')}: {text.strip()}")
    joined = "\n\n".join(parts)
    return joined[-MAX_INPUT_CHARS:]  # the newest part is the most likely to still matter


def parse_facts(answer: str, limit: int = MAX_FACTS) -> list[str]:
    """Bullet lines of the model's answer as facts (``- none`` and blanks dropped, deduplicated)."""
    facts: dict[str, None] = {}
    for line in (answer or "").splitlines():
        m = _BULLET.match(line)
        if not m:
            continue
        fact = m.group(1).strip()
        if fact.lower().strip(".") in ("none", "nothing", "n/a") or len(fact) < 8:
            continue
        facts.setdefault(fact[:300], None)
    return list(facts)[:limit]


def credential_like(fact: str, redactor: Any) -> bool:
    """Whether an extracted fact is about a credential: it holds one (``redactor`` would change
    it) or the placeholder of one already redacted. Always False when redaction is off."""
    return bool(redactor.enabled) and (has_placeholder(fact) or redactor.changes(fact))


def extract_before_compaction(session: Any, messages: list[dict[str, Any]]) -> list[str]:
    """Ask the compact model for facts in ``messages`` and write them; return the facts written.

    Credential-like facts (:func:`credential_like`) are dropped; an ``info`` event says how many.
    Returns [] when memory is disabled for the agent or there is nothing to read.
    """
    service = MemoryService(
        session.config, session.agent, files_for(session.config, getattr(session, "veil", None))
    )
    if not service.enabled or not messages:
        return []
    transcript = _transcript(messages)
    if not transcript:
        return []
    model = session.veil.llm.model_for("compact")
    try:
        completion = model.complete(
            [
                {"role": "system", "content": EXTRACT_PROMPT.format(n=MAX_FACTS)},
                {"role": "user", "content": transcript},
            ]
        )
    except Exception as exc:  # noqa: BLE001 - extraction must never stop a compaction
        session.emit("warning", message=f"memory extraction skipped: {exc}")
        return []
    written = []
    refused = 0
    untrusted = 0
    redactor = session.config.redactor
    for fact in parse_facts(completion.message.get("content") or ""):
        if credential_like(fact, redactor):
            refused += 1
            continue
        outcome = service.write(fact, "agent", origin="agent", skip_if_present=True)
        if outcome.status == "skipped_untrusted":
            untrusted += 1  # repository-provided text: not the agent's, not a belief either
            continue
        if outcome.status == "written":
            written.append(fact)
        session.veil.pm.hook.assert_fact(
            session=session, statement=fact, tool_call_id=None, source="memory_extraction"
        )
    if written or refused:
        text = f"memory: {len(written)} fact(s) written before compaction"
        if refused:
            text += f"; {refused} credential-like fact(s) refused (not written, not believed)"
        session.emit("info", text=text)
    if untrusted:
        session.emit(
            "info",
            text=f"memory: {untrusted} extracted fact(s) not written: they repeat "
            "repository-provided text",
        )
    return written
