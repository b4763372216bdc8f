"""The monitor's level sequences (worked out by hand from the rules in monitor.py) and the
plugin's hooks on a fake session through a real pluggy manager."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pluggy
import pytest
import veil_convergence
from veil_convergence.monitor import ConvergenceMonitor
from veil_convergence.settings import ConvergenceSettings

import veil.hookspecs
from veil.core.types import Attempt, CaptureEvent, PromptSection, ToolResult
from veil.hookspecs import hookimpl


def att(outcome: str, fp: str | None = None, target: str | None = "t.py", step: int = 0) -> Attempt:
    return Attempt(
        step=step,
        tool="bash",
        action=f"run {target}",
        target=target,
        outcome=outcome,
        fingerprint=fp,
    )


def levels(monitor: ConvergenceMonitor, attempts: list[Attempt]) -> list[int]:
    out = []
    for i, a in enumerate(attempts, start=1):
        a.step = i
        monitor.record(a, label=f"label-{a.fingerprint}" if a.fingerprint else None)
        out.append(monitor.level)
    return out


def test_soft_then_strong_then_cleared_by_a_pass() -> None:
    # 1 new fp + new target: progress, cf1 | 2 cf2 A=2 | 3 A=3 -> soft | 4 read, no progress,
    # sticky | 5 cf4 A=4 | 6 cf5 -> strong | 7 pass -> 0
    seq = [att("fail", "A"), att("fail", "A"), att("fail", "A"), att("uncertain", None),
           att("fail", "A"), att("fail", "A"), att("pass", None)]  # fmt: skip
    m = ConvergenceMonitor()
    assert levels(m, seq) == [0, 0, 1, 1, 1, 2, 0]
    assert m.history == [
        {"step": 3, "level": 1, "fingerprint": "A"},
        {"step": 6, "level": 2, "fingerprint": "A"},
    ]
    assert (m.consecutive_failures, m.without_progress) == (0, 0)


def test_halt_after_fifteen_attempts_without_progress() -> None:
    # the first read touches a new file (progress); 15 more reads of it make no progress
    seq = [att("uncertain", target="a.py") for _ in range(16)]
    m = ConvergenceMonitor()
    assert levels(m, seq) == [0] * 15 + [3]
    assert m.history == [{"step": 16, "level": 3, "fingerprint": None}]
    assert m.last_change.new == 3 and "halted" in m.last_change.message


def test_new_errors_are_progress_but_failures_still_add_up() -> None:
    # every fail is a new fingerprint (progress), yet 5 consecutive failures -> strong;
    # a 6th new failure keeps it; a partial resets the failures
    seq = [att("fail", fp) for fp in "ABCDEF"] + [att("partial", None)]
    m = ConvergenceMonitor()
    assert levels(m, seq) == [0, 0, 0, 0, 2, 2, 0]
    assert m.without_progress == 0


def test_uncertain_does_not_break_a_failure_streak_and_new_target_is_progress() -> None:
    # thresholds soft 2, strong 3, halt 4
    seq = [
        att("fail", "A", "x.py"),  # progress (new fp, new target); cf1, A1 -> 0
        att("uncertain", None, "x.py"),  # no progress wp1; cf stays 1 -> 0
        att("fail", "A", "x.py"),  # cf2 wp2 A2 -> soft 1
        att("uncertain", None, "y.py"),  # new target: progress; candidate 0 -> 0
        att("fail", "B", "y.py"),  # new fp: progress; cf3 -> strong 2
        att("uncertain", None, "y.py"),  # wp1, sticky 2
        att("uncertain", None, "y.py"),  # wp2
        att("uncertain", None, "y.py"),  # wp3
        att("uncertain", None, "y.py"),  # wp4 -> halt 3
    ]
    m = ConvergenceMonitor(soft_repeats=2, strong_failures=3, halt_without_progress=4)
    assert levels(m, seq) == [0, 0, 1, 0, 2, 2, 2, 2, 3]
    assert [h["level"] for h in m.history] == [1, 2, 3]
    # strong and halt name the most repeated fingerprint (A: 2 times, B: once)
    assert [h["fingerprint"] for h in m.history] == ["A", "A", "A"]


def test_most_repeated_tie_goes_to_the_most_recent() -> None:
    m = ConvergenceMonitor(soft_repeats=9, strong_failures=2, halt_without_progress=99)
    levels(m, [att("fail", "A"), att("fail", "B")])
    assert m.history == [{"step": 2, "level": 2, "fingerprint": "B"}]


def test_reset_starts_a_new_goal_and_keeps_history() -> None:
    m = ConvergenceMonitor()
    levels(m, [att("fail", "A")] * 3)
    assert m.level == 1 and m.prompt_text() is not None
    m.reset()
    assert (m.level, m.attempts, m.fingerprints, m.last_change) == (0, [], {}, None)
    assert m.prompt_text() is None
    assert levels(m, [att("fail", "A")]) == [0]  # A is new again in the new goal
    assert len(m.history) == 1


def test_deterministic() -> None:
    seq = [att("fail", "A"), att("uncertain"), att("fail", "A"), att("fail", "B"), att("fail", "A")]
    first, second = ConvergenceMonitor(), ConvergenceMonitor()
    assert levels(first, list(seq)) == levels(second, list(seq)) == [0, 0, 0, 0, 1]
    assert first.history == second.history


def test_messages_and_prompt_name_the_failing_approach() -> None:
    m = ConvergenceMonitor()
    for _ in range(3):
        change = m.record(att("fail", "abc", "repro.py"), label="ModuleNotFoundError: numpy")
    assert change.new == 1 and change.old == 0
    assert (change.fingerprint, change.label, change.action) == (
        "abc",
        "ModuleNotFoundError: numpy",
        "run repro.py",
    )
    assert "3 times" in change.message and "ModuleNotFoundError: numpy" in change.message
    text = m.prompt_text()
    assert text.startswith("Convergence warning, level 1 of 3 (soft).")
    assert "Approach to avoid: `run repro.py` -> ModuleNotFoundError: numpy" in text


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"soft_repeats": 0}, "softRepeats"), ({"strong_failures": -1}, "strongFailures"),
     ({"halt_without_progress": 1.5}, "haltWithoutProgress")],
)  # fmt: skip
def test_bad_thresholds_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"convergence.{field}"):
        ConvergenceMonitor(**kwargs)


def test_from_settings() -> None:
    m = ConvergenceMonitor.from_settings(ConvergenceSettings(soft_repeats=2, strong_failures=4))
    assert (m.soft_repeats, m.strong_failures, m.halt_without_progress) == (2, 4, 15)


# -- the plugin's hooks ------------------------------------------------------------------------

FAIL = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "/proj/repro.py", line {line}, in <module>
    import numpy
ModuleNotFoundError: No module named 'numpy'
</output>"""


class Recorder:
    """A second plugin that sees ``attempt_recorded``."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def attempt_recorded(self, session: Any, attempt: Attempt) -> None:
        self.attempts.append(attempt)


def make_session(**thresholds: int) -> tuple[SimpleNamespace, pluggy.PluginManager, Recorder]:
    pm = pluggy.PluginManager("veil")
    pm.add_hookspecs(veil.hookspecs)
    pm.register(veil_convergence, name="veil_convergence")
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    session = SimpleNamespace(
        id="s1",
        cwd=Path("/proj"),
        state={},
        config=SimpleNamespace(
            settings=SimpleNamespace(convergence=ConvergenceSettings(**thresholds))
        ),
        veil=SimpleNamespace(pm=pm),
        emitted=[],
        halts=[],
    )
    session.emit = lambda kind, **data: session.emitted.append((kind, data))
    session.request_halt = session.halts.append
    return session, pm, recorder


def tool_result(step: int, content: str, command: str = "python repro.py") -> CaptureEvent:
    return CaptureEvent(
        phase="tool_result",
        message={"role": "tool", "content": content, "tool_call_id": f"c{step}"},
        step=step,
        tool_name="bash",
        tool_call_id=f"c{step}",
        arguments={"command": command},
        result=ToolResult(content),
    )


def user_message() -> CaptureEvent:
    return CaptureEvent(phase="user", message={"role": "user", "content": "next task"}, step=0)


def test_capture_records_attempts_warns_once_and_adds_a_prompt_section() -> None:
    session, pm, recorder = make_session()
    for step, line in enumerate((1, 5, 9), start=1):
        assert pm.hook.capture(
            session=session, event=tool_result(step, FAIL.format(line=line))
        ) == [[]]
    assert [a.step for a in recorder.attempts] == [1, 2, 3]
    assert {a.fingerprint for a in recorder.attempts} == {recorder.attempts[0].fingerprint}
    assert recorder.attempts[0].target == "repro.py" and recorder.attempts[0].outcome == "fail"
    assert [kind for kind, _ in session.emitted] == ["warning"]
    data = session.emitted[0][1]
    assert (data["level"], data["step"], data["label"]) == (1, 3, "ModuleNotFoundError: numpy")
    assert data["fingerprint"] == recorder.attempts[0].fingerprint
    (section,) = pm.hook.system_prompt_sections(session=session)
    assert isinstance(section, PromptSection)
    assert (section.name, section.order) == ("convergence", 800)
    assert "ModuleNotFoundError: numpy" in section.text and "python repro.py" in section.text


def test_progress_clears_and_user_message_resets() -> None:
    session, pm, _ = make_session()
    for step in range(1, 4):
        pm.hook.capture(session=session, event=tool_result(step, FAIL.format(line=step)))
    pm.hook.capture(
        session=session, event=tool_result(4, "<returncode>0</returncode>\n<output>\nok\n</output>")
    )
    assert [kind for kind, _ in session.emitted] == ["warning", "info"]
    assert pm.hook.system_prompt_sections(session=session) == []
    for step in range(5, 7):
        pm.hook.capture(session=session, event=tool_result(step, FAIL.format(line=step)))
    assert veil_convergence.monitor_for(session).level == 1  # 4th and 5th time in this goal
    pm.hook.capture(session=session, event=user_message())
    assert veil_convergence.monitor_for(session).level == 0
    assert pm.hook.system_prompt_sections(session=session) == []


def test_halt_emits_and_requests_a_halt() -> None:
    session, pm, _ = make_session(halt_without_progress=2, strong_failures=99, soft_repeats=99)
    for step in range(1, 4):
        pm.hook.capture(session=session, event=tool_result(step, "file text", command="cat a.py"))
    assert [kind for kind, _ in session.emitted] == ["halt"]
    assert session.emitted[0][1]["level"] == 3
    assert len(session.halts) == 1 and session.halts[0].startswith("convergence: ")


def test_other_phases_and_memory_tools_are_ignored() -> None:
    session, pm, recorder = make_session()
    event = CaptureEvent(phase="assistant", message={"role": "assistant", "content": "hi"}, step=1)
    assert pm.hook.capture(session=session, event=event) == [[]]
    memory = tool_result(1, "hits")
    memory.tool_name = "veil_recall"
    pm.hook.capture(session=session, event=memory)
    assert recorder.attempts == [] and session.emitted == []


def test_replay_report_counts_fingerprints_across_goals() -> None:
    session, pm, _ = make_session()
    for step in range(1, 4):
        pm.hook.capture(session=session, event=tool_result(step, FAIL.format(line=step)))
    pm.hook.capture(session=session, event=user_message())
    other = FAIL.replace("numpy", "scipy")
    pm.hook.capture(session=session, event=tool_result(4, other))
    (report,) = pm.hook.replay_report(session=session)
    fp = veil_convergence.fingerprint(FAIL.format(line=1))
    assert report == {
        "convergence": {"fingerprints": 2, "levels": [{"step": 3, "level": 1, "fingerprint": fp}]}
    }
