"""Every state file matches its schema, ids are unique, and cross references hold."""

import pytest

from gpuharness.audit.run import IDENTITY, SCHEMA_FILES


@pytest.mark.parametrize("state_file", SCHEMA_FILES)
def test_state_file_matches_its_schema(audit, state_file):
    rule = f"schema:{state_file}"
    assert audit.count(rule) == 0, audit.explain(rule)


@pytest.mark.parametrize("state_file", list(IDENTITY))
def test_ids_are_unique(audit, state_file):
    rule = f"unique:{state_file}"
    assert audit.count(rule) == 0, audit.explain(rule)


def test_every_deployment_provider_is_in_providers_json(audit):
    assert audit.count("ref:deployment-provider") == 0, audit.explain("ref:deployment-provider")


def test_every_job_deployment_is_in_deployments_json(audit):
    assert audit.count("ref:job-deployment") == 0, audit.explain("ref:job-deployment")


def test_every_journaled_deployment_is_in_deployments_json(audit):
    assert audit.count("ref:journal-deployment") == 0, audit.explain("ref:journal-deployment")
