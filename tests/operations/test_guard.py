"""The shutdown guard on the simulator: configure leaves it running on the pod, and with no gpuharness process
connected it stops the pod through the provider's in-pod route when its rule says so."""

from __future__ import annotations

import time

import pytest

from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision

BOUND_S = 240.0  # the bound: the provider shows the pod stopped within 4 minutes


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_GUARD_MINUTE_S", "1")  # a guard minute lasts one second here
    said: list[str] = []
    with SimulatedEstate(tmp_path / "lab", sleep=lambda s: None, say=said.append) as lab:
        lab.said = said
        yield lab


def launched(lab, dep_id, provider="vast", **rule):
    gpu = "RTX 4090" if provider == "vast" else "NVIDIA GeForce RTX 4090"
    provision(lab.ctx, ProvisionRequest(provider=provider, gpu=gpu, image="comfyui:1", cost_hr=0.8,
                                        runtime="comfyui", model=MODEL, workflow=WORKFLOW, deployment_id=dep_id,
                                        **rule), up_deadline_s=30, poll_s=0.1)
    install(lab.ctx, dep_id, deadline_s=60)
    configure(lab.ctx, dep_id, deadline_s=60, guard_poll_s=0.2)
    return lab.registry.deployment(dep_id)


def provider_status(lab, dep):
    instance = lab.sim.state.instances[(dep.provider, str(dep.instance_id))]
    return instance.status


def wait_stopped(lab, dep):
    start = time.monotonic()
    while time.monotonic() - start < BOUND_S:
        if provider_status(lab, dep) == "stopped":
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{dep.id} still {provider_status(lab, dep)} after {BOUND_S:g} s")


@pytest.mark.parametrize("provider", ["vast", "runpod"])
def test_an_idle_pod_stops_itself_through_its_in_pod_route(lab, provider):
    dep = launched(lab, f"dep_guard_{provider}", provider=provider, idle_minutes=1)
    assert any("GH-GUARD" in line or "armed" in line for line in lab.said), lab.said
    wait_stopped(lab, dep)
    log = (lab.host_of(dep.id).workspace / ".gh-guard" / "guard.log").read_text()
    assert "why=idle 1 min" in log or "why=idle" in log, log
