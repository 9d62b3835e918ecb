"""The simulated providers' in-pod stop: the identity a pod is given stops that pod, and nothing else."""

from __future__ import annotations

import httpx
import pytest

from gpuharness.sim import in_pod, wires


@pytest.fixture
def sim_options():
    keys = {"runpod": "operator-key-" + "x" * 20, "vast": "operator-key-" + "y" * 20}
    return {"ready_delay_s": 0.0, "api_keys": keys}


def pods(sim, provider, count=2):
    ids = sim.create_instances(provider, count)
    return [sim.state.get(provider, i) for i in ids]


def test_a_runpod_pod_key_stops_its_own_pod_only(sim):
    mine, other = pods(sim, "runpod")
    env = in_pod.identity(sim.base_url, mine, wires.provider("runpod").in_pod)
    assert env["RUNPOD_POD_ID"] == mine.id and env["GPUHARNESS_GUARD_API"] == sim.url("runpod") + "/v1"
    key = {"Authorization": f"Bearer {env['RUNPOD_API_KEY']}"}
    assert httpx.post(f"{env['GPUHARNESS_GUARD_API']}/pods/{other.id}/stop", headers=key).status_code == 401
    assert httpx.get(sim.url("runpod") + "/v2/pods", headers=key).status_code == 401
    assert httpx.delete(sim.url("runpod") + f"/v2/pods/{mine.id}", headers=key).status_code == 401
    answer = httpx.post(f"{env['GPUHARNESS_GUARD_API']}/pods/{mine.id}/stop", headers=key)
    assert answer.status_code == 200 and answer.json()["status"] == "EXITED"
    assert (mine.status, other.status) == ("stopped", "running")


def test_a_vast_instance_key_only_stops_its_instance(sim):
    mine, other = pods(sim, "vast")
    env = in_pod.identity(sim.base_url, mine, wires.provider("vast").in_pod)
    key = {"Authorization": f"Bearer {env['CONTAINER_API_KEY']}"}
    base = env["GPUHARNESS_GUARD_API"]
    assert httpx.put(f"{base}/instances/{other.id}/", headers=key, json={"state": "stopped"}).status_code == 401
    assert httpx.put(f"{base}/instances/{mine.id}/", headers=key, json={"label": "mine now"}).status_code == 401
    answer = httpx.put(f"{base}/instances/{mine.id}/", headers=key, json={"state": "stopped"})
    assert answer.status_code == 200 and answer.json() == {"success": True}
    assert (mine.status, other.status) == ("stopped", "running")
