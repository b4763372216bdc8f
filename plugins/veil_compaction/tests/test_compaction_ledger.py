"""The section veil records itself in every full-compaction summary (veil_compaction.ledger)."""

from __future__ import annotations

import json

from veil_compaction.ledger import HEADING, MAX_COMMANDS, parse, record, strip, with_ledger


def call(cid: str, name: str, **arguments) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def result(cid: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": text}


HISTORY = [
    {"role": "user", "content": "make the env file win over defaults"},
    call("c1", "read", path="src/app/config.py"),
    result("c1", "def parse_config(path): ..."),
    call("c2", "bash", command="grep -n DATABASE_URL src/app/settings.py tests/test_config.py"),
    result("c2", "<returncode>0</returncode>\n12: DATABASE_URL = env('DATABASE_URL')"),
    call("c3", "edit", path="src/app/config.py", old="a", new="b"),
    result("c3", "edited src/app/config.py"),
    call("c4", "bash", command="sed -i 's/dev/prod/' src/app/defaults.py && echo ok > log.txt"),
    result("c4", "<returncode>0</returncode>"),
    call("c5", "bash", command="python -m pytest tests/test_config.py -x\n# second line"),
    result(
        "c5",
        "<returncode>1</returncode>\nE   AssertionError: assert 'dev' == 'prod'\n"
        "FAILED tests/test_config.py::test_env_file - AssertionError: assert 'dev' == 'prod'",
    ),
]


def test_record_lists_files_commands_and_errors_newest_first():
    fields = record(HISTORY)
    # sed -i writes every path of its command (log.txt too, by the redirect)
    assert fields["Files modified"] == ["log.txt", "src/app/defaults.py", "src/app/config.py"]
    # every other path a command or a read names is read, newest first
    assert fields["Files read"] == [
        "tests/test_config.py",
        "src/app/settings.py",
        "src/app/config.py",
    ]
    assert fields["Recent commands"] == [
        "`python -m pytest tests/test_config.py -x` (exit 1)",
        "`sed -i 's/dev/prod/' src/app/defaults.py && echo ok > log.txt` (exit 0)",
        "`grep -n DATABASE_URL src/app/settings.py tests/test_config.py` (exit 0)",
    ]
    assert fields["Open errors"] == [
        "FAILED tests/test_config.py::test_env_file - AssertionError: assert 'dev' == 'prod'"
    ]


def test_the_section_follows_whatever_the_model_wrote_and_parses_back():
    text = with_ledger("The model wrote invented code here.", HISTORY, previous=None)
    assert text.startswith("The model wrote invented code here.\n\n" + HEADING + "\n")
    section = text.split(HEADING, 1)[1]
    assert "- Files modified: log.txt, src/app/defaults.py, src/app/config.py" in section
    read = parse(text)["Files read"]
    assert "src/app/settings.py" in read and "src/app/config.py" not in read  # modified wins
    assert (
        parse(text)["Recent commands"][0] == "`python -m pytest tests/test_config.py -x` (exit 1)"
    )
    assert strip(text) == "The model wrote invented code here."


def test_a_later_compaction_merges_the_earlier_section_and_drops_the_model_copy():
    first = with_ledger("first summary", HISTORY, previous=None)
    later = [
        call("c9", "bash", command="python -m pytest tests/test_config.py -x"),
        result("c9", "<returncode>0</returncode>\n1 passed"),
    ]
    # the model copied the old section into its new summary: it must not appear twice
    second = with_ledger("second summary\n\n" + first.split("\n\n", 1)[1], later, previous=first)
    assert second.count(HEADING) == 1 and second.startswith("second summary\n\n" + HEADING)
    fields = parse(second)
    assert fields["Files modified"] == ["log.txt", "src/app/defaults.py", "src/app/config.py"]
    assert fields["Recent commands"][0] == "`python -m pytest tests/test_config.py -x` (exit 0)"
    assert fields["Open errors"] == []  # the later part ran commands: old errors are settled


def test_nothing_to_record_leaves_the_summary_alone_and_lists_are_bounded():
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert with_ledger("just talk", plain, previous=None) == "just talk"
    many = []
    for n in range(20):
        many += [call(f"k{n}", "bash", command=f"cat src/m{n}.py"), result(f"k{n}", "x")]
    fields = parse(with_ledger("s", many, previous=None))
    assert len(fields["Recent commands"]) == MAX_COMMANDS
    assert fields["Recent commands"][0] == "`cat src/m19.py` (ok)"
    assert len(fields["Files read"]) == 15 and fields["Files read"][0] == "src/m19.py"
