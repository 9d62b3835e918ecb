"""RunPod Serverless client: respx on the documented shapes, and a run against the simulator."""

from __future__ import annotations

import json
from secrets import token_hex

import respx
from provider_time import FakeTime

from gpuharness.providers.serverless import ServerlessEndpoint
from gpuharness.providers.transport import ProviderHttp
from gpuharness.sim import Simulator

BASE = "https://api.runpod.ai"
KEY = "rpa_" + token_hex(18)  # made per run: no key is committed


def endpoint(base: str = BASE) -> ServerlessEndpoint:
    fake = FakeTime()
    return ServerlessEndpoint("sls", ProviderHttp("sls", base, KEY, sleep=fake.sleep, monotonic=fake.monotonic,
                                                  wall=fake.wall, rng=fake.rng()), "ep123")


@respx.mock(base_url=BASE)
def test_health_returns_the_six_worker_keys(respx_mock):
    respx_mock.get("/v2/ep123/health").respond(200, json={
        "jobs": {"completed": 27, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
        "workers": {"idle": 1, "initializing": 0, "ready": 1, "running": 0, "throttled": 0, "unhealthy": 0}})
    assert endpoint().health()["workers"]["ready"] == 1


@respx.mock(base_url=BASE)
def test_failed_job_error_json_string_is_decoded(respx_mock):
    error = json.dumps({"error_type": "<class 'RuntimeError'>", "error_message": "boom"})
    respx_mock.get("/v2/ep123/status/j1").respond(200, json={"delayTime": 101050, "error": error,
                                                             "executionTime": 42078, "id": "j1", "status": "FAILED"})
    job = endpoint().status("j1")
    assert job is not None and job.done and job.error["error_message"] == "boom" and job.delay_ms == 101050


@respx.mock(base_url=BASE)
def test_expired_job_status_404_is_none(respx_mock):
    respx_mock.get("/v2/ep123/status/old").respond(404)
    assert endpoint().status("old") is None


def test_run_then_wait_completes_against_the_simulator():
    with Simulator(ready_delay_s=0.0) as sim:
        client = endpoint(sim.url("runpod-serverless"))
        queued = client.run({"prompt": "hello"})
        done = client.wait(queued.id, timeout_s=10, poll_s=1.0)
        cancelled = client.cancel(client.run({"prompt": "x"}).id)
    assert queued.status == "IN_QUEUE"
    assert done.status == "COMPLETED" and done.output == {"echo": {"prompt": "hello"}}
    assert cancelled.status in ("CANCELLED", "COMPLETED")
