"""Prices held (issue 18 item 3): a launch never accepts a price above what was disclosed and allowed."""

from __future__ import annotations

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import read_journal
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", sleep=lambda s: None, say=lambda line: None) as lab:
        yield lab


def test_held_out_cost_hr_below_every_offer_is_refused_before_the_launch(lab):
    # held-out: --cost-hr 0.10 with max_cost_hr 0.20 rented the $0.35/hr offer and kept it running
    from gpuharness.operations.provision import ProvisionRequest, provision
    with lab.registry.update("policy.json") as doc:
        doc["max_cost_hr"] = 0.20
    with pytest.raises(UserError, match=r"above the allowed \$0.100/hr") as info:
        provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.10,
                                            runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=15),
                  up_deadline_s=30, poll_s=0.1)
    assert "nothing was created" in info.value.line()
    assert lab.sim.stats()["launches"] == 0
    assert [i for i in lab.sim.state.instances.values() if i.status != "terminated"] == []
    assert all(d.status == "destroyed" for d in lab.registry.deployments())


def test_a_price_within_the_limit_rents_the_offer(lab):
    from gpuharness.operations.provision import ProvisionRequest, provision
    result = provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.40,
                                                 runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=15),
                       up_deadline_s=30, poll_s=0.1)
    assert lab.sim.stats()["launches"] == 1
    assert result.deployment.cost_hr <= 0.40


def test_the_vast_launch_sends_the_limit_and_skips_asks_above_it():
    from gpuharness.providers.base import Offer, ProviderError
    from gpuharness.providers.vast import held_ask
    offers = [Offer(provider="vast", gpu="RTX 4090", cost_hr=0.35, offer_id="1"),
              Offer(provider="vast", gpu="RTX 4090", cost_hr=0.42, offer_id="2")]
    assert held_ask("vast", offers, 0.40) == ("1", 0.35)
    assert held_ask("vast", offers, None) == ("1", 0.35)
    with pytest.raises(ProviderError, match="nothing was created"):
        held_ask("vast", offers, 0.30)


def test_journal_names_the_refused_launch(lab):
    from gpuharness.operations.provision import ProvisionRequest, provision
    with pytest.raises(UserError):
        provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.10,
                                            runtime="comfyui", idle_minutes=15), up_deadline_s=30, poll_s=0.1)
    notes = " ".join(str(e.get("note")) for e in read_journal(lab.registry.journal_path))
    assert "nothing was created" in notes


def test_a_runpod_pod_priced_above_the_limit_is_refused_before_the_launch(lab):
    from gpuharness.operations.provision import ProvisionRequest, provision
    with pytest.raises(UserError, match=r"\$0.940/hr, above the allowed \$0.890/hr"):
        provision(lab.ctx, ProvisionRequest(provider="runpod", gpu="NVIDIA GeForce RTX 5090", image="comfyui:1",
                                            cost_hr=0.89, runtime="comfyui", idle_minutes=15),
                  up_deadline_s=30, poll_s=0.1)
    assert lab.sim.stats()["launches"] == 0
