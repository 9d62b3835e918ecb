"""Every live paid deployment has a shutdown rule, none sits idle beyond max_idle_minutes, and none outlives its
own deadline or max_hours."""

import pytest

from gpuharness.audit import rules


def assert_holds(audit, rule, deployment):
    if reason := audit.inapplicable(rule, deployment):
        pytest.skip(reason)
    assert audit.count(rule, deployment) == 0, audit.explain(rule, deployment)


@pytest.mark.audit_rule(rules.SHUTDOWN_RULE)
def test_live_paid_deployment_has_a_shutdown_rule(audit, audit_rule, audit_deployment):
    assert_holds(audit, audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.SHUTDOWN_IDLE)
def test_live_paid_deployment_is_not_idle(audit, audit_rule, audit_deployment):
    assert_holds(audit, audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.SHUTDOWN_EXPIRED)
def test_live_paid_deployment_is_within_its_stop_condition(audit, audit_rule, audit_deployment):
    assert_holds(audit, audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.SHUTDOWN_STEWARD)
def test_live_paid_deployment_names_its_cleanup_owner_and_reason(audit, audit_rule, audit_deployment):
    assert_holds(audit, audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.SHUTDOWN_GUARD)
def test_live_paid_deployment_had_its_guard_running(audit, audit_rule, audit_deployment):
    assert_holds(audit, audit_rule, audit_deployment)
