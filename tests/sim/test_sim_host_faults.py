"""POST /_sim/host-faults arms a fault on a running instance's simulated host, as /_sim/faults arms provider faults:
real HTTP to the simulator, then a real SSH probe of the host shows the fault."""

from __future__ import annotations

import time

import httpx
import pytest

from gpuharness import probe
from gpuharness.core.deployment import Deployment
from gpuharness.health import rules
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim.host import SimHost, host_factory
from gpuharness.sim.server import Simulator


def ordered(gpu: str, count: int = 1) -> Deployment:
    """A deployment that ordered `count` of `gpu` (what gpu_matches_order reads)."""
    return Deployment(id="dep", provider="vast", status="health-checking", cost_hr=0.0, created_at="", gpu=gpu,
                      gpu_count=count)


@pytest.fixture
def sim(sim: Simulator) -> Simulator:
    """The shared simulator, its running instances served by simulated hosts."""
    sim.host_factory = host_factory(counter=sim.state.increment)
    return sim


def running(sim: Simulator, provider: str = "vast") -> tuple[str, SimHost]:
    (instance_id,) = sim.create_instances(provider, 1, gpu="RTX 4090")
    instance = sim.state.get(provider, instance_id)
    assert instance is not None and isinstance(instance.host, SimHost)
    return instance_id, instance.host


def facts(host: SimHost) -> tuple[probe.ProbeResult, float]:
    block = host.ssh_block()
    started = time.monotonic()
    remote = open_remote(HostRoute(target="t", host=block["host"], port=block["port"], user="root",
                                   key_file=block["key_file"], known_hosts=block["known_hosts"]))
    try:
        _, result = probe.run(remote, probe.ProbeTargets(workspace=block["workspace"], process_pattern="main.py",
                                                         service_port=8188, log_path=str(host.log_path),
                                                         nvidia_smi_timeout_s=1), deadline_s=60)
    finally:
        remote.close()
    return result, time.monotonic() - started


def arm(sim: Simulator, body: dict[str, object]) -> httpx.Response:
    return httpx.post(sim.base_url + "/_sim/host-faults", json=body)


@pytest.mark.parametrize(("fault", "judged"), [
    ("driver_mismatch", lambda f, host: rules.gpu_matches_order(f, ordered("RTX 4090")).cause
     == "driver_library_mismatch"),
    ("hung_nvidia_smi", lambda f, host: f.gpu_error == "nvidia_smi_timeout"),
    ("full_disk", lambda f, host: rules.disk_has_room(f, str(host.workspace), 0, 10).cause == "disk_full"),
    ("oom", lambda f, host: rules.log_tail_clean(f, str(host.log_path)).cause == "cuda_oom"),
    ("missing_custom_node", lambda f, host: not rules.log_tail_clean(f, str(host.log_path)).ok),
    ("power_capped", lambda f, host: (f.gpus[0].enforced_power_limit_w, f.gpus[0].power_default_limit_w)
     == (180.0, 450.0)),
    ("underperforming", lambda f, host: f.gpus[0].utilization_pct == 97),
])
def test_a_fault_armed_over_the_control_route_shows_in_the_next_probe(sim, fault, judged):
    instance_id, host = running(sim)
    healthy, _ = facts(host)
    assert not judged(healthy, host)
    answer = arm(sim, {"instance_id": instance_id, "fault": fault})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"instance_id": instance_id, "provider": "vast", "armed": [fault]}
    assert judged(facts(host)[0], host)


def test_ssh_latency_armed_over_the_route_slows_the_probe(sim):
    instance_id, host = running(sim)
    assert arm(sim, {"instance_id": instance_id, "fault": "ssh_latency"}).status_code == 200
    _, took = facts(host)
    assert host.spec.latency_s == 0.05 and took >= 3 * host.spec.latency_s  # connect (2 round trips) + exec


def test_faults_accumulate_are_listed_and_are_cleared(sim):
    instance_id, host = running(sim)
    arm(sim, {"instance_id": instance_id, "fault": "full_disk"})
    assert arm(sim, {"instance_id": instance_id, "fault": "oom"}).json()["armed"] == ["full_disk", "oom"]
    listing = httpx.get(sim.base_url + "/_sim/host-faults").json()
    assert listing["armed"] == {instance_id: ["full_disk", "oom"]}
    assert {"oom", "missing_custom_node", "driver_mismatch", "full_disk", "hung_nvidia_smi",
            "ssh_latency"} <= set(listing["faults"])
    cleared = httpx.request("DELETE", sim.base_url + "/_sim/host-faults", json={"instance_id": instance_id})
    assert cleared.json()["armed"] == [] and host.armed_faults == ()
    result, _ = facts(host)
    assert rules.disk_has_room(result, str(host.workspace), 0, 10).ok
    assert rules.log_tail_clean(result, str(host.log_path)).ok


def test_delete_without_a_body_clears_every_host(sim):
    first, host_a = running(sim)
    second, host_b = running(sim, "runpod")
    sim.inject_host_fault(first, "full_disk")
    sim.inject_host_fault(second, "oom")
    assert httpx.delete(sim.base_url + "/_sim/host-faults").json() == {"armed": {}}
    assert host_a.armed_faults == host_b.armed_faults == ()


@pytest.mark.parametrize(("body", "status", "error"), [
    ({"instance_id": "nope", "fault": "oom"}, 404, "no simulated instance 'nope'"),
    ({"fault": "oom"}, 400, "'instance_id' must be the id of a simulated instance"),
    ("oom", 400, "expected a JSON object"),
])
def test_a_bad_request_is_refused_with_one_line(sim, body, status, error):
    answer = httpx.post(sim.base_url + "/_sim/host-faults", json=body)
    assert (answer.status_code, answer.json()["error"]) == (status, error)


def test_an_unknown_fault_names_the_faults_there_are(sim):
    instance_id, host = running(sim)
    answer = arm(sim, {"instance_id": instance_id, "fault": "meteor"})
    assert answer.status_code == 400 and "'fault' must be one of [" in answer.json()["error"]
    assert "'hung_nvidia_smi'" in answer.json()["error"] and host.armed_faults == ()


def test_an_instance_without_a_running_host_is_refused_409():
    with Simulator(ready_delay_s=3600) as sim:
        sim.host_factory = host_factory(counter=sim.state.increment)
        (pending,) = sim.create_instances("vast", 1)
        answer = arm(sim, {"instance_id": pending, "fault": "oom"})
        assert answer.status_code == 409 and answer.json()["error"] == (
            f"instance {pending} is pending: host faults need a running instance")
    with Simulator(ready_delay_s=0.0) as bare:  # no host factory: placeholder hosts
        (instance_id,) = bare.create_instances("vast", 1)
        answer = arm(bare, {"instance_id": instance_id, "fault": "oom"})
        assert answer.status_code == 409 and "has no simulated host" in answer.json()["error"]
