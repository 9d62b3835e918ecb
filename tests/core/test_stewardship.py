"""Every paid resource has a cleanup owner and a reason: provision names the local user unless told otherwise and
states what it runs; a live paid deployment cannot be written with a null owner nor lose its owner; the audit's
rule lists those that lack either."""

from __future__ import annotations

import getpass
import json

import pytest

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import transition
from gpuharness.core.stewardship import missing_steward
from gpuharness.demo.simulated_estate import SimulatedEstate

PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15", "--workflow", "h3-text-to-image", "--json")


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab


def test_provision_names_the_local_user_as_cleanup_owner_and_states_a_reason(lab):
    result = lab.cli(*PROVISION, "--registry", str(lab.registry.root))
    assert result.returncode == 0, result.stderr
    deployment = json.loads(result.stdout)["deployment"]
    assert deployment["owner"] == getpass.getuser()
    assert deployment["reason"] == "run h3-text-to-image on 1 x RTX 4090"
    assert f"cleanup owner:   {getpass.getuser()}" in result.stderr and "reason:          run h3" in result.stderr
    assert [missing_steward(d) for d in lab.registry.deployments()] == [()]


def test_provision_keeps_the_owner_and_reason_it_is_given(lab):
    result = lab.cli(*PROVISION, "--owner", "ana", "--reason", "nightly renders", "--registry",
                     str(lab.registry.root))
    deployment = json.loads(result.stdout)["deployment"]
    assert (deployment["owner"], deployment["reason"]) == ("ana", "nightly renders")


def test_provision_refuses_an_empty_owner_before_any_provider_call(lab):
    result = lab.cli(*PROVISION, "--owner", " ", "--registry", str(lab.registry.root))
    assert result.returncode == 2 and "cleanup owner" in result.stderr
    assert sum(lab.sim.stats()["requests"].values()) == 0 and lab.registry.deployments() == []


def test_a_live_paid_deployment_cannot_lose_its_owner(registry, deployment_item):
    with registry.update("deployments.json") as document:
        document["deployments"].append(deployment_item("dep_owned", owner="ana", reason="renders"))
    before = registry.path("deployments.json").read_bytes()
    for empty in (None, ""):
        with pytest.raises(UserError, match=r"owner .* refused for live paid deployment dep_owned"):
            registry.update_deployment("dep_owned", owner=empty)
    assert registry.path("deployments.json").read_bytes() == before


def test_a_live_paid_deployment_is_not_added_with_a_null_owner(registry, deployment_item):
    with pytest.raises(UserError, match="refused for live paid deployment dep_null"):
        with registry.update("deployments.json") as document:
            document["deployments"].append(deployment_item("dep_null", owner=None))
    assert [d.id for d in registry.deployments()] == ["dep_a"]


def test_an_old_record_without_an_owner_can_still_be_cleaned_up(registry):
    """A record written before owners were required is reported by the audit, never locked in place."""
    transition(registry, "dep_a", "destroying")
    assert transition(registry, "dep_a", "destroyed").status == "destroyed"


def test_the_audit_rule_lists_live_paid_deployments_without_owner_or_reason(deployment_item):
    records = [deployment_item("dep_ok", owner="ana", reason="renders"),
               deployment_item("dep_no_owner", reason="renders"),
               deployment_item("dep_nothing"),
               deployment_item("dep_free", cost_hr=0.0),
               deployment_item("dep_gone", "destroyed", destroyed_at="2026-11-02T12:00:00Z")]
    found = {r["id"]: missing_steward(Deployment.from_json(r)) for r in records}
    assert {dep: missing for dep, missing in found.items() if missing} == {"dep_no_owner": ("owner",),
                                                                           "dep_nothing": ("owner", "reason")}
