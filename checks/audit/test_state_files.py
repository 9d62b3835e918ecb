"""Every state file matches its schema, ids are unique, and cross references hold."""

import pytest

from gpuharness.audit import rules
from gpuharness.pytest_plugin.audit import over_rules


@over_rules(rules.SCHEMA.values())
def test_state_file_matches_its_schema(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@over_rules(rules.UNIQUE.values())
def test_ids_are_unique(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.DEPLOYMENT_PROVIDER)
def test_every_deployment_provider_is_in_providers_json(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.JOB_DEPLOYMENT)
def test_every_job_deployment_is_in_deployments_json(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.JOURNAL_DEPLOYMENT)
def test_every_journaled_deployment_is_in_deployments_json(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)
