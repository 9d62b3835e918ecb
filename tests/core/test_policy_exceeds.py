"""One comparison for every ceiling, and the ceilings typed in one place."""

from __future__ import annotations

from gpuharness.core.policy import Ceilings, Policy, exceeds


def test_exceeds_treats_equal_as_within_and_none_as_no_ceiling() -> None:
    assert not exceeds(1.0, 1.0)
    assert not exceeds(0.1 + 0.2, 0.3)
    assert exceeds(1.01, 1.0)
    assert not exceeds(1e12, None)


def test_ceilings_are_read_typed_from_the_document() -> None:
    policy = Policy({"per_job_usd": "2", "daily_usd": 10})
    assert policy.ceilings == Ceilings(per_job_usd=2.0, daily_usd=10.0)
    assert policy.ceilings.max_cost_hr is None


def test_the_schema_bounds_every_retry_count() -> None:
    # issue 18 held-out: a huge max_launch_attempts let provision run on against a provider answering 429
    from gpuharness.core import schema

    for name in ("max_job_attempts", "max_api_attempts", "max_launch_attempts"):
        errors, _ = schema.check("policy", {"schema_version": 1, "retry": {name: 10**9}})
        assert errors and name in errors[0].json_path, name
        errors, _ = schema.check("policy", {"schema_version": 1, "retry": {name: 3}})
        assert not errors
