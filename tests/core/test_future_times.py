"""Time (issue 18, item 5): a timestamp more than FUTURE_SKEW in the future is refused when written to the ledger or
the journal (one line naming the file and the field, nothing appended)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gpuharness.cli import main
from gpuharness.core.clock import FUTURE_SKEW, format_ts, future_field, utcnow
from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry, append_entry
from gpuharness.core.ledger import Ledger


def later(delta: timedelta) -> str:
    return format_ts(utcnow() + delta)


def test_held_out_a_ledger_line_a_year_ahead_is_refused_by_ledger_append(registry, capsys, job_line):
    record = job_line("J-1", ts=later(timedelta(days=365)), completed_at=later(timedelta(days=365)))
    code = main(["ledger", "append", "--registry", str(registry.root), "--line", json.dumps(record)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "jobs.jsonl (new line):$.ts" in err and "in the future" in err and "5 min" in err
    assert registry.ledger_path.read_bytes() == b""


@pytest.mark.parametrize("field", ["ts", "started_at", "completed_at"])
def test_each_time_of_a_ledger_line_is_held_to_the_writers_clock(registry, job_line, field):
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    ledger = Ledger(registry.ledger_path, clock=lambda: now)
    base = job_line("J-1", started_at="2026-11-30T11:50:00Z", completed_at="2026-11-30T11:53:12Z",
                    ts="2026-11-30T11:53:12Z")
    ahead = format_ts(now + FUTURE_SKEW + timedelta(seconds=1))
    with pytest.raises(UserError, match=f"{field} .* in the future") as info:
        ledger.append({**base, field: ahead})
    assert info.value.place == f"$.{field}"
    ledger.append({**base, field: format_ts(now + FUTURE_SKEW)})  # within the skew: written


def test_a_journal_entry_ahead_of_the_clock_is_refused(tmp_path):
    path = tmp_path / "transitions.jsonl"
    entry = JournalEntry("dep_a", "ready", "running", ts=later(timedelta(hours=2)))
    with pytest.raises(UserError, match=r"ts .* in the future") as info:
        append_entry(path, entry)
    assert "transitions.jsonl" in info.value.line() and not path.exists()
    append_entry(path, JournalEntry("dep_a", "ready", "running"))
    assert path.read_bytes().count(b"\n") == 1


def test_future_field_leaves_what_is_no_timestamp_to_the_schema():
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert future_field({"ts": "soon", "started_at": None}, ("ts", "started_at"), now) is None
    assert future_field({"ts": "2026-11-30T00:05:00Z"}, ("ts",), now) is None
    assert future_field({"ts": "2026-11-30T00:05:01Z"}, ("ts",), now) is not None
