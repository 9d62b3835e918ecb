"""Specifications of Policy.evaluate: each ceiling denies with its name, its limit and the projected number."""

from __future__ import annotations

import pytest

from gpuharness.core.policy import STARTING, Action, Decision, Policy, Retry
from gpuharness.core.registry import default_policy


@pytest.fixture
def policy() -> Policy:
    return Policy(default_policy())


def test_an_action_within_every_ceiling_is_allowed_and_lists_what_was_checked(policy: Policy) -> None:
    decision = policy.evaluate(Action("launch", provider="vast", cost_hr=0.7))
    assert decision.allowed and decision.ceiling is None
    assert set(decision.checked) >= {"allowed_providers", "max_cost_hr", "max_concurrent_deployments",
                                     "daily_usd", "monthly_usd"}


@pytest.mark.parametrize(("action", "ceiling", "limit", "projected"), [
    (Action("job", job_cost_usd=5.5), "per_job_usd", 5.0, 5.5),
    (Action("job", job_cost_usd=1.0, spent_today_usd=49.5), "daily_usd", 50.0, 50.5),
    (Action("job", job_cost_usd=1.0, spent_today_usd=10, spent_month_usd=499.5), "monthly_usd", 500.0, 500.5),
    (Action("launch", cost_hr=3.0, live_burn_hr=8.0), "max_cost_hr", 10.0, 11.0),
    (Action("launch", cost_hr=0.5, live_deployments=4), "max_concurrent_deployments", 4.0, 5),
    (Action("launch", cost_hr=0.5, idle_minutes=45), "max_idle_minutes", 30.0, 45),
    (Action("launch", cost_hr=0.5, spent_today_usd=50.01), "daily_usd", 50.0, 50.01),
    (Action("keep_alive", spent_month_usd=501), "monthly_usd", 500.0, 501),
], ids=lambda v: v if isinstance(v, str) else None)
def test_each_ceiling_denies_with_its_numbers(policy: Policy, action: Action, ceiling: str, limit: float,
                                             projected: float) -> None:
    decision = policy.evaluate(action)
    assert not decision.allowed
    assert (decision.ceiling, decision.limit, decision.projected) == (ceiling, limit, pytest.approx(projected))
    assert ceiling in decision.reason
    assert ceiling in decision.checked


def test_provider_outside_the_allowed_list_is_denied(policy: Policy) -> None:
    decision = policy.evaluate(Action("launch", provider="lambda", cost_hr=1.0))
    assert (decision.allowed, decision.ceiling) == (False, "allowed_providers")
    assert "'lambda'" in decision.reason


def test_launch_without_a_shutdown_rule_is_denied_when_required(policy: Policy) -> None:
    decision = policy.evaluate(Action("launch", cost_hr=1.0, has_shutdown_rule=False))
    assert (decision.allowed, decision.ceiling) == (False, "require_shutdown_rule")
    relaxed = Policy({**default_policy(), "require_shutdown_rule": False})
    assert relaxed.evaluate(Action("launch", cost_hr=1.0, has_shutdown_rule=False)).allowed


def test_spending_exactly_the_ceiling_is_allowed(policy: Policy) -> None:
    assert policy.evaluate(Action("job", job_cost_usd=5.0)).allowed
    assert policy.evaluate(Action("launch", cost_hr=2.0, live_burn_hr=8.0)).allowed
    assert policy.evaluate(Action("launch", cost_hr=0.5, live_deployments=3)).allowed


def test_missing_ceilings_do_not_constrain() -> None:
    decision = Policy({"schema_version": 1}).evaluate(Action("job", provider="x", job_cost_usd=1e6))
    assert decision.allowed and decision.checked == ()


def test_a_zero_ceiling_forbids_any_spend() -> None:
    decision = Policy({"schema_version": 1, "per_job_usd": 0}).evaluate(Action("job", job_cost_usd=0.01))
    assert (decision.allowed, decision.ceiling, decision.limit) == (False, "per_job_usd", 0.0)


def test_decision_to_json_carries_every_number() -> None:
    decision = Decision(False, "daily_usd", 50.0, 51.0, "over", ("daily_usd",))
    assert decision.to_json() == {"allowed": False, "ceiling": "daily_usd", "limit": 50.0, "projected": 51.0,
                                  "reason": "over", "checked": ["daily_usd"]}


def test_cost_tolerance_and_retry_limits_have_defaults() -> None:
    assert Policy({"schema_version": 1}).cost_tolerance == (0.01, 0.05)
    assert Policy({"cost_tolerance": {"abs_usd": 0.5, "rel": 0.1}}).cost_tolerance == (0.5, 0.1)
    assert Policy(default_policy()).max_attempts("max_api_attempts") == 3
    assert Policy({}).retry == Retry(max_job_attempts=2, max_api_attempts=3, max_launch_attempts=2)
    assert Policy({"retry": {"max_launch_attempts": 5}}).retry.max_launch_attempts == 5


def test_defaults_live_in_core_policy_only() -> None:
    # a new registry starts with STARTING's ceilings; a document without one sets none (no caller supplies its own)
    assert {k: default_policy()[k] for k in STARTING} == dict(STARTING)
    assert Policy({}).ceilings.per_job_usd is None
    assert Policy(default_policy()).ceilings.per_job_usd == 5.0
    assert Policy({}).health_timeouts.probe_s == 120.0 and Policy({}).disk_margin_gb == 10.0
