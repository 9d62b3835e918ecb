"""Every transition is journaled: the journal chains, follows the lifecycle table and ends at the status."""

import pytest

from gpuharness.audit import rules


@pytest.mark.audit_rule(rules.JOURNAL_CONSISTENT)
def test_status_matches_its_journal(audit, audit_rule, audit_deployment):
    if reason := audit.inapplicable(audit_rule, audit_deployment):
        pytest.skip(reason)
    assert audit.count(audit_rule, audit_deployment) == 0, audit.explain(audit_rule, audit_deployment)


@pytest.mark.audit_rule(rules.JOURNAL_FUTURE)
def test_no_journal_entry_lies_in_the_future(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)
