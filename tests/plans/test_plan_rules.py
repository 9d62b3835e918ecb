"""Plan model and rules as unit specifications (fake inventory; the pytester tests run them end to end)."""

from __future__ import annotations

import json

import pytest
from reconcile_fakes import deployment, instance

from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import default_policy
from gpuharness.plans.plan import LaunchRequest, PlanContext, fingerprint, load_plan, make_plan, verify
from gpuharness.providers.inventory import Inventory

NOW = "2026-11-30T20:00:00.000Z"


def _inventory(*items) -> Inventory:
    return Inventory({"runpod": tuple(items)}, NOW)


def _launch(cost: float = 0.69, dep: str = "plan-a", **extra) -> LaunchRequest:
    return LaunchRequest(provider="runpod", gpu="NVIDIA GeForce RTX 4090", image="img", expected_cost_hr=cost,
                         idle_minutes=20, deployment_id=dep, **extra)


def _context(plan, found, deps, **policy) -> PlanContext:
    steps = plan["steps"]
    return PlanContext(plan, found, deps, Policy({**default_policy(), **policy}), now=NOW,
                       replay={s["id"]: None for s in steps})


def _rehearsed(plan):
    for step in plan["steps"]:
        target = step["target"]
        step["calls"] = [{"method": "POST", "path": "/x", "query": [],
                          "body": {"k": target.get("idempotency_key") or target.get("instance_id"), "image": "img"}}]
    return plan


def test_fingerprint_ignores_boot_progress_but_not_a_new_instance():
    deps = [deployment("d1", "runpod", "a")]
    booting = fingerprint(deps, _inventory(instance("runpod", "a", status="pending")))
    assert fingerprint(deps, _inventory(instance("runpod", "a", status="running"))) == booting
    assert fingerprint(deps, _inventory(instance("runpod", "a"), instance("runpod", "b"))) != booting
    assert fingerprint(deps, _inventory(instance("runpod", "a", status="stopped"))) != booting


def test_fingerprint_changes_when_a_deployment_is_destroyed():
    found = _inventory(instance("runpod", "a"))
    assert fingerprint([deployment("d1", "runpod", "a")], found) != \
        fingerprint([deployment("d1", "runpod", "a", status="destroyed")], found)


def test_a_made_plan_verifies_clean():
    deps = [deployment("d1", "runpod", "a")]
    found = _inventory(instance("runpod", "a"))
    plan = _rehearsed(make_plan(deps, found, launches=[_launch()], terminate=["d1"]))
    assert [s["action"] for s in plan["steps"]] == ["launch", "retrieve", "terminate"]
    assert plan["steps"][2]["confirm"] == "a"
    assert verify(_context(plan, found, deps)) == []


def test_budget_counts_the_burn_of_earlier_launches():
    found = _inventory()
    plan = _rehearsed(make_plan([], found, launches=[_launch(6.0, "plan-a"), _launch(6.0, "plan-b")]))
    problems = verify(_context(plan, found, []))
    assert problems == ["step s2 (launch gh-plan-b): rule budget: live burn would be $12.00/hr (now $6.00/hr + "
                        "$6.00/hr) > max_cost_hr $10.00/hr"]


def test_a_deadline_already_passed_fails_the_stop_condition():
    found = _inventory()
    plan = _rehearsed(make_plan([], found, launches=[_launch()]))
    plan["steps"][0]["stop_condition"] = {"deadline": "2026-11-30T19:00:00Z"}
    assert verify(_context(plan, found, [])) == [
        "step s1 (launch gh-plan-a): rule stop-condition: the deadline 2026-11-30T19:00:00Z has already passed"]


def test_a_terminate_of_an_unregistered_instance_cannot_be_preceded_by_a_sync():
    found = _inventory(instance("runpod", "stray"))
    plan = {"steps": [{"id": "s1", "action": "terminate", "provider": "runpod",
                       "target": {"instance_id": "stray"}, "confirm": "stray"}]}
    problems = verify(_context(_rehearsed(plan), found, []))
    assert problems == ["step s1 (terminate stray): rule sync-before-terminate: instance stray belongs to no "
                        "deployment of the registry, so no artifact sync can precede it; register it, or terminate "
                        "it as an orphan (`gpuharness reap --orphans --apply`)"]


def test_make_plan_refuses_to_tear_down_an_unknown_deployment():
    with pytest.raises(UserError, match="no deployment 'nope'"):
        make_plan([], _inventory(), terminate=["nope"])


def test_load_plan_names_a_duplicate_step_id_and_its_place(tmp_path):
    plan = make_plan([], _inventory(), launches=[_launch()])
    plan["steps"].append(dict(plan["steps"][0]))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(UserError) as caught:
        load_plan(path)
    assert caught.value.line() == f"{path}:$.steps[1].id: duplicate step id 's1'"


def test_budget_fails_a_launch_with_no_stop_condition_whose_rate_passes_a_spend_ceiling():
    """Nothing stops it, so its rate alone reaches the daily ceiling: $25/hr against $10 a day fails budget."""
    plan = _rehearsed(make_plan([], _inventory(), launches=[LaunchRequest(
        provider="runpod", gpu="NVIDIA GeForce RTX 4090", image="img", expected_cost_hr=25.0, deployment_id="p")]))
    context = _context(plan, _inventory(), [], daily_usd=10.0, monthly_usd=500.0, max_cost_hr=100.0)
    budget = [p for p in verify(context) if "rule budget" in p]
    assert budget == ["step s1 (launch gh-p): rule budget: no stop condition: at $25.00/hr it passes daily_usd "
                      "$10.00 after 0.40 h (spent $0.00) and no rule stops it"]
    free = _rehearsed(make_plan([], _inventory(), launches=[LaunchRequest(
        provider="runpod", gpu="NVIDIA GeForce RTX 4090", image="img", expected_cost_hr=0.0, deployment_id="q")]))
    assert not [p for p in verify(_context(free, _inventory(), [], daily_usd=10.0)) if "rule budget" in p]
