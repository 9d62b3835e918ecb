"""The providers' billing records read as Charges: RunPod's pod billing history (v2 records, v1's bare array, as
runpodctl reads them) and Vast's invoices, against the simulator and as recorded wire shapes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from secrets import token_hex

import httpx
import pytest

from gpuharness.core.bill import Charge
from gpuharness.providers.base import ProviderError
from gpuharness.providers.bill_records import runpod_charges, vast_charges
from gpuharness.providers.factory import build_provider
from gpuharness.sim import Simulator

KEY = "sim-bill-key-" + token_hex(8)  # made per run
#: runpodctl's own test of `billing pods` (internal/api/billing_test.go): the v2 answer it reads
RUNPODCTL_BODY = {"records": [{"startTime": "2026-09-01T00:00:00Z", "endTime": "2026-09-02T00:00:00Z",
                               "podId": "pod-1", "totalAmount": 1.5, "gpuAmount": 1, "cpuAmount": 0.25,
                               "diskAmount": 0.25}], "metadata": {}}


def test_runpodctls_v2_records_and_the_v1_array_read_alike():
    v1 = [{"time": "2026-09-01T00:00:00Z", "amount": "1.5", "timeBilledMs": 1000, "podId": "pod-1"}]
    expected = [Charge("runpod", "pod-1", "2026-09-01", 1.5)]
    assert runpod_charges("runpod", RUNPODCTL_BODY) == expected == runpod_charges("runpod", v1)
    assert runpod_charges("runpod", {"records": None, "metadata": {}}) == []
    assert runpod_charges("runpod", [{"time": "2026-09-01T00:00:00Z", "amount": 2, "gpuTypeId": "A40"}]) == []


def test_vast_invoices_count_charges_only():
    body = {"invoices": [{"type": "charge", "instance_id": 31000001, "amount": 0.25, "timestamp": 1_764_892_800.0},
                         {"type": "payment", "amount": -20, "timestamp": 1_764_892_800.0}], "current": {}}
    assert vast_charges("vast", body) == [Charge("vast", "31000001", "2025-12-05", 0.25)]


@pytest.mark.parametrize("body", [{"records": "x"}, "a string", {"invoices": [1, 2]}])
def test_an_answer_of_another_shape_is_a_server_error_naming_the_route(body):
    with pytest.raises(ProviderError, match="unexpected response for GET /") as caught:
        (runpod_charges if "records" in body or isinstance(body, str) else vast_charges)("p", body)
    assert caught.value.kind == "server"


@pytest.fixture
def sim_options() -> dict:
    return {"ready_delay_s": 0.0, "api_keys": {"runpod": KEY, "vast": KEY}}


def test_the_runpod_adapter_asks_as_runpodctl_does_and_reads_the_simulators_accrual(sim: Simulator):
    (pod,) = sim.create_instances("runpod", 1)
    entry = {"name": "rp", "kind": "runpod", "credential_env": "K", "api_base": sim.url("runpod")}
    now = datetime.now(UTC)
    (charge,) = build_provider(entry, env={"K": KEY}).charges(now - timedelta(days=1), now)
    instance = sim.state.instances[("runpod", pod)]
    assert (charge.provider, charge.instance_id, charge.day) == ("rp", pod, now.strftime("%Y-%m-%d"))
    assert charge.amount_usd == pytest.approx(instance.accrued_usd, abs=1e-6)
    assert sim.stats()["requests"]["GET /runpod/v2/billing/pods"] == 1
    query = {"bucketSize": "day", "grouping": "podId", "startTime": "2026-12-01T00:00:00Z"}
    v1 = httpx.get(sim.url("runpod") + "/v1/billing/pods", params=query, headers={"Authorization": f"Bearer {KEY}"})
    assert [r["podId"] for r in v1.json()] == [pod] and "amount" in v1.json()[0]
    by_gpu = httpx.get(sim.url("runpod") + "/v2/billing/pods", params={**query, "grouping": "gpuTypeId"},
                       headers={"Authorization": f"Bearer {KEY}"}).json()
    assert [r["gpuTypeId"] for r in by_gpu["records"]] == [instance.gpu] and by_gpu["metadata"]["recordCount"] == 1
    hourly = httpx.get(sim.url("runpod") + "/v2/billing/pods", params={**query, "bucketSize": "hour"},
                       headers={"Authorization": f"Bearer {KEY}"})
    assert hourly.status_code == 400 and hourly.json()["title"] == "Bad Request"
