"""Memory extraction never writes a fact the file already holds (issue 19: the same two facts
five times in three turns). What counts as "the same" is in veil_memoryfiles.dedupe."""

from __future__ import annotations

import json

import veil_memoryfiles
from veil_memoryfiles.backend import files_for
from veil_memoryfiles.dedupe import fact_key, present_keys
from veil_memoryfiles.service import MemoryService

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel

HISTORY = [
    {"role": "user", "content": "start the server"},
    {"role": "assistant", "content": "It listens on port 5051; tests run with `make check`."},
]


def test_fact_key_folds_whitespace_case_markers_and_trailing_punctuation():
    # each expected key written out by hand from the rules in the module docstring
    assert fact_key("The API listens on port 5051.") == "the api listens on port 5051"
    assert fact_key("  - the  API\tlistens on\nport 5051 ") == "the api listens on port 5051"
    assert fact_key("* 2) THE API LISTENS ON PORT 5051!?") == "the api listens on port 5051"
    assert fact_key("\u2022 Ｐort 5051;") == "port 5051"  # NFKC: full-width P
    assert fact_key("Use `make check`:") == "use `make check`"
    assert fact_key(" - . ") == ""
    # a changed value or word is another fact
    assert fact_key("port 5051") != fact_key("port 5052")
    assert fact_key("v1.2 is used") != fact_key("v1.2.3 is used")
    # a number that is the fact itself is not a list marker when no space follows it
    assert fact_key("3.11 is the Python version") == "3.11 is the python version"


def test_present_keys_reads_entries_whole_and_line_by_line():
    text = (
        "# Memory\n- Header fact one.\n\n"
        "<!-- 2025-03-02 -->\nA single fact.\n\n"
        "<!-- 2025-03-03 -->\n- first listed fact\n- second listed fact\n"
    )
    keys = present_keys(text)
    assert {
        "header fact one",
        "a single fact",
        "first listed fact",
        "second listed fact",
        "first listed fact\n- second listed fact".replace("\n", " "),
    } <= keys
    assert "# memory" in keys  # the heading is a line too (harmless: no fact reads like it)


def open_project(tmp_path, replies):
    project = tmp_path / "p"
    (project / ".veil").mkdir(parents=True)
    config = load_config(project)
    model = ScriptedModel(replies)
    veil = open_veil(
        project,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_memoryfiles", veil_memoryfiles),),
    )
    return veil, project


def test_extraction_at_each_compaction_writes_each_fact_once(tmp_path, monkeypatch, stored_memory):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    # the compact model restates the same two facts, reworded only in case, spacing, markers
    # and punctuation, at three compactions in a row (what the issue saw), plus one new fact
    answers = [
        "- The server listens on port 5051.\n- Tests run with make check.",
        "* the server listens on port 5051\n- Tests  run with make check!",
        "1. THE SERVER LISTENS ON PORT 5051.\n- Tests run with make check.\n"
        "- The database file is data/app.db.",
    ]
    veil, project = open_project(tmp_path, answers)
    session = veil.new_session()
    for _ in answers:
        veil.pm.hook.before_compaction(session=session, messages=HISTORY)
    text = stored_memory(project, "agents/default/MEMORY.md")
    entries = [line for line in text.splitlines() if line and not line.startswith("<!--")]
    assert entries == [
        "The server listens on port 5051.",
        "Tests run with make check.",
        "The database file is data/app.db.",
    ]
    veil.close()


def test_a_fact_written_by_hand_is_not_extracted_again(tmp_path, monkeypatch, stored_memory):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    veil, project = open_project(tmp_path, ["- Deploys go through `make release`."])
    service = MemoryService(veil.config, "default", files_for(veil.config, veil))
    service.write("Notes from the first week:\n- deploys go through `make release`\n- ask Ana")
    service.write("An unrelated later entry.")
    session = veil.new_session()
    veil.pm.hook.before_compaction(session=session, messages=HISTORY)
    text = stored_memory(project, "agents/default/MEMORY.md")
    assert text.lower().count("make release") == 1
    veil.close()


def test_memory_write_by_the_agent_keeps_seed_000_last_entry_rule(tmp_path, monkeypatch):
    # the tool path is unchanged: only the last entry counts as a duplicate there (seed 000)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "p"
    (project / ".veil").mkdir(parents=True)
    (project / ".veil" / "settings.json").write_text(json.dumps({}))
    service = MemoryService(load_config(project), "default")
    assert service.write("fact A").status == "written"
    assert service.write("fact B").status == "written"
    assert service.write("fact A").status == "written"
    assert service.write("fact A").status == "skipped_duplicate"
    assert service.write("Fact A.", skip_if_present=True).status == "skipped_duplicate"
