"""plan apply, live against the simulator: refuses a stale plan, discloses before each mutation, journals."""

from __future__ import annotations

from collections.abc import Iterator
from secrets import token_hex

import httpx
import pytest
from seeded_world import seed_world

from gpuharness.core import lifecycle
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.operations.context import Context
from gpuharness.plans.apply import apply_plan
from gpuharness.plans.plan import LaunchRequest, make_plan
from gpuharness.plans.replay import rehearse_with_mirror
from gpuharness.providers import cassette, inventory
from gpuharness.sim.server import Simulator


@pytest.fixture
def live(tmp_path, monkeypatch) -> Iterator[tuple[Simulator, Registry, dict, list[str]]]:
    monkeypatch.setenv(cassette.TEST_SECRET_ENV, "gh-test-" + token_hex(20))
    with Simulator(ready_delay_s=0.0) as sim:
        registry = Registry(tmp_path / "registry")
        seed_world(sim, registry)
        found = inventory.fetch_inventory({e["name"]: inventory.adapter_factory()(e) for e in registry.providers()})
        plan = make_plan(registry.deployments(), found, launches=[LaunchRequest(
            provider="runpod", gpu="NVIDIA GeForce RTX 4090", image="runpod/pytorch:2.4.0", expected_cost_hr=0.69,
            idle_minutes=20, deployment_id="plan-apply-1")], terminate=["dep-vast-1"])
        rehearse_with_mirror(plan, registry.providers(), found, tmp_path / "plan.yaml")
        yield sim, registry, plan, []


def _context(registry: Registry, said: list[str]) -> Context:
    def no_remote(deployment):
        raise AssertionError(f"no SSH expected for {deployment['id']}")

    return Context(registry=registry, providers=inventory.adapter_factory(), remotes=no_remote,
                   sleep=lambda _s: None, say=said.append)


def test_apply_discloses_each_mutation_then_journals_its_transitions(live, tmp_path):
    sim, registry, plan, said = live
    done = apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts")
    vast_id = plan["steps"][2]["confirm"]
    assert done == ["s1-launch-gh-plan-apply-1", "s2-retrieve-dep-vast-1", f"s3-terminate-{vast_id}"]
    disclosures = [line for line in said if line.startswith(("s1 ", "s3 "))]
    assert disclosures[0] == ("s1 LAUNCH runpod target=gh-plan-apply-1 image=runpod/pytorch:2.4.0 "
                              "quantity=1 x NVIDIA GeForce RTX 4090 region=any burn=$0.690/hr stop=idle 20 min")
    assert disclosures[1].startswith(f"s3 TERMINATE vast target={plan['steps'][2]['confirm']} image=(as running) "
                                     "quantity=1 x RTX 4090 region=sim-1 burn=$0.350/hr")
    assert sim.stats()["launches"] == 1
    states = {d.id: d.status for d in registry.deployments()}
    assert states["plan-apply-1"] == "provisioning" and states["dep-vast-1"] == "destroyed"
    journal = [(j["deployment"], j["from"], j["to"]) for j in lifecycle.read_journal(registry.journal_path)]
    assert ("plan-apply-1", None, "provisioning") in journal
    assert ("dep-vast-1", "ready", "destroying") in journal and ("dep-vast-1", "destroying", "destroyed") in journal


def test_apply_refuses_a_stale_plan_before_any_mutation(live, tmp_path):
    sim, registry, plan, said = live
    httpx.post(sim.base_url + "/_sim/instances", json={"provider": "runpod", "count": 1, "name_prefix": "gh-new-"})
    before = sim.stats()["requests"]
    with pytest.raises(UserError, match="stale plan: the registry or the provider inventory changed"):
        apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts")
    after = sim.stats()["requests"]
    assert {k: v for k, v in after.items() if not k.startswith("GET")} == \
        {k: v for k, v in before.items() if not k.startswith("GET")}
    assert sim.stats()["launches"] == 0


def test_apply_refuses_a_plan_that_breaks_a_rule_against_the_live_state(live, tmp_path):
    sim, registry, plan, said = live
    plan["steps"][0]["stop_condition"] = None
    with pytest.raises(UserError, match=r"does not verify against the live state: step s1 .*rule stop-condition"):
        apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts")
    assert sim.stats()["launches"] == 0


def test_apply_stops_when_the_person_declines_a_mutation(live, tmp_path):
    sim, registry, plan, said = live
    with pytest.raises(UserError, match="stopped before step s1"):
        apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts", ask=lambda _q: False)
    assert said and said[-1].startswith("s1 LAUNCH")
    assert sim.stats()["launches"] == 0


def test_apply_refuses_a_plan_edited_after_its_rehearsal(live, tmp_path):
    sim, registry, plan, said = live
    plan["cassette"] = "plan.yaml"
    plan["steps"][0]["spec"]["image"] = "evil/miner:latest"
    with pytest.raises(UserError, match=r"step s1 \(launch gh-plan-apply-1\): rule replay: the recorded calls do "
                                        r"not carry 'evil/miner:latest'"):
        apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts", plan_path=tmp_path / "p.json")
    assert sim.stats()["launches"] == 0


def test_apply_with_the_rehearsed_cassette_applies(live, tmp_path):
    sim, registry, plan, said = live
    plan["cassette"] = "plan.yaml"
    apply_plan(plan, _context(registry, said), artifacts=tmp_path / "artifacts", plan_path=tmp_path / "p.json")
    assert sim.stats()["launches"] == 1
