"""History is never deleted: destroyed deployments stay with destroyed_at, no id vanishes, and outputs were
synced off every instance before it was destroyed."""

import pytest


def test_destroyed_deployment_keeps_destroyed_at(audit, audit_deployment):
    rule = f"history:destroyed-at:{audit_deployment}"
    assert audit.count(rule) == 0, audit.explain(rule)


def test_no_deployment_vanished_since_the_checkpoint(audit):
    assert audit.count("history:no-vanished") == 0, audit.explain("history:no-vanished")


def test_artifacts_synced_before_destroy(audit, audit_deployment):
    rule = f"history:artifacts-synced:{audit_deployment}"
    if rule in audit.not_applicable:
        pytest.skip(audit.not_applicable[rule])
    assert audit.count(rule) == 0, audit.explain(rule)
