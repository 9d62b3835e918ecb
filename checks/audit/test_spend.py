"""Spend stays within the ceilings of policy.json: per job, per UTC day and month, live burn and concurrency."""

import pytest

SPEND_RULES = ["per-job", "daily", "monthly", "live-burn", "concurrent"]


@pytest.mark.parametrize("rule", SPEND_RULES)
def test_spend_within_policy_ceiling(audit, rule):
    assert audit.count(f"spend:{rule}") == 0, audit.explain(f"spend:{rule}")
