"""The audit rules table (gpuharness.audit.rules) is the one place an audit rule is declared: every rule has a check
in checks/audit, every check asserts a rule of the table, and the engine reports by the table's rules only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from checkout import ROOT

from gpuharness.audit import rules, run_audit
from gpuharness.core.clock import parse_ts
from gpuharness.core.rules import Rule
from gpuharness.pytest_plugin.audit import RULE_MARK

CHECKS = ROOT / "checks" / "audit"
DEMO = ROOT / "fixtures" / "demo" / ".pi" / "gpu"


def rule_of(item: pytest.Item) -> Rule | None:
    """The rule a collected check asserts: its audit_rule parameter, or its audit_rule marker."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "audit_rule" in callspec.params:
        rule: Rule = callspec.params["audit_rule"]
        return rule
    marker = item.get_closest_marker(RULE_MARK)
    return marker.args[0] if marker is not None and marker.args else None


@pytest.fixture
def checks(pytester: pytest.Pytester) -> list[pytest.Item]:
    registry = pytester.path / "reg"
    shutil.copytree(DEMO, registry, ignore=shutil.ignore_patterns("audit", "*.lock"))
    return pytester.inline_genitems(str(CHECKS), "--registry", str(registry), "-p", "no:cacheprovider")[0]


def test_every_check_asserts_a_rule_of_the_table(checks: list[pytest.Item]) -> None:
    assert checks
    unnamed = [item.nodeid for item in checks if rule_of(item) is None]
    assert unnamed == []
    foreign = [item.nodeid for item in checks if rule_of(item) not in list(rules.AUDIT_RULES)]
    assert foreign == []


def test_every_rule_of_the_table_has_a_check(checks: list[pytest.Item]) -> None:
    covered = {rule_of(item) for item in checks}
    assert [rule.id for rule in rules.AUDIT_RULES if rule not in covered] == []


def test_per_deployment_rules_are_checked_once_per_deployment(checks: list[pytest.Item]) -> None:
    deployments = {item.callspec.params["audit_deployment"] for item in checks
                   if "audit_deployment" in getattr(getattr(item, "callspec", None), "params", {})}
    assert len(deployments) == 10
    for rule in rules.PER_DEPLOYMENT:
        ids = [item.callspec.params.get("audit_deployment") for item in checks if rule_of(item) == rule]
        assert sorted(ids) == sorted(deployments), rule.id


def test_check_ids_come_from_the_table(checks: list[pytest.Item]) -> None:
    names = {item.name for item in checks}
    for rule in (*rules.JOB, *rules.SPEND, *rules.SECRETS):
        assert any(name.endswith(f"[{rules.short_name(rule)}]") for name in names), rule.id
    assert "test_state_file_matches_its_schema[deployments.json]" in names


def test_the_engine_reports_by_the_tables_rules_only(tmp_path: Path) -> None:
    registry = tmp_path / "reg"
    shutil.copytree(DEMO, registry, ignore=shutil.ignore_patterns("audit", "*.lock"))
    (registry / "policy.json").write_text('{"daily_usd": 1, "monthly_usd": 1, "per_job_usd": 0.001}')
    with open(registry / "jobs.jsonl", "ab") as ledger:
        ledger.write(b'{"id": "J-x", "torn')
    run = run_audit(registry, parse_ts("2026-11-30T18:10:00Z"), use_checkpoint=False)
    reported = {rule for rule, _ in run.counts}
    assert len(reported) >= 4
    assert reported <= set(rules.AUDIT_RULES)
    with pytest.raises(KeyError, match="no audit rule 'spend:dayly'"):
        run.count("spend:dayly")
