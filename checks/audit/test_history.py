"""History is never deleted: destroyed deployments stay with destroyed_at, no id vanishes, and outputs were
synced off every instance before it was destroyed."""

import pytest

from gpuharness.audit import rules


@pytest.mark.audit_rule(rules.HISTORY_DESTROYED_AT)
def test_destroyed_deployment_keeps_destroyed_at(audit, audit_rule, audit_deployment):
    assert audit.count(audit_rule, audit_deployment) == 0, audit.explain(audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.HISTORY_NO_VANISHED)
def test_no_deployment_vanished_since_the_checkpoint(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.HISTORY_ARTIFACTS_SYNCED)
def test_artifacts_synced_before_destroy(audit, audit_rule, audit_deployment):
    if reason := audit.inapplicable(audit_rule, audit_deployment):
        pytest.skip(reason)
    assert audit.count(audit_rule, audit_deployment) == 0, audit.explain(audit_rule, audit_deployment)
