"""A deployment is ready only after its test generation succeeded, with the health evidence recorded."""

import pytest

from gpuharness.audit import rules


@pytest.mark.audit_rule(rules.READY_EVIDENCE)
def test_ready_only_after_a_passed_test_generation(audit, audit_rule, audit_deployment):
    assert audit.count(audit_rule, audit_deployment) == 0, audit.explain(audit_rule, audit_deployment)
