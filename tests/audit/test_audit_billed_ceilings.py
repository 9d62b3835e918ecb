"""The audit's spend ceilings read billed spend (a deployment's uptime at its rate), not the jobs' costs: a pod that
bills while idle passes daily_usd on paper when only job costs are summed."""

from __future__ import annotations

import shutil

import orjson
from test_audit_checks import DEMO, DEMO_NOW, audit, edit_policy, failed, says

from gpuharness.audit import checkpoint as cp
from gpuharness.audit import run_audit
from gpuharness.core.clock import parse_ts
from gpuharness.core.spend import group_book


def test_an_idle_pod_billed_over_daily_usd_with_tiny_job_costs_fails(pytester, reg):
    # 2026-11-10: four pods ($3.31/hr together, the H100 among them) billed all day; their jobs cost $0.50
    edit_policy(reg, daily_usd=70.0)
    result = audit(pytester, reg)
    assert failed(result) == ["test_spend_within_policy_ceiling[daily]"]
    says(result, ["*day 2026-11-10 (UTC): billed $79.44 (jobs $0.50, idle $78.94) > daily_usd $70.00 (over by $9.44)*",
                   "*day 2026-11-11 (UTC): billed $79.44 (jobs $0.30, idle $79.14) > daily_usd $70.00*"])


def test_billed_month_over_monthly_usd_fails_though_its_jobs_are_within(pytester, reg):
    edit_policy(reg, monthly_usd=200.0)
    result = audit(pytester, reg)
    assert failed(result) == ["test_spend_within_policy_ceiling[monthly]"]
    says(result, ["*month 2026-11 (UTC): billed $1,2*(jobs $36.*, idle $1,1*) > monthly_usd $200.00*"])


def test_a_checkpoint_without_the_row_aggregate_is_rebaselined_by_a_full_pass(reg):
    shutil.copytree(DEMO / "audit", reg / "audit")
    path = cp.checkpoint_path(reg)
    doc = orjson.loads(path.read_bytes())
    del doc["aggregates"]["row"]  # written before billed spend needed it
    path.write_bytes(orjson.dumps(doc))
    again = run_audit(reg, parse_ts(DEMO_NOW))
    assert again.passed and not again.incremental
    assert again.count("spend:daily") == 0 and cp.ROW in again.checkpoint_document()["aggregates"]


def test_the_audit_and_spend_read_the_same_billed_book(reg):
    run = run_audit(reg, parse_ts(DEMO_NOW), use_checkpoint=False)
    november = group_book(run.book, "month")["2026-11"]
    assert round(november.billed, 2) == 1235.60 and round(november.used, 2) == 36.16
