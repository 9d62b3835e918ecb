"""jobs.jsonl: every line matches the schema, no torn line but the last, append-only since the checkpoint,
and each job's lines are consistent."""

import pytest


def test_ledger_lines_match_the_job_schema(audit):
    assert audit.count("ledger:schema") == 0, audit.explain("ledger:schema")


def test_no_torn_line_before_the_end(audit):
    assert audit.count("ledger:torn") == 0, audit.explain("ledger:torn")


def test_ledger_is_append_only_since_the_checkpoint(audit):
    assert audit.count("ledger:append-only") == 0, audit.explain("ledger:append-only")


JOB_RULES = [
    "completed-after-started",
    "duration-agrees",
    "cost-matches-rate",
    "failed-has-error",
    "only-corrections-after-terminal",
]


@pytest.mark.parametrize("rule", JOB_RULES)
def test_job_lines_are_consistent(audit, rule):
    assert audit.count(f"job:{rule}") == 0, audit.explain(f"job:{rule}")
