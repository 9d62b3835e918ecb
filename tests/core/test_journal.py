"""The journal is read as the one typed entry it is written as: read_entries gives JournalEntry, checked against
transition.schema.json line by line; a line the schema refuses is one line naming the file and the line."""

from __future__ import annotations

import json

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry, append_entry, read_entries

LINE = {"ts": "2026-12-01T00:00:00Z", "deployment": "dep_a", "from": None, "to": "provisioning"}


def test_what_is_appended_is_what_is_read(tmp_path):
    path = tmp_path / "transitions.jsonl"
    written = [JournalEntry("dep_a", None, "provisioning", provider="vast", ts="2026-12-01T00:00:00Z"),
               JournalEntry("dep_a", "provisioning", "installing", target_id="7", marker={"launch": {"n": 1}},
                            ts="2026-12-01T00:01:00Z")]
    for entry in written:
        append_entry(path, entry)
    with path.open("a") as handle:
        handle.write('{"ts": "2026-12-01T00:02:00Z", "deploy')  # torn: a writer died mid-line
    assert list(read_entries(path)) == written


def test_a_line_the_schema_refuses_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "transitions.jsonl"
    path.write_text(json.dumps(LINE) + "\n" + json.dumps({**LINE, "to": 7}) + "\n")
    with pytest.raises(UserError) as caught:
        list(read_entries(path))
    line = caught.value.line()
    assert "transitions.jsonl" in line and ":2:" in line and "transition.schema.json" in line, line


def test_a_missing_journal_has_no_entries(tmp_path):
    assert list(read_entries(tmp_path / "transitions.jsonl")) == []
