"""Spend stays within the ceilings of policy.json: per job, per UTC day and month, live burn and concurrency."""

from gpuharness.audit import rules
from gpuharness.pytest_plugin.audit import over_rules


@over_rules(rules.SPEND)
def test_spend_within_policy_ceiling(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)
