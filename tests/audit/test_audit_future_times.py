"""The audit flags times in the future (issue 18, item 5): a ledger line or a journal entry stamped beyond now plus
the clock skew allowed fails its check, naming the line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from test_audit_checks import audit, completed_on, correction, failed, ledger, says

from gpuharness.core.clock import format_ts


def year_ahead() -> str:
    return format_ts(datetime.now(UTC) + timedelta(days=365))


def test_held_out_a_ledger_line_a_year_ahead_fails_the_audit(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    ahead = year_ahead()
    with open(reg / "jobs.jsonl", "ab") as handle:  # written by hand, past the append's check
        handle.write(json.dumps(correction(job, ts=ahead)).encode() + b"\n")
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_ledger_line_lies_in_the_future"], result.outlines[-12:]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: job {job['id']}: ts {ahead} lies after *(now plus the clock skew "
                  "allowed)*"])


def test_a_completed_at_a_year_ahead_fails_the_audit(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    ahead = year_ahead()
    with open(reg / "jobs.jsonl", "ab") as handle:
        handle.write(json.dumps(correction(job, completed_at=ahead, duration_s=None)).encode() + b"\n")
    result = audit(pytester, reg)
    assert "test_no_ledger_line_lies_in_the_future" in failed(result), result.outlines[-12:]
    says(result, [f"*job {job['id']}: completed_at {ahead} lies after *"])


def test_a_journal_entry_a_year_ahead_fails_the_audit(pytester, reg):
    lines = (reg / "transitions.jsonl").read_bytes().splitlines()
    entry = json.loads(lines[-1])
    ahead = year_ahead()
    with open(reg / "transitions.jsonl", "ab") as handle:
        handle.write(json.dumps({**entry, "ts": ahead, "from": entry["to"], "note": "observed"}).encode() + b"\n")
    result = audit(pytester, reg)
    assert "test_no_journal_entry_lies_in_the_future" in failed(result), result.outlines[-12:]
    says(result, [f"*transitions.jsonl:{len(lines) + 1}: {entry['deployment']}: ts {ahead} lies after *"])
