"""Specifications of the ledger (jobs.jsonl): append-only, last line is current, torn tails quarantined."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.jsonl import append_record
from gpuharness.core.ledger import TERMINAL, Ledger, line_digest, sequence_problem


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "jobs.jsonl")


def lines_of(ledger: Ledger) -> list[dict]:
    return [json.loads(line) for line in ledger.path.read_bytes().splitlines()]


def test_a_job_moves_through_several_lines_and_the_last_is_current(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1", "queued"), check_sequence=True)
    ledger.append(job_line("J-1", "running"), check_sequence=True)
    ledger.append(job_line("J-1", "completed"), check_sequence=True)
    assert [r["status"] for r in lines_of(ledger)] == ["queued", "running", "completed"]
    assert ledger.current("J-1")["status"] == "completed"
    assert ledger.current()["J-1"]["status"] == "completed"
    assert ledger.current("J-nope") is None


def test_current_can_keep_only_the_jobs_of_one_status(ledger: Ledger, job_line) -> None:
    for job_id, statuses in (("J-1", ["queued", "running"]), ("J-2", ["queued", "running", "completed"]),
                             ("J-3", ["queued"])):
        for status in statuses:
            ledger.append(job_line(job_id, status), check_sequence=True)
    assert list(ledger.current(status="running")) == ["J-1"]
    assert list(ledger.current(status="queued")) == ["J-3"]
    assert list(ledger.current()) == ["J-1", "J-2", "J-3"]
    assert ledger.current("J-2", status="running")["status"] == "completed"  # a job id is looked up whatever


def test_each_append_is_one_complete_line_and_never_rewrites(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    first = ledger.path.read_bytes()
    ledger.append(job_line("J-2"))
    after = ledger.path.read_bytes()
    assert after.startswith(first) and after.endswith(b"\n") and after.count(b"\n") == 2


def test_append_stamps_ts_when_absent(ledger: Ledger, job_line) -> None:
    record = job_line("J-1")
    del record["ts"]
    ledger.append(record)
    assert lines_of(ledger)[0]["ts"].endswith("Z")
    assert "ts" not in record  # the caller's dict is not mutated


def test_only_a_correction_may_follow_a_terminal_line(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1", "completed"), check_sequence=True)
    before = ledger.path.read_bytes()
    with pytest.raises(UserError, match="only a correction") as caught:
        ledger.append(job_line("J-1", "running"), check_sequence=True)
    assert "nothing was appended" in (caught.value.hint or "")
    assert ledger.path.read_bytes() == before
    digest = line_digest(before)  # a lower cost names the line it corrects (issue 18)
    ledger.append(job_line("J-1", "completed", cost_usd=0.02, correction=True, reason="billing rounded",
                           digest=digest), check_sequence=True)
    assert ledger.current("J-1")["cost_usd"] == 0.02


def test_a_correction_needs_a_reason(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1", "failed"), check_sequence=True)
    with pytest.raises(UserError, match="must carry a reason"):
        ledger.append(job_line("J-1", "failed", correction=True), check_sequence=True)


def test_a_correction_needs_an_earlier_line(ledger: Ledger, job_line) -> None:
    with pytest.raises(UserError, match="needs an earlier line"):
        ledger.append(job_line("J-1", correction=True, reason="x"), check_sequence=True)


def test_a_job_cannot_change_deployment_without_a_correction(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1", "running"), check_sequence=True)
    with pytest.raises(UserError, match="moved from deployment dep_a"):
        ledger.append(job_line("J-1", "completed", deployment_id="dep_b"), check_sequence=True)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_every_terminal_status_closes_the_job(terminal: str, job_line) -> None:
    assert sequence_problem(job_line("J-1", terminal), job_line("J-1", "running")) is not None
    assert sequence_problem(job_line("J-1", "running"), job_line("J-1", terminal)) is None


def test_schema_invalid_record_is_refused_and_nothing_is_appended(ledger: Ledger, job_line) -> None:
    with pytest.raises(UserError) as caught:
        ledger.append(job_line("J-1", status="done"))
    assert caught.value.place == "$.status"
    assert not ledger.path.exists() or ledger.path.read_bytes() == b""


def test_non_object_record_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UserError, match="must be a JSON object"):
        ledger.append(["J-1"])  # type: ignore[arg-type]


def test_torn_last_line_is_skipped_by_readers(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"id":"J-2","deployment_id":"dep_a","sta')
    assert [r["id"] for r in ledger.records()] == ["J-1"]
    assert [e.torn for e in ledger.scan()] == [False, True]


def test_torn_last_line_is_quarantined_and_reported_not_merged(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    torn = b'{"id":"J-2","deployment_id":"dep_a","sta'
    with open(ledger.path, "ab") as handle:
        handle.write(torn)
    warnings = ledger.append(job_line("J-3"))
    assert len(warnings) == 1 and "torn last line" in warnings[0] and "jobs.jsonl.torn" in warnings[0]
    assert [r["id"] for r in lines_of(ledger)] == ["J-1", "J-3"]
    quarantined = json.loads(ledger.path.with_name("jobs.jsonl.torn").read_text())
    assert quarantined["fragment"] == torn.decode()
    assert quarantined["offset"] == len(ledger.path.read_bytes().splitlines(keepends=True)[0])


def test_last_line_lacking_only_its_newline_is_kept_not_quarantined(ledger: Ledger, job_line) -> None:
    ledger.path.write_text(json.dumps(job_line("J-1")))  # hand-written, no final newline
    assert ledger.append(job_line("J-2")) == []
    assert [r["id"] for r in lines_of(ledger)] == ["J-1", "J-2"]
    assert not ledger.path.with_name("jobs.jsonl.torn").exists()


def test_broken_line_in_the_middle_is_an_error_naming_the_line(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"id":"J-2","deployment_id":"dep_a","sta\n')
    ledger.append(job_line("J-3"))
    with pytest.raises(UserError) as caught:
        list(ledger.records())
    assert caught.value.path == str(ledger.path) and caught.value.place == "2:41"  # line:column
    assert "middle" in (caught.value.hint or "")


def test_checked_records_names_the_line_and_field_of_a_schema_error(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    with open(ledger.path, "ab") as handle:
        handle.write(json.dumps(job_line("J-2", cost_usd="12 dollars")).encode() + b"\n")
    assert len(list(ledger.records())) == 2  # records() only parses
    with pytest.raises(UserError) as caught:
        list(ledger.checked_records())
    assert caught.value.place == "2:$.cost_usd"


def test_append_with_sequence_check_refuses_a_broken_ledger(ledger: Ledger, job_line) -> None:
    ledger.path.write_bytes(b'not json\n' + json.dumps(job_line("J-1")).encode() + b"\n")
    before = ledger.path.read_bytes()
    with pytest.raises(UserError):
        ledger.append(job_line("J-2"), check_sequence=True)
    assert ledger.path.read_bytes() == before


def test_scan_resumes_from_an_offset_with_line_numbers(ledger: Ledger, job_line) -> None:
    for n in range(5):
        ledger.append(job_line(f"J-{n}"))
    entries = list(ledger.scan())
    resumed = list(ledger.scan(entries[3].offset, entries[3].lineno))
    assert [(e.lineno, e.record["id"]) for e in resumed] == [(4, "J-3"), (5, "J-4")]


def test_scan_of_a_missing_ledger_is_empty(tmp_path: Path) -> None:
    assert list(Ledger(tmp_path / "absent.jsonl").scan()) == []


def test_records_stream_in_constant_memory(ledger: Ledger, job_line) -> None:
    line = json.dumps(job_line("J-0")).encode() + b"\n"
    ledger.path.write_bytes(line * 20_000)
    tracemalloc.start()
    try:
        count = sum(1 for _ in ledger.records())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < len(line) * 20_000 / 20  # far below the file's size: nothing accumulates


def test_append_record_precheck_refusal_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with pytest.raises(UserError, match="refused"):
        append_record(path, {"a": 1}, precheck=lambda: "refused")
    assert path.read_bytes() == b""


def test_torn_tail_names_the_torn_line_only(ledger: Ledger, job_line) -> None:
    assert ledger.torn_tail() is None  # no file yet
    ledger.append(job_line("J-1"))
    assert ledger.torn_tail() is None
    ledger.path.write_bytes(ledger.path.read_bytes() + json.dumps(job_line("J-2")).encode())
    assert ledger.torn_tail() is None  # complete, only lacking its newline: history, not torn
    ledger.path.write_bytes(ledger.path.read_bytes() + b'\n{"id": "J-3", "dep')
    torn = ledger.torn_tail()
    assert torn is not None and torn.lineno == 3 and torn.raw == b'{"id": "J-3", "dep'


def test_current_of_every_job_names_a_line_without_an_id(ledger: Ledger, job_line) -> None:
    ledger.append(job_line("J-1"))
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"deployment_id": "dep_a", "status": "queued"}\n')
    with pytest.raises(UserError) as caught:
        ledger.current()
    assert caught.value.place == "2:1"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_cost_is_refused_not_written_as_null(ledger: Ledger, job_line, value: float) -> None:
    with pytest.raises(UserError) as caught:
        ledger.append(job_line("J-1", cost_usd=value))
    assert caught.value.place == "$.cost_usd"
    assert not ledger.path.exists()
