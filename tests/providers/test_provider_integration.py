"""Every adapter over real loopback HTTP against the simulator: offers, launch, pending -> running, stop, terminate."""

from __future__ import annotations

from typing import Any

import pytest

from gpuharness.providers.base import LaunchSpec
from gpuharness.providers.factory import build_provider
from gpuharness.sim import Simulator

ENV = {"SIM_KEY": "sim-key-0123456789abcdefghij"}


class SimClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def sim_options(clock: SimClock) -> dict[str, Any]:
    """Instances run 30 s after launch, by the test's clock."""
    return {"ready_delay_s": 30.0, "clock": clock}


def build(sim: Simulator, kind: str):
    return build_provider({"name": kind, "kind": kind, "credential_env": "SIM_KEY", "api_base": sim.url(kind)},
                          env=ENV)


@pytest.mark.parametrize(("kind", "gpu", "image"), [
    ("runpod", "NVIDIA GeForce RTX 4090", "runpod/pytorch:2.4.0"),
    ("vast", "RTX 4090", "vastai/pytorch:latest"),
    ("massed", "RTX A6000", "7"),
])
def test_launch_goes_pending_then_running_with_ssh_then_terminates(sim: Simulator, clock: SimClock, kind, gpu, image):
    provider = build(sim, kind)
    offers = provider.offers(gpu)
    assert offers and [o.cost_hr for o in offers] == sorted(o.cost_hr for o in offers)
    launched = provider.launch(LaunchSpec(gpu=gpu, image=image, idempotency_key=f"gh-it-{kind}"))
    assert launched.status == "pending"
    listed = provider.list_instances()
    assert [(i.id, i.status) for i in listed] == [(launched.id, "pending")]
    clock.now += 31
    running = provider.get_instance(launched.id)
    assert running is not None and running.status == "running" and running.ssh is not None
    assert running.ssh.host == "127.0.0.1" and running.cost_hr == offers[0].cost_hr
    assert running.idempotency_key == f"gh-it-{kind}" and running.created_at
    provider.terminate(launched.id)
    assert provider.get_instance(launched.id) is None and provider.list_instances() == []
    provider.close()


@pytest.mark.parametrize("kind", ["runpod", "vast"])
def test_stop_then_start_goes_through_pending_again(sim: Simulator, clock: SimClock, kind):
    provider = build(sim, kind)
    (instance_id,) = sim.create_instances(kind, 1, gpu="RTX 4090")
    clock.now += 31
    provider.stop(instance_id)
    assert provider.get_instance(instance_id).status == "stopped"
    provider.start(instance_id)
    assert provider.get_instance(instance_id).status == "pending"
    clock.now += 31
    assert provider.get_instance(instance_id).status == "running"


def test_vast_list_of_60_takes_3_pages_and_no_gets(sim: Simulator):
    provider = build(sim, "vast")
    sim.create_instances("vast", 60)
    assert len(provider.list_instances()) == 60
    requests = sim.stats()["requests"]
    assert requests["GET /vast/api/v1/instances/"] == 3
    assert "GET /vast/api/v0/instances/{id}/" not in requests


def test_host_factory_address_reaches_the_normalized_instance(sim: Simulator, clock: SimClock):
    class Host:
        ssh_host = "127.0.0.1"
        ssh_port = 42022
        http_ports = {8188: 42188}

        def stop(self) -> None:
            return None

    sim.host_factory = lambda instance: Host()
    for kind in ("runpod", "vast", "massed"):
        sim.create_instances(kind, 1, gpu="RTX A6000")
    clock.now += 31
    for kind in ("runpod", "vast", "massed"):
        (instance,) = build(sim, kind).list_instances()
        assert instance.ssh is not None and instance.ssh.port == 42022, kind
        if kind != "massed":  # Massed reports only an ip
            assert instance.endpoint == "http://127.0.0.1:42188", kind


def test_runpod_says_running_before_ports_exist_and_the_adapter_keeps_it_pending(sim: Simulator, clock: SimClock):
    provider = build(sim, "runpod")
    launched = provider.launch(LaunchSpec(gpu="NVIDIA GeForce RTX 4090", image="i", idempotency_key="gh-early"))
    clock.now += 20  # past half of the 30 s delay
    early = provider.get_instance(launched.id)
    assert (early.status, early.raw_status, early.ssh) == ("pending", "RUNNING", None)
    clock.now += 11
    assert provider.get_instance(launched.id).status == "running"
