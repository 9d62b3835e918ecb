"""Every transition is journaled: the journal chains, follows the lifecycle table and ends at the status."""

import pytest


def test_status_matches_its_journal(audit, audit_deployment):
    rule = f"journal:consistent:{audit_deployment}"
    if rule in audit.not_applicable:
        pytest.skip(audit.not_applicable[rule])
    assert audit.count(rule) == 0, audit.explain(rule)
