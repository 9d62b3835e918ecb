"""A missing policy.json: money-spending commands refuse and name `gpuharness init`; read-only views show the
built-in defaults, labelled as such (the seeds: read the policy before every money-spending action)."""

from __future__ import annotations

import json

import pytest

from gpuharness.demo.simulated_estate import SimulatedEstate

PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15")


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        lab.registry.path("policy.json").unlink()
        yield lab


def test_provision_refuses_without_policy_json_before_any_provider_call(lab):
    result = lab.cli(*PROVISION, "--registry", str(lab.registry.root))
    assert result.returncode == 2, result.stderr
    assert "no policy.json" in result.stderr and "gpuharness init" in result.stderr
    assert "Traceback" not in result.stderr
    assert sum(lab.sim.stats()["requests"].values()) == 0
    assert lab.registry.deployments() == []
    assert not lab.registry.path("policy.json").exists()  # refusing writes nothing, not even the defaults


def test_provision_without_a_price_refuses_without_policy_json_before_reading_offers(lab):
    no_price = tuple(a for a in PROVISION if a not in ("--cost-hr", "0.40"))
    result = lab.cli(*no_price, "--registry", str(lab.registry.root))
    assert result.returncode == 2 and "gpuharness init" in result.stderr
    assert sum(lab.sim.stats()["requests"].values()) == 0


def test_run_refuses_without_policy_json_and_appends_nothing(lab, deployment_item):
    with lab.registry.update("deployments.json") as document:
        document["deployments"].append(deployment_item("dep_ready", "ready", workflow="h3-text-to-image"))
    result = lab.cli("run", "dep_ready", "--inputs", '{"text": "a cat"}', "--registry", str(lab.registry.root))
    assert result.returncode == 2, result.stderr
    assert "no policy.json" in result.stderr and "gpuharness init" in result.stderr
    assert lab.registry.ledger_path.read_bytes() == b""
    assert lab.registry.deployment("dep_ready").status == "ready"


def test_spend_shows_the_builtin_ceilings_labelled_as_defaults(lab):
    result = lab.cli("spend", "--registry", str(lab.registry.root))
    assert result.returncode == 0, result.stderr
    assert "ceilings: built-in defaults (no policy.json" in result.stdout
    payload = json.loads(lab.cli("spend", "--json", "--registry", str(lab.registry.root)).stdout)
    assert payload["ceilings_from"].startswith("built-in defaults")
    with_policy = lab.registry.init()
    assert lab.registry.path("policy.json") in with_policy
    payload = json.loads(lab.cli("spend", "--json", "--registry", str(lab.registry.root)).stdout)
    assert payload["ceilings_from"] == str(lab.registry.path("policy.json"))


def test_plan_apply_of_a_launch_refuses_without_policy_json_before_any_provider_call(lab, tmp_path):
    from gpuharness.core.errors import UserError
    from gpuharness.plans.apply import apply_plan
    from gpuharness.plans.plan import LaunchRequest, make_plan
    from gpuharness.providers.inventory import Inventory

    plan = make_plan([], Inventory({}, "2026-11-30T20:00:00.000Z"), launches=[LaunchRequest(
        provider="vast", gpu="RTX 4090", image="comfyui:1", expected_cost_hr=0.4, idle_minutes=15)])
    with pytest.raises(UserError, match=r"no policy\.json") as info:
        apply_plan(plan, lab.ctx, artifacts=tmp_path / "artifacts")
    assert "gpuharness init" in info.value.line()
    assert sum(lab.sim.stats()["requests"].values()) == 0 and lab.registry.deployments() == []
