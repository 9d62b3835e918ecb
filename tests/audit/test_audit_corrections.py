"""The audit and corrections that lower a job's cost (issue 18, item 5): a lowered cost without its reason and the
digest of the line it corrects fails `job:lowered-cost-justified`; the report lists every lowered cost with its
reason."""

from __future__ import annotations

import json

from test_audit_checks import DEMO_NOW, audit, completed_on, correction, failed, ledger, says

from gpuharness.audit.run import run_audit
from gpuharness.audit.summary import summarize, to_html
from gpuharness.core.clock import parse_ts
from gpuharness.core.ledger import line_digest

CHECK = "test_job_lines_are_consistent[lowered-cost-justified]"


def raw_line_of(reg, job_id: str) -> bytes:
    return [raw for raw in (reg / "jobs.jsonl").read_bytes().splitlines(keepends=True)
            if json.loads(raw)["id"] == job_id][-1]


def append_raw(reg, record) -> int:
    with open(reg / "jobs.jsonl", "ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")
    return len(ledger(reg))


def test_held_out_a_correction_setting_a_cost_to_zero_fails_the_audit(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    lineno = append_raw(reg, correction(job, cost_usd=0, duration_s=None))  # written by hand, past the append's check
    result = audit(pytester, reg)
    assert failed(result) == [CHECK], result.outlines[-12:]
    says(result, [f"*jobs.jsonl:{lineno}: job {job['id']}: a correction lowers cost_usd from ${job['cost_usd']:.4f} "
                  "to $0.0000 without the digest of the line it corrects*"])


def test_a_lowered_cost_with_its_reason_and_digest_passes_and_is_listed(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    digest = line_digest(raw_line_of(reg, job["id"]))
    lineno = append_raw(reg, correction(job, cost_usd=0, duration_s=None, reason="provider refund #812",
                                        digest=digest))
    result = audit(pytester, reg)
    assert failed(result) == [], result.outlines[-12:]
    summary = summarize(run_audit(reg, parse_ts(DEMO_NOW), use_checkpoint=False))
    assert summary["lowered_costs"] == [{"line": lineno, "job": job["id"], "from_usd": job["cost_usd"], "to_usd": 0.0,
                                         "reason": "provider refund #812", "digest": digest}]
    assert "provider refund #812" in to_html(summary, None)


def test_a_digest_of_another_line_fails_the_audit(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    other = line_digest((reg / "jobs.jsonl").read_bytes().splitlines(keepends=True)[0])
    lineno = append_raw(reg, correction(job, cost_usd=0.001, duration_s=None, digest=other))
    result = audit(pytester, reg)
    assert failed(result) == [CHECK], result.outlines[-12:]
    says(result, [f"*jobs.jsonl:{lineno}: job {job['id']}: a correction lowers cost_usd to $0.0010 with digest "
                  f"{other}, not the one of the line it corrects*"])


def test_lowered_costs_are_listed_again_by_an_incremental_audit(reg):
    job = completed_on(reg, "dep_vast_5090_03")
    digest = line_digest(raw_line_of(reg, job["id"]))
    append_raw(reg, correction(job, cost_usd=0, duration_s=None, reason="refund", digest=digest))
    first = run_audit(reg, parse_ts(DEMO_NOW))
    assert first.passed, first.problem_counts()
    assert "checkpoint written" in first.attest()
    again = run_audit(reg, parse_ts(DEMO_NOW))
    assert again.incremental
    assert [item["reason"] for item in summarize(again)["lowered_costs"]] == ["refund"]


def test_a_split_audit_finds_and_lists_the_lowered_costs_a_single_pass_does(tmp_path, monkeypatch):
    import shutil

    from test_audit_checks import DEMO

    from gpuharness.audit import ledger_split

    reg = tmp_path / "reg"
    shutil.copytree(DEMO, reg, ignore=shutil.ignore_patterns("audit", "*.lock"))
    raws = (reg / "jobs.jsonl").read_bytes().splitlines(keepends=True)
    early = [json.loads(raw) for raw in raws[:len(raws) // 3] if json.loads(raw)["status"] == "completed"]
    first, second = early[0], early[1]  # their lines lie before the cut, the corrections after it
    append_raw(reg, correction(first, cost_usd=0, duration_s=None, reason="refund",
                               digest=line_digest(raw_line_of(reg, first["id"]))))
    append_raw(reg, correction(second, cost_usd=0, duration_s=None))
    single = run_audit(reg, parse_ts(DEMO_NOW), use_checkpoint=False)
    monkeypatch.setattr(ledger_split, "SPLIT_MIN_BYTES", 1)
    split = run_audit(reg, parse_ts(DEMO_NOW), use_checkpoint=False)
    assert len(split.state.job_files) == 2
    assert split.state.lowered == single.state.lowered and len(single.state.lowered) == 2
    assert dict(split.counts) == dict(single.counts)
    assert [f.message for f in split.problems("job:lowered-cost-justified")] == [
        f.message for f in single.problems("job:lowered-cost-justified")] != []
