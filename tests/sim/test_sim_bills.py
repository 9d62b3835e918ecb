"""The simulated providers' bills from their own accrual: per UTC day of the simulator's wall clock, the GPU while
an instance runs and, at RunPod, the volume while a pod is stopped (as our billed intervals count it)."""

from __future__ import annotations

import pytest

from gpuharness.core.billing import storage_cost_hr
from gpuharness.core.deployment import Deployment
from gpuharness.sim import provider_bills
from gpuharness.sim.routing import SimRequest
from gpuharness.sim.state import SimState

MIDNIGHT = 1_764_892_800.0  # 2025-12-05T00:00:00Z
HOUR = 3600.0


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.fixture
def state(clock: list[float]) -> SimState:
    return SimState(ready_delay_s=0.0, clock=lambda: clock[0], wall=lambda: MIDNIGHT + clock[0])


def records(state: SimState, **params: str) -> dict:
    query = {"startTime": ["2025-12-05T00:00:00Z"], "endTime": ["2025-12-08T00:00:00Z"]}
    query.update({k: [v] for k, v in params.items()})
    return provider_bills.runpod_pod_billing(SimRequest("GET", "/runpod/v2/billing/pods", query, {}, None), state,
                                             "runpod").body


def test_a_pod_bills_its_gpu_while_it_runs_and_its_volume_while_stopped_day_by_day(state, clock):
    pod = state.create("runpod", name="gh-a", gpu="NVIDIA GeForce RTX 4090", gpu_count=1, cost_hr=0.69, image="i",
                       region="r")
    pod.storage_hr = 0.20 * 50 / 730
    clock[0] = 20 * HOUR
    state.stop(pod)
    clock[0] = 30 * HOUR  # stopped over midnight
    state.start(pod)
    clock[0] = 31 * HOUR
    state.terminate(pod)
    clock[0] = 40 * HOUR  # a terminated pod bills nothing more, and stays on the bill
    body = records(state)
    first, second = body["records"]
    assert (first["startTime"], first["podId"]) == ("2025-12-05T00:00:00Z", pod.id)
    assert first["gpuAmount"] == pytest.approx(20 * 0.69, abs=1e-5)
    assert first["diskAmount"] == pytest.approx(4 * pod.storage_hr, abs=1e-5)
    assert second["diskAmount"] == pytest.approx(6 * pod.storage_hr, abs=1e-5)
    assert second["gpuAmount"] == pytest.approx(0.69, abs=1e-5)
    assert first["timeBilledMs"] == pytest.approx(20 * HOUR * 1000, rel=1e-6)
    assert body["metadata"]["totalAmount"] == pytest.approx(pod.accrued_usd, abs=1e-5)


def test_the_simulated_volume_rate_is_the_one_our_intervals_count_for_runpod():
    deployment = Deployment(id="d", provider="runpod", status="stopped", cost_hr=0.69,
                            created_at="2025-12-05T00:00:00Z")
    assert storage_cost_hr(deployment, 0.20) == pytest.approx(0.20 * 50 / 730)


def test_a_stopped_vast_instance_bills_nothing_and_the_window_is_honoured(state, clock):
    instance = state.create("vast", name="gh-v", gpu="RTX 4090", gpu_count=1, cost_hr=0.35, image="i", region="r")
    clock[0] = 2 * HOUR
    state.stop(instance)
    clock[0] = 30 * HOUR
    invoices = provider_bills.vast_invoices(SimRequest("GET", "/vast/api/v0/users/me/invoices", {
        "sdate": [str(MIDNIGHT)], "edate": [str(MIDNIGHT + 3 * 86_400)]}, {}, None), state, "vast").body
    later = provider_bills.vast_invoices(SimRequest("GET", "/vast/api/v0/users/me/invoices", {
        "sdate": [str(MIDNIGHT + 86_400)], "edate": [str(MIDNIGHT + 3 * 86_400)]}, {}, None), state, "vast").body
    assert [(r["instance_id"], r["amount"]) for r in invoices["invoices"]] == [(int(instance.id), 0.7)]
    assert later["invoices"] == [] and invoices["current"]["total"] == 0.7
