"""The simulator speaks the providers' wire formats over real loopback HTTP, with faults and counters."""

from __future__ import annotations

from collections.abc import Iterator
from secrets import token_hex

import httpx
import pytest

from gpuharness.core.errors import UserError
from gpuharness.sim import Simulator, require_loopback

KEY = "sim-test-key-" + token_hex(8)  # made per run


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as c:
        yield c


def launch_pod(client: httpx.Client, name: str = "gh-pod-1") -> httpx.Response:
    return client.post("/runpod/v2/pods", json={"name": name, "image": "runpod/pytorch:2.4.0",
                                                "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1}})


def test_simulator_binds_loopback_on_a_free_port(sim: Simulator):
    assert sim.base_url.startswith("http://127.0.0.1:")
    assert not sim.base_url.endswith(":0")


def test_simulator_refuses_a_non_loopback_host():
    with pytest.raises(UserError, match="non-loopback"):
        require_loopback("0.0.0.0")
    with pytest.raises(UserError):
        Simulator(host="192.0.2.1")


def test_request_without_key_is_refused_with_each_providers_401(sim: Simulator):
    assert httpx.get(sim.base_url + "/runpod/v2/pods").status_code == 401
    vast = httpx.get(sim.base_url + "/vast/api/v1/instances/")
    assert vast.status_code == 401 and vast.json()["error"] == "auth_error"


def test_configured_key_rejects_any_other_key():
    with Simulator(api_keys={"runpod": KEY}) as sim:
        wrong = httpx.get(sim.base_url + "/runpod/v2/pods", headers={"Authorization": "Bearer nope-nope-nope"})
        right = httpx.get(sim.base_url + "/runpod/v2/pods", headers={"Authorization": f"Bearer {KEY}"})
    assert (wrong.status_code, right.status_code) == (401, 200)


def test_runpod_pod_goes_pending_then_running_with_ssh():
    with Simulator(ready_delay_s=3600) as sim, httpx.Client(base_url=sim.base_url,
                                                              headers={"Authorization": f"Bearer {KEY}"}) as c:
        created = launch_pod(c)
        assert created.status_code == 201
        pod = created.json()
        assert pod["status"] == "PROVISIONING" and pod["ssh"]["direct"] is None and pod["runtime"] is None
        sim.state.ready_delay_s = 0
        sim.state.instances[("runpod", pod["id"])].ready_at_mono = 0
        pod = c.get(f"/runpod/v2/pods/{pod['id']}").json()
    assert pod["status"] == "RUNNING"
    assert pod["ssh"]["direct"]["host"] == "127.0.0.1"
    assert pod["runtime"]["ports"][0]["private"] == 22


def test_runpod_terminate_answers_204_and_pod_vanishes(client: httpx.Client):
    pod_id = launch_pod(client).json()["id"]
    assert client.post(f"/runpod/v2/pods/{pod_id}/action", json={"action": "terminate"}).status_code == 204
    assert client.get(f"/runpod/v2/pods/{pod_id}").status_code == 404
    assert client.get("/runpod/v2/pods").json() == {"pods": []}


def test_vast_show_of_a_gone_instance_is_instances_null(client: httpx.Client):
    assert client.get("/vast/api/v0/instances/424242/", params={"owner": "me"}).json() == {"instances": None}


def test_vast_v1_list_pages_by_25_with_next_token(sim: Simulator, client: httpx.Client):
    sim.create_instances("vast", 60)
    seen: list[int] = []
    params: dict[str, str | int] = {"limit": 25}
    pages = 0
    while True:
        page = client.get("/vast/api/v1/instances/", params=params).json()
        pages += 1
        seen += [i["id"] for i in page["instances"]]
        if not page["next_token"]:
            break
        params = {"limit": 25, "after_token": page["next_token"]}
    assert pages == 3 and len(seen) == len(set(seen)) == 60


def test_vast_offer_search_is_cheapest_first_and_launch_uses_the_offer(client: httpx.Client):
    offers = client.post("/vast/api/v0/bundles/", json={"gpu_name": {"eq": "RTX 4090"}, "num_gpus": {"eq": 1},
                                                        "order": [["dph_total", "asc"]]}).json()["offers"]
    prices = [o["dph_total"] for o in offers]
    assert prices == sorted(prices) and len(prices) >= 2
    created = client.put(f"/vast/api/v0/asks/{offers[0]['id']}/", json={"image": "img", "label": "gh-x"}).json()
    shown = client.get(f"/vast/api/v0/instances/{created['new_contract']}/").json()["instances"]
    assert shown["label"] == "gh-x" and shown["dph_total"] == prices[0]


def test_massed_launch_answers_202_and_lists_in_running_instances(client: httpx.Client):
    launched = client.post("/massed/api/v1/instance/launch", json={"imageId": 7, "productName": "gpu_1x_a6000",
                                                                   "regionName": "any", "instanceName": "gh-m"})
    assert launched.status_code == 202
    uuid = launched.json()["response"]
    listed = client.get("/massed/api/v1/instance").json()["runningInstances"]
    assert [i["uuid"] for i in listed] == [uuid]
    assert client.get(f"/massed/api/v1/instance/{uuid}").json()["runningInstances"][0]["name"] == "gh-m"


def test_serverless_runsync_completes_and_health_has_six_worker_keys(client: httpx.Client):
    done = client.post("/runpod-serverless/v2/ep1/runsync", json={"input": {"prompt": "hi"}}).json()
    assert done["status"] == "COMPLETED" and done["output"] == {"echo": {"prompt": "hi"}}
    health = client.get("/runpod-serverless/v2/ep1/health").json()
    assert set(health["workers"]) == {"idle", "initializing", "ready", "running", "throttled", "unhealthy"}


def test_rate_limit_fault_sends_retry_after_for_runpod_and_plain_text_for_vast(client: httpx.Client):
    client.post("/_sim/faults", json={"provider": "runpod", "fault": "rate_limit", "count": 1, "retry_after": 2})
    client.post("/_sim/faults", json={"provider": "vast", "fault": "rate_limit", "count": 1})
    runpod = client.get("/runpod/v2/pods")
    vast = client.get("/vast/api/v1/instances/")
    assert runpod.status_code == 429 and runpod.headers["retry-after"] == "2"
    assert vast.status_code == 429 and "retry-after" not in vast.headers
    assert vast.text.startswith("API requests too frequent")
    assert client.get("/runpod/v2/pods").status_code == 200  # count consumed


def test_capacity_fault_refuses_a_launch_with_runpods_500_error_text(client: httpx.Client):
    client.post("/_sim/faults", json={"provider": "runpod", "fault": "capacity"})
    refused = launch_pod(client)
    assert refused.status_code == 500
    assert "no instances currently available" in refused.json()["error"]


def test_drop_after_commit_closes_the_connection_but_commits(sim: Simulator, client: httpx.Client):
    client.post("/_sim/faults", json={"provider": "runpod", "fault": "drop_after_commit"})
    with pytest.raises(httpx.RemoteProtocolError):
        launch_pod(client)
    assert len(client.get("/runpod/v2/pods").json()["pods"]) == 1
    assert sim.stats()["launches"] == 1


def test_bad_fault_body_is_refused_with_a_reason(client: httpx.Client):
    refused = client.post("/_sim/faults", json={"provider": "runpod", "fault": "meteor"})
    assert refused.status_code == 400 and "fault" in refused.json()["error"]


def test_stats_count_requests_by_route_and_bulk_instances(client: httpx.Client):
    ids = client.post("/_sim/instances", json={"provider": "runpod", "count": 5, "gpu": "RTX 4090",
                                               "name_prefix": "gh-bench-"}).json()["ids"]
    client.get("/runpod/v2/pods")
    client.get(f"/runpod/v2/pods/{ids[0]}")
    stats = client.get("/_sim/stats").json()
    assert len(ids) == 5 and stats["instances"] == 5 and stats["launches"] == 0
    assert stats["requests"]["GET /runpod/v2/pods"] == 1
    assert stats["requests"]["GET /runpod/v2/pods/{id}"] == 1
    assert "counters" in stats


def test_host_factory_handle_is_reported_and_stopped_on_terminate(client: httpx.Client, sim: Simulator):
    stopped: list[str] = []

    class Host:
        ssh_host = "127.0.0.1"
        ssh_port = 40022
        http_ports = {8188: 40188}

        def stop(self) -> None:
            stopped.append("x")

    sim.host_factory = lambda instance: Host()
    pod = launch_pod(client).json()
    pod = client.get(f"/runpod/v2/pods/{pod['id']}").json()
    assert pod["ssh"]["direct"]["port"] == 40022
    assert {"ip": "127.0.0.1", "private": 8188, "public": 40188, "type": "http"} in pod["runtime"]["ports"]
    client.delete(f"/runpod/v2/pods/{pod['id']}")
    assert stopped == ["x"]


def test_cost_accrues_while_running():
    now = [1000.0]
    with Simulator(ready_delay_s=0.0, clock=lambda: now[0]) as sim:
        sim.create_instances("runpod", 1, gpu="NVIDIA GeForce RTX 4090")
        now[0] += 3600
        accrued = sim.stats()["accrued_usd"]
    assert accrued == pytest.approx(0.69)


def test_ready_delay_is_settable_over_http(sim: Simulator, client: httpx.Client):
    assert client.post("/_sim/config", json={"ready_delay_s": 5}).json() == {"ready_delay_s": 5.0}
    assert sim.state.ready_delay_s == 5.0
    assert client.post("/_sim/config", json={"ready_delay_s": -1}).status_code == 400


def test_a_failing_host_factory_answers_500_and_the_simulator_keeps_serving(sim: Simulator, client: httpx.Client):
    def broken(instance):
        raise RuntimeError("no free port")

    sim.host_factory = broken
    failed = launch_pod(client)
    assert failed.status_code == 500 and "no free port" in failed.json()["error"]
    sim.host_factory = None
    assert client.get("/_sim/stats").status_code == 200
