"""`gpuharness provision` through the command line against the simulator: disclosure, records, reuse, refusal."""

from __future__ import annotations

import json

import pytest

from gpuharness.demo.simulated_estate import SimulatedEstate

ARGS = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
        "--runtime", "comfyui", "--model", "minimax-h3-mini", "--workflow", "h3-text-to-image",
        "--idle-minutes", "15", "--json")


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab


def test_provision_cli_discloses_records_and_then_reuses(lab):
    first = lab.cli(*ARGS, "--registry", str(lab.registry.root))
    assert first.returncode == 0, first.stderr
    assert "hourly burn:     $0.400/hr" in first.stderr and "stop condition:  idle 15 min" in first.stderr
    payload = json.loads(first.stdout)
    assert "hourly burn:     $0.400/hr" in payload["disclosure"]
    dep = payload["deployment"]
    assert dep["status"] == "provisioning" and dep["ssh"]["host"] == "127.0.0.1"
    assert lab.registry.deployment(dep["id"]).instance_id == dep["instance_id"]
    second = lab.cli(*ARGS, "--registry", str(lab.registry.root))
    assert second.returncode == 0 and json.loads(second.stdout)["reused"] is True
    assert lab.sim.stats()["launches"] == 1


def test_provision_cli_refuses_over_the_burn_ceiling_before_any_provider_call(lab):
    with lab.registry.update("policy.json") as doc:
        doc["max_cost_hr"] = 0.1
    result = lab.cli(*ARGS, "--registry", str(lab.registry.root))
    assert result.returncode == 2
    assert "max_cost_hr" in result.stderr and "nothing was launched" in result.stderr
    assert sum(lab.sim.stats()["requests"].values()) == 0



@pytest.mark.parametrize("bad_id", ["my dep", "dep/../x", "dep\udc80"])
def test_a_bad_id_is_named_before_any_ceiling_or_provider_call(lab, bad_id):
    """The request's own id is checked first: a typo in --id is told as such, not as whatever ceiling this day's spend
    happens to reach (here every ceiling is already passed)."""
    with lab.registry.update("policy.json") as doc:
        doc["daily_usd"] = doc["monthly_usd"] = doc["max_cost_hr"] = 0.01
    result = lab.cli(*ARGS, "--id", bad_id, "--registry", str(lab.registry.root))
    assert result.returncode == 2, result.stderr
    error = result.stderr.splitlines()[-1]
    assert error.startswith("gpuharness: error: provision --id:") and "_usd" not in error, error
    assert "lone surrogate" in error if "\udc80" in bad_id else "letters, digits" in error, error
    assert sum(lab.sim.stats()["requests"].values()) == 0
    assert lab.registry.deployments() == []


NO_PRICE = tuple(a for a in ARGS if a not in ("--cost-hr", "0.40"))


def test_provision_without_cost_hr_accepts_the_cheapest_offer_and_discloses_it(lab):
    """The issue's own command line has no --cost-hr: the price is the provider's cheapest offer, disclosed."""
    result = lab.cli(*NO_PRICE, "--registry", str(lab.registry.root))
    assert result.returncode == 0, result.stderr
    assert "accepting the cheapest offer: $" in result.stderr
    dep = json.loads(result.stdout)["deployment"]
    assert dep["cost_hr"] > 0 and f"hourly burn:     ${dep['cost_hr']:.3f}/hr" in result.stderr
    assert lab.sim.stats()["launches"] == 1


def test_provision_without_cost_hr_refuses_a_disallowed_provider_before_reading_offers(lab):
    with lab.registry.update("policy.json") as doc:
        doc["allowed_providers"] = ["runpod"]
    result = lab.cli(*NO_PRICE, "--registry", str(lab.registry.root))
    assert result.returncode == 2 and "allowed_providers" in result.stderr
    assert sum(lab.sim.stats()["requests"].values()) == 0


def test_provision_without_its_request_or_resume_says_what_is_missing(tmp_path, capsys):
    from gpuharness.cli import main
    from gpuharness.core.registry import Registry

    registry = Registry(tmp_path / "reg")
    registry.init()
    assert main(["provision", "--registry", str(registry.root), "--gpu", "RTX 4090"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "provision needs --provider, --image" in err[0] and "--resume ID" in err[0]


def test_provision_resume_refuses_to_change_the_recorded_request(tmp_path, capsys):
    from gpuharness.cli import main
    from gpuharness.core.registry import Registry

    registry = Registry(tmp_path / "reg")
    registry.init()
    assert main(["provision", "--registry", str(registry.root), "--resume", "dep_x", "--gpu", "H100",
                 "--idle-minutes", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpu, --idle-minutes cannot change it" in err[0], err
