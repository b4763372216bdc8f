"""Find real error outputs in ../shared/data/trajectories and build the labelled pair set.

This is a maintainer's script, not a test. It reads the three recorded-session formats described
in ../shared/data/README.md just far enough to pair each observation with the action that caused
it, and offers three commands::

    python make_pairs.py candidates        # every observation that looks like an error, by type
    python make_pairs.py show SOURCE       # the trimmed excerpt that would go into the pair file
    python make_pairs.py build             # write error_pairs.json from the hand labels below

``SOURCE`` is ``<format>/<file>#<index>``: the message index (mini-swe-agent), the trajectory
entry index (SWE-agent) or the event id (OpenHands). The labels in :data:`LABELLED` were written
by reading the excerpts, never by running the fingerprint: the fingerprint is what they test.

``test_convergence_real.py`` imports :func:`iter_observations` from this file by path.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / ".." / "shared" / "data" / "trajectories"
PAIRS_FILE = HERE / "error_pairs.json"

_RC = re.compile(r"<returncode>(-?\d+)</returncode>")
_ERRORISH = re.compile(
    r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b|^FAILED |command not found|"
    r"^E\s{2,}|No module named|^error: |^fatal: |<exception>|ERRORS:",
    re.M,
)
_TYPE = re.compile(r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\b", re.M)


def iter_observations(path: Path) -> list[dict[str, Any]]:
    """Return the observations of one recorded session, in order.

    Args:
        path: a mini-swe-agent ``.traj.json``, a SWE-agent ``.traj`` or an OpenHands event list.

    Returns:
        A list of ``{"step", "index", "action", "text"}``: ``step`` counts observations from 1,
        ``index`` is the message index / trajectory entry / event id used in ``source`` labels,
        ``action`` the command (or ``tool path``) that produced ``text``, the observation text.
        OpenHands ``run`` observations get their exit code prefixed as
        ``<returncode>N</returncode>``
        (the event stores it beside the text) and the "no new output" suffix appended.

    Raises:
        ValueError: the file is none of the three formats (names the file).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = []
    if isinstance(data, dict) and "messages" in data:  # mini-swe-agent
        messages = data["messages"]
        action = ""
        for i, msg in enumerate(messages):
            content = msg.get("content")
            if msg.get("role") == "assistant":
                action = _mini_action(msg)
            elif (
                msg.get("role") in ("tool", "user")
                and isinstance(content, str)
                and "<returncode>" in content
            ):
                out.append({"index": i, "action": action, "text": content})
    elif isinstance(data, dict) and "trajectory" in data:  # SWE-agent
        for i, entry in enumerate(data["trajectory"]):
            out.append(
                {"index": i, "action": entry.get("action", ""), "text": entry["observation"]}
            )
    elif isinstance(data, list):  # OpenHands event stream
        by_id = {str(e.get("id")): e for e in data}
        for event in data:
            if "observation" not in event or "cause" not in event:
                continue
            cause = by_id.get(str(event["cause"]), {})
            args = cause.get("args") or {}
            action = args.get("command") or f"{cause.get('action', '')} {args.get('path', '')}"
            text = str(event.get("content") or "")
            meta = (event.get("extras") or {}).get("metadata") or {}
            if event["observation"] == "run" and "exit_code" in meta:
                text = (
                    f"<returncode>{meta['exit_code']}</returncode>\n{text}{meta.get('suffix', '')}"
                )
            out.append({"index": event["id"], "action": action.strip(), "text": text})
    else:
        raise ValueError(f"{path}: not a mini-swe-agent, SWE-agent or OpenHands trajectory")
    for step, obs in enumerate(out, start=1):
        obs["step"] = step
    return out


def _mini_action(msg: dict[str, Any]) -> str:
    actions = (msg.get("extra") or {}).get("actions") or []
    if actions:
        return str(actions[0].get("command", ""))
    for call in msg.get("tool_calls") or []:
        try:
            return str(json.loads(call["function"]["arguments"]).get("command", ""))
        except (KeyError, ValueError, AttributeError):
            continue
    return ""


def trajectory_files() -> list[Path]:
    """Every recorded session under ../shared/data/trajectories, sorted."""
    return sorted(p for p in DATA.glob("*/*") if p.is_file())


def load_source(source: str) -> dict[str, Any]:
    """Return the observation named ``<format>/<file>#<index>``.

    Raises:
        KeyError: no observation with that index in the file.
    """
    name, _, index = source.partition("#")
    for obs in iter_observations(DATA / name):
        if str(obs["index"]) == index:
            return obs
    raise KeyError(source)


def excerpt(text: str, head: int = 6, tail: int = 30, width: int = 400) -> str:
    """Trim an observation to the part a human reads to label it: the first ``head`` lines (the
    return-code tag, a linter's error block), the last ``tail`` lines (where tracebacks and pytest
    summaries end), long lines cut to ``width`` characters. The text is otherwise copied as it
    was recorded."""
    lines = text.splitlines()
    if len(lines) > head + tail:
        lines = lines[:head] + lines[-tail:]
    return "\n".join(line if len(line) <= width else line[:width] for line in lines)


def candidates() -> dict[str, list[str]]:
    """Group error-looking observations by the last exception type they name."""
    groups: dict[str, list[str]] = defaultdict(list)
    for path in trajectory_files():
        for obs in iter_observations(path):
            text = obs["text"]
            rc = _RC.search(text)
            if not (_ERRORISH.search(text) or (rc and rc.group(1) != "0")):
                continue
            types = _TYPE.findall(text)
            key = types[-1] if types else ("exit " + rc.group(1) if rc else "other")
            last = [ln for ln in text.splitlines() if key in ln][-1:] or [""]
            source = f"{path.parent.name}/{path.name}#{obs['index']}"
            groups[key].append(f"{source}  {last[0].strip()[:140]}")
    return groups


M = "mini-swe-agent/"
SW = "swe-agent/sweagent_gpt4_pydicom-1458.traj"
PV72, PV154, PV606 = (M + f"pvlib__pvlib-python-{n}.traj.json" for n in (1072, 1154, 1606))
PV707, PV854 = (M + f"pvlib__pvlib-python-{n}.traj.json" for n in (1707, 1854))
AS196, AS268, AS333, AS866, AS978 = (
    M + f"pylint-dev__astroid-{n}.traj.json" for n in (1196, 1268, 1333, 1866, 1978)
)
SQ517, SQ625, SQ733, SQ763, SQ2419 = (
    M + f"sqlfluff__sqlfluff-{n}.traj.json" for n in (1517, 1625, 1733, 1763, 2419)
)
PD139, PD256, PD413, PD694 = (
    M + f"pydicom__pydicom-{n}.traj.json" for n in (1139, 1256, 1413, 1694)
)
MM343, MM359 = (M + f"marshmallow-code__marshmallow-{n}.traj.json" for n in (1343, 1359))

# (a, b, same, why): labelled by reading both excerpts (never by running the fingerprint).
LABELLED: list[tuple[str, str, bool, str]] = [
    # -- the same failure, text drifting --------------------------------------------------------
    (f"{PV154}#41", f"{PV854}#39", True,
     "np.Inf in pvlib/pvsystem.py at import; line 2431 vs 2528, another session"),
    (f"{PV72}#33", f"{PV707}#31", True,
     "np.Inf in pvlib/singlediode.py; different scripts and import chains "
     "(pvsystem line 16 vs 21)"),
    (f"{PV154}#33", f"{PV854}#31", True, "np.Inf in pvlib/singlediode.py; line 59 vs 61"),
    (f"{PV72}#19", f"{PV154}#21", True,
     "numpy is missing; imported from pvlib/tools.py in one, from the script itself in the other"),
    (f"{PV606}#49", f"{PV707}#27", True,
     "h5py is missing; a pip warning precedes one, scripts and line numbers differ"),
    (f"{AS268}#19", f"{AS333}#107", True,
     "wrapt cannot import inspect.formatargspec; node_classes line 47 vs 49, a tmp dir printed "
     "inside the traceback"),
    (f"{AS333}#287", f"{AS333}#291", True,
     "AstroidBuildingError for the same directory; temporary names tmp4yqus096 vs tmp2py8lwuw"),
    (f"{MM343}#47", f"{MM343}#95", True,
     "NoneType not subscriptable in schema._invoke_field_validators; line 894 vs 882 after "
     "an edit"),
    (f"{PV707}#139", f"{PV854}#85", True,
     "pytest cannot start: testpaths in pyproject.toml is a string; two sessions"),
    (f"{PD139}#69", f"{PD413}#149", True,
     "pytest is not installed: 'python -m pytest' message vs an import traceback"),
    (f"{SQ517}#13", f"{SQ517}#131", True,
     "Dropped elements in check_still_complete: plain traceback vs one a test script printed "
     "indented"),
    (f"{SQ517}#81", f"{SQ517}#127", True,
     "Dialect must be expanded before use, from two different debug scripts"),
    (f"{AS333}#265", f"{AS333}#269", True,
     "NameError inspect in astroid/decorators.py; script output interleaved in the second"),
    (f"{SQ733}#21", f"{SQ763}#177", True,
     "sqlfluff fix opens /dev/tty (OSError errno 6) in cli/commands.py:fix; two sessions"),
    (f"{SQ517}#67", f"{SQ517}#69", True,
     "'Dialect' object has no attribute 'get' in the lexer; the first is chained to another error"),
    (M + "pylint-dev__astroid-1196.traj.json#7", f"{AS978}#79", True,
     "wrapt is missing; different sessions, scripts and line numbers"),
    (f"{SQ625}#73", f"{SQ625}#83", True,
     "git apply: patch failed on L031.py, hunk at line 211 vs 210"),
    (f"{SQ763}#85", f"{SQ763}#121", True,
     "malformed patch for linted_file.py at line 35 vs 45, extra prompts in the second"),
    (f"{AS866}#43", f"{AS866}#47", True,
     "None formatted with a format spec, from two different python -c one-liners"),
    (f"{SW}#6", f"{SW}#7", True, "the same rejected edit: E999 unmatched ')' in numpy_handler.py"),
    # -- different failures, often of the same exception type -----------------------------------
    (f"{PV72}#33", f"{PV72}#41", False,
     "same AttributeError and message, but np.Inf in singlediode.py was fixed and the next "
     "occurrence surfaced in pvsystem.py"),
    (f"{PV854}#87", f"{PV854}#143", False,
     "np.Inf again, in tests/test_singlediode.py vs pvlib/pvsystem.py"),
    (f"{PV72}#19", f"{PV72}#25", False, "ModuleNotFoundError: numpy vs pytz"),
    (f"{PV707}#89", f"{AS333}#261", False,
     "IndentationError: unexpected indent in pvlib/iam.py vs in wrapt/decorators.py"),
    (f"{PD139}#63", f"{PD139}#95", False,
     "SyntaxError: empty f-string expression in a script vs invalid syntax in a one-liner"),
    (f"{SW}#5", f"{SW}#6", False, "rejected edits to the same file: unmatched ']' vs ')'"),
    (f"{PV154}#123", f"{PV154}#135", False,
     "pytest AssertionError in test_reindl vs test_get_extra_radiation[nrel-300-...]"),
    (f"{PV72}#131", f"{PV154}#117", False,
     "pytest ValueError 'Invalid frequency' in test_sapm_series vs test_reindl"),
    (f"{SQ517}#13", f"{SQ517}#81", False,
     "RuntimeError: dropped elements in parsing vs dialect not expanded"),
    (f"{AS866}#41", f"{AS866}#31", False,
     "same AttributeError text ('NoneType' has no 'format'): a python -c probe vs the bug inside "
     "astroid's brain_builtin_inference"),
    (f"{PV154}#59", f"{PV154}#79", False,
     "ZeroDivisionError: a deliberate 0/0 one-liner vs the bug in irradiance.klucher"),
    (f"{PD139}#151", f"{AS866}#43", False,
     "TypeError in a one-liner: '<' between PersonName and str vs a format spec on None"),
    (f"{PD694}#39", f"{SQ733}#99", False,
     "TypeError unexpected keyword argument: RawDataElement.__new__ vs Linter.__init__"),
    (f"{AS333}#265", f"{SQ517}#145", False, "NameError: inspect vs segments_in"),
    (f"{MM359}#13", f"{SQ517}#67", False, "AttributeError: List.opts vs Dialect.get"),
    (f"{PD413}#69", f"{PD256}#69", False,
     "ValueError: missing file meta elements vs unknown format code 'X'"),
    (f"{PD139}#69", f"{SQ517}#9", False, "python -m: no module named pytest vs sqlfluff"),
    (f"{AS333}#7", f"{SQ2419}#29", False, "command not found: tree vs sqlfluff"),
    (f"{SQ625}#73", f"{SQ625}#77", False, "git apply: patch does not apply vs corrupt patch"),
    (f"{AS268}#19", f"{SQ517}#65", False,
     "ImportError cannot import name: inspect.formatargspec vs sqlfluff.dialects.dialect_selector"),
    (f"{SQ763}#59", f"{SQ763}#89", False,
     "file not found: subprocess cannot find the sqlfluff program vs grep cannot read default.cfg"),
    (f"{PD694}#89", f"{PD694}#99", False,
     "pytest exit 4 'not found': test_dataset.py::test_to_json_dict vs "
     "test_json.py::test_suppress_invalid_tags"),
]  # fmt: skip


def build() -> list[dict[str, Any]]:
    """Write :data:`PAIRS_FILE` from :data:`LABELLED` (excerpts copied from the sources)."""
    pairs = []
    for a, b, same, why in LABELLED:
        pairs.append(
            {
                "a": excerpt(load_source(a)["text"]),
                "b": excerpt(load_source(b)["text"]),
                "same": same,
                "source": f"{a} | {b}",
                "why": why,
            }
        )
    PAIRS_FILE.write_text(json.dumps(pairs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return pairs


def main(argv: list[str]) -> int:
    if not DATA.is_dir():
        print(f"no trajectories at {DATA}", file=sys.stderr)
        return 2
    if argv[:1] == ["candidates"]:
        for key, rows in sorted(candidates().items(), key=lambda kv: -len(kv[1])):
            print(f"## {key} ({len(rows)})")
            print("\n".join("  " + r for r in rows))
    elif argv[:1] == ["show"] and len(argv) == 2:
        obs = load_source(argv[1])
        print(f"ACTION: {obs['action'][:300]}\n{excerpt(obs['text'])}")
    elif argv[:1] == ["build"]:
        print(f"wrote {len(build())} pairs to {PAIRS_FILE}")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
