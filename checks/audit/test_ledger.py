"""jobs.jsonl: every line matches the schema, no torn line but the last, append-only since the checkpoint,
and each job's lines are consistent."""

import pytest

from gpuharness.audit import rules
from gpuharness.pytest_plugin.audit import over_rules


@pytest.mark.audit_rule(rules.LEDGER_SCHEMA)
def test_ledger_lines_match_the_job_schema(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.LEDGER_TORN)
def test_no_torn_line_before_the_end(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.LEDGER_APPEND_ONLY)
def test_ledger_is_append_only_since_the_checkpoint(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@pytest.mark.audit_rule(rules.LEDGER_FUTURE)
def test_no_ledger_line_lies_in_the_future(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)


@over_rules(rules.JOB)
def test_job_lines_are_consistent(audit, audit_rule):
    assert audit.count(audit_rule) == 0, audit.explain(audit_rule)
