"""Corrections that lower a job's cost (issue 18, item 5): they carry a reason and the digest of the line they
correct, or they are refused when written (one line, exit 2, nothing appended)."""

from __future__ import annotations

import json

import pytest

from gpuharness.cli import main
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger, line_digest


def append(capsys, registry, record) -> tuple[int, str]:
    code = main(["ledger", "append", "--registry", str(registry.root), "--line", json.dumps(record)])
    return code, capsys.readouterr().err


def last_raw(registry) -> bytes:
    return registry.ledger_path.read_bytes().splitlines(keepends=True)[-1]


def test_held_out_a_correction_setting_a_cost_to_zero_is_refused(registry, capsys, job_line):
    Ledger(registry.ledger_path).append(job_line("J-1"))
    before = registry.ledger_path.read_bytes()
    code, err = append(capsys, registry, job_line("J-1", correction=True, reason="refund", cost_usd=0))
    assert code == 2 and err.count("\n") == 1, err
    assert "lowering cost_usd from $0.0373 to $0.0000" in err and '"digest"' in err and "jobs.jsonl" in err
    assert line_digest(before) in err  # names the digest it needs
    assert registry.ledger_path.read_bytes() == before


def test_a_lowered_cost_without_a_reason_is_refused_even_with_the_digest(registry, capsys, job_line):
    Ledger(registry.ledger_path).append(job_line("J-1"))
    digest = line_digest(last_raw(registry))
    record = job_line("J-1", correction=True, cost_usd=0.01, digest=digest)
    code, err = append(capsys, registry, record)
    assert code == 2 and "a correction must carry a reason" in err


def test_a_digest_of_another_line_is_refused(registry, job_line):
    ledger = Ledger(registry.ledger_path)
    ledger.append(job_line("J-1"))
    ledger.append(job_line("J-2"))
    wrong = line_digest(last_raw(registry))  # J-2's line, not J-1's
    with pytest.raises(UserError, match="not the one of the line it corrects"):
        ledger.append(job_line("J-1", correction=True, reason="refund", cost_usd=0.0, digest=wrong),
                      check_sequence=True)


def test_a_lowered_cost_with_its_reason_and_digest_is_written(registry, capsys, job_line):
    Ledger(registry.ledger_path).append(job_line("J-1"))
    digest = line_digest(last_raw(registry))
    code, err = append(capsys, registry, job_line("J-1", correction=True, reason="provider refund #812",
                                                  cost_usd=0.0, digest=digest))
    assert code == 0, err
    assert Ledger(registry.ledger_path).current("J-1")["cost_usd"] == 0.0


def test_corrections_that_keep_or_raise_the_cost_need_no_digest(registry, job_line):
    ledger = Ledger(registry.ledger_path)
    ledger.append(job_line("J-1"))
    ledger.append(job_line("J-1", correction=True, reason="artifacts synced"), check_sequence=True)
    ledger.append(job_line("J-1", correction=True, reason="rate fixed", cost_usd=0.05), check_sequence=True)
    assert ledger.current("J-1")["cost_usd"] == 0.05


def test_the_digest_must_look_like_one(registry, job_line):
    ledger = Ledger(registry.ledger_path)
    ledger.append(job_line("J-1"))
    with pytest.raises(UserError, match="digest"):
        ledger.append(job_line("J-1", correction=True, reason="x", cost_usd=0.0, digest="sha256:nothex"))
