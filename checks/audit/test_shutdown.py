"""Every live paid deployment has a shutdown rule, none sits idle beyond max_idle_minutes, and none outlives its
own deadline or max_hours."""

import pytest


def test_live_paid_deployment_has_a_shutdown_rule(audit, audit_deployment):
    rule = f"shutdown:rule:{audit_deployment}"
    if rule in audit.not_applicable:
        pytest.skip(audit.not_applicable[rule])
    assert audit.count(rule) == 0, audit.explain(rule)


def test_live_paid_deployment_is_not_idle(audit, audit_deployment):
    rule = f"shutdown:idle:{audit_deployment}"
    if rule in audit.not_applicable:
        pytest.skip(audit.not_applicable[rule])
    assert audit.count(rule) == 0, audit.explain(rule)


def test_live_paid_deployment_is_within_its_stop_condition(audit, audit_deployment):
    rule = f"shutdown:expired:{audit_deployment}"
    if rule in audit.not_applicable:
        pytest.skip(audit.not_applicable[rule])
    assert audit.count(rule) == 0, audit.explain(rule)
