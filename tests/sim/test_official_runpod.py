"""The RunPod SDK (pip `runpod` 1.12, in a venv of its own) against the simulator: Serverless (sync and asyncio:
run, status, output, stream, cancel, health, purge-queue) and pods through GraphQL (get_gpus, get_gpu, get_pods,
get_pod, create_pod, podRentInterruptable, stop, resume, terminate), over the same pods REST v2 lists.
"""

from __future__ import annotations

from pathlib import Path
from secrets import token_hex
from typing import Any

import httpx
import pytest
from official_clients import isolated_env, require, run_python

from gpuharness.sim import PlaceholderHost, Simulator

KEY = "sim-runpod-key-" + token_hex(8)  # made per run
GPU = "NVIDIA GeForce RTX 4090"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runpod() -> Path:
    return require("runpod")


@pytest.fixture
def sim_options() -> dict[str, Any]:
    return {"ready_delay_s": 0.2, "api_keys": {"runpod": KEY, "runpod-serverless": KEY},
            "host_factory": lambda _instance: PlaceholderHost(ssh_port=43_022, http_ports={8188: 18_188})}


def sdk(python: Path, sim: Simulator, home: Path, body: str, key: str = KEY) -> Any:
    """Run body with runpod imported and pointed at the simulator; it assigns `result`, printed as JSON."""
    env = isolated_env(home, {"RUNPOD_API_BASE_URL": sim.url("runpod"),
                              "RUNPOD_ENDPOINT_BASE_URL": sim.url("runpod-serverless") + "/v2"})
    code = (f"import asyncio, json, time\nimport runpod\nrunpod.api_key = {key!r}\n{body}\n"
            "print(json.dumps(result, default=str))")
    return run_python(python, code, env)


def rest_pods(sim: Simulator) -> list[dict[str, Any]]:
    answer = httpx.get(sim.url("runpod") + "/v2/pods", headers={"Authorization": f"Bearer {KEY}"})
    pods: list[dict[str, Any]] = answer.json()["pods"]
    return pods


def test_serverless_run_status_output_stream_and_health(runpod: Path, sim: Simulator, tmp_path: Path):
    result = sdk(runpod, sim, tmp_path, """
ep = runpod.Endpoint("sim-endpoint")
job = ep.run({"prompt": "a cat"})
first = job.status()
out = job.output(timeout=20)
streamed = list(ep.run({"stream": ["a", "b", "c"]}).stream())
result = {"first": first, "out": out, "after": job.status(), "stream": streamed,
          "sync": ep.run_sync({"n": 1}, timeout=20), "health": ep.health()}
""")
    assert result["first"] in ("IN_QUEUE", "IN_PROGRESS") and result["after"] == "COMPLETED"
    assert result["out"] == {"echo": {"prompt": "a cat"}} and result["stream"] == ["a", "b", "c"]
    assert result["sync"] == {"echo": {"n": 1}}
    assert set(result["health"]["workers"]) == {"idle", "initializing", "ready", "running", "throttled", "unhealthy"}
    assert result["health"]["jobs"]["completed"] == 3


def test_purge_queue_removes_queued_jobs_and_cancel_stops_one(runpod: Path, sim: Simulator, tmp_path: Path):
    sim.state.ready_delay_s = 120.0  # jobs stay queued while the test looks
    result = sdk(runpod, sim, tmp_path, """
ep = runpod.Endpoint("sim-endpoint")
jobs = [ep.run({"n": n}) for n in range(3)]
cancelled = jobs[0].cancel()
purged = ep.purge_queue()
try:
    gone = jobs[1].status()
except Exception as exc:
    gone = type(exc).__name__ + ": " + str(exc)
result = {"cancelled": cancelled, "purged": purged, "gone": gone, "health": ep.health()["jobs"]}
""")
    assert result["cancelled"]["status"] == "CANCELLED"
    assert result["purged"] == {"removed": 2, "status": "completed"}
    assert "404" in result["gone"] and result["health"]["inQueue"] == 0


def test_asyncio_endpoint_runs_streams_cancels_and_purges(runpod: Path, sim: Simulator, tmp_path: Path):
    result = sdk(runpod, sim, tmp_path, """
from runpod import AsyncioEndpoint, http_client
async def main():
    async with http_client.ClientSession() as session:
        ep = AsyncioEndpoint("sim-endpoint", session)
        job = await ep.run({"q": 1})
        status = await job.status()
        output = await job.output(timeout=20)
        chunks = [c async for c in (await ep.run({"stream": [1, 2]})).stream()]
        late = await ep.run({"q": 2})
        cancelled = await late.cancel()
        return {"status": status, "output": output, "chunks": chunks, "cancelled": cancelled,
                "health": await ep.health(), "purged": await ep.purge_queue()}
result = asyncio.run(main())
""")
    assert result["status"] in ("IN_QUEUE", "IN_PROGRESS") and result["output"] == {"echo": {"q": 1}}
    assert result["chunks"] == [1, 2] and result["cancelled"]["status"] in ("CANCELLED", "COMPLETED")
    assert result["purged"]["status"] == "completed" and "workers" in result["health"]


def test_graphql_gpu_types_carry_prices_and_the_lowest_price(runpod: Path, sim: Simulator, tmp_path: Path):
    result = sdk(runpod, sim, tmp_path, f"""
result = {{"all": runpod.get_gpus(), "one": runpod.get_gpu({GPU!r}, 2)}}
try:
    runpod.get_gpu("NVIDIA Quantum 9000")
except ValueError as exc:
    result["unknown"] = str(exc)
""")
    assert {g["id"] for g in result["all"]} >= {GPU, "NVIDIA H100 80GB HBM3"}
    assert set(result["all"][0]) == {"id", "displayName", "memoryInGb"}  # only what was selected
    one = result["one"]
    assert one["id"] == GPU and one["securePrice"] == 0.69 and one["communityPrice"] == 0.34
    assert one["lowestPrice"]["uninterruptablePrice"] == 0.34 and one["lowestPrice"]["minimumBidPrice"] > 0
    assert "No GPU found" in result["unknown"]


def test_graphql_pod_lifecycle_is_the_same_pod_rest_v2_lists(runpod: Path, sim: Simulator, tmp_path: Path):
    created = sdk(runpod, sim, tmp_path, f"""
result = runpod.create_pod("gh-sdk-pod", "runpod/pytorch:2.4.0", {GPU!r}, cloud_type="SECURE",
                           ports="8188/http,22/tcp", env={{"MODE": "test"}}, container_disk_in_gb=30)
""")
    pod_id = created["id"]
    assert created["env"] == ["MODE=test"] and created["machine"]["podHostId"].startswith(pod_id)
    [rest] = rest_pods(sim)
    assert rest["id"] == pod_id and rest["name"] == "gh-sdk-pod" and rest["env"] == {"MODE": "test"}
    result = sdk(runpod, sim, tmp_path, f"""
time.sleep(0.5)
pod = runpod.get_pod({pod_id!r})
listed = runpod.get_pods()
stopped = runpod.stop_pod({pod_id!r})
resumed = runpod.resume_pod({pod_id!r}, 1)
result = {{"pod": pod, "listed": listed, "stopped": stopped, "rest_after_stop": None, "resumed": resumed,
          "terminated": runpod.terminate_pod({pod_id!r}), "after": runpod.get_pods(),
          "gone": runpod.get_pod({pod_id!r})}}
""")
    pod = result["pod"]
    assert pod["desiredStatus"] == "RUNNING" and pod["ports"] == "8188/http,22/tcp" and pod["containerDiskInGb"] == 30
    assert {"privatePort": 22, "publicPort": 43_022, "ip": "127.0.0.1", "isIpPublic": True, "type": "tcp"} \
        in pod["runtime"]["ports"]
    assert [p["id"] for p in result["listed"]] == [pod_id]
    assert result["stopped"] == {"id": pod_id, "desiredStatus": "EXITED"}
    assert result["resumed"]["desiredStatus"] == "RUNNING" and result["terminated"] is None
    assert result["after"] == [] and result["gone"] is None and rest_pods(sim) == []


def test_graphql_interruptible_pods_rent_at_the_bid(runpod: Path, sim: Simulator, tmp_path: Path):
    result = sdk(runpod, sim, tmp_path, f"""
from runpod.api.graphql import run_graphql_query
rented = run_graphql_query('''mutation {{ podRentInterruptable(input: {{ bidPerGpu: 0.2, cloudType: ALL, gpuCount: 2,
  volumeInGb: 0, containerDiskInGb: 20, gpuTypeId: "{GPU}", name: "gh-spot", imageName: "img:spot",
  ports: "22/tcp", env: [{{ key: "A", value: "b" }}] }}) {{ id podType costPerHr __typename }} }}''')
try:
    run_graphql_query('mutation {{ podRentInterruptable(input: {{ bidPerGpu: 0.01, gpuTypeId: "{GPU}", '
                      'imageName: "i", cloudType: ALL }}) {{ id }} }}')
except Exception as exc:
    low = str(exc)
result = {{"rented": rented["data"]["podRentInterruptable"], "low": low}}
""")
    assert result["rented"]["podType"] == "INTERRUPTABLE" and result["rented"]["costPerHr"] == 0.4
    assert result["rented"]["__typename"] == "Pod" and "bid" in result["low"]


def test_graphql_capacity_is_supply_constraint_and_bad_documents_are_refused(runpod: Path, sim: Simulator,
                                                                           tmp_path: Path):
    sim.inject(provider="runpod", fault="capacity", route="graphql")
    result = sdk(runpod, sim, tmp_path, f"""
from runpod.api.graphql import run_graphql_query
errors = {{}}
for name, call in (("capacity", lambda: runpod.create_pod("gh-full", "img", {GPU!r})),
                   ("field", lambda: run_graphql_query("query {{ myself {{ pods {{ id nope }} }} }}")),
                   ("syntax", lambda: run_graphql_query("query {{ myself {{ pods {{ id }}")),
                   ("variable", lambda: run_graphql_query("query Q($input: PodFilter!) "
                                                          "{{ pod(input: $input) {{ id }} }}"))):
    try:
        call()
        errors[name] = None
    except Exception as exc:
        errors[name] = type(exc).__name__ + ": " + str(exc)
result = errors
""")
    assert result["capacity"].startswith("QueryError: There are no longer any instances available")
    assert result["field"] == 'QueryError: Cannot query field "nope" on type "Pod".'
    assert result["syntax"].startswith("QueryError: Syntax Error: Expected")
    assert "Variable \"$input\" of required type \"PodFilter!\" was not provided." in result["variable"]
    assert sim.stats()["faults_fired"]["capacity"] == 1


def test_a_wrong_key_is_an_authentication_error(runpod: Path, sim: Simulator, tmp_path: Path):
    result = sdk(runpod, sim, tmp_path, """
try:
    runpod.get_pods()
    result = None
except Exception as exc:
    result = type(exc).__name__
""", key="not-the-sim-key-0123456789")
    assert result == "AuthenticationError"
