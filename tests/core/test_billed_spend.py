"""`spend` counts what the provider bills (launch to verified destroy), not only the jobs: against the simulator's
own accrual."""

from __future__ import annotations

import json
import time

import pytest
from lifecycle_fakes import provision_comfyui

from gpuharness.core.clock import now_ts
from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.destroy import destroy


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as made:
        yield made


def spend_json(lab: SimulatedEstate) -> dict:
    result = lab.cli("spend", "--json", "--by", "deployment", "--registry", str(lab.registry.root))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_pod_with_one_short_job_bills_its_uptime_as_the_provider_accrued_it(lab):
    provision_comfyui(lab, "dep_one")
    Ledger(lab.registry.ledger_path).append({
        "id": "J-000001", "deployment_id": "dep_one", "provider": "vast", "status": "completed",
        "started_at": now_ts(), "completed_at": now_ts(), "duration_s": 0.05, "cost_usd": 0.0004, "ts": now_ts()})
    time.sleep(3.0)
    destroy(lab.ctx, "dep_one", confirm="dep_one")
    accrued = lab.sim.stats()["accrued_usd"]
    payload = spend_json(lab)
    assert payload["total"] == pytest.approx(accrued, rel=0.15), (payload, accrued)
    assert payload["used_total"] == pytest.approx(0.0004)
    assert payload["idle_total"] == pytest.approx(payload["total"] - 0.0004, abs=1e-6)
    assert payload["groups"]["dep_one"]["billed"] == payload["total"]


def test_pods_without_jobs_still_show_a_billed_total(lab):
    for index in range(4):
        provision_comfyui(lab, f"dep_idle_{index}")
    time.sleep(2.0)
    for index in range(4):
        destroy(lab.ctx, f"dep_idle_{index}", confirm=f"dep_idle_{index}")
    accrued = lab.sim.stats()["accrued_usd"]
    payload = spend_json(lab)
    assert accrued > 0 and payload["total"] == pytest.approx(accrued, rel=0.15), (payload, accrued)
    assert payload["used_total"] == 0.0 and len(payload["groups"]) == 4
    text = lab.cli("spend", "--registry", str(lab.registry.root)).stdout
    assert "total" in text and "idle" in text
