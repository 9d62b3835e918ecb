"""Runtime clients against the simulated runtimes on loopback: health, test generation, classified failures."""

from __future__ import annotations

import httpx
import pytest
from health_world import CHECKPOINT, sdxl_graph

from gpuharness.runtimes import health, run_test_generation
from gpuharness.sim.comfyui import CUSTOM_NODE, safetensors_bytes
from gpuharness.sim.runtimes import RuntimeFaults, RuntimeServer

COMFY_WORKFLOW = {
    "id": "sdxl-basic", "version": 1, "runtime": "comfyui",
    "test_generation": {
        "graph": sdxl_graph(),
        "inputs": {"3": {"steps": 4}},
        "expected_outputs": [{"type": "image/png", "min_bytes": 1000}],
        "timeout_s": 120,
    },
}
LLM_WORKFLOW = {"id": "chat", "version": 1, "runtime": "openai", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                "test_generation": {"inputs": {"prompt": "Hello"}, "timeout_s": 60}}


class FakeTime:
    """An injectable clock whose sleep advances it: polling tests take no wall time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(kind, **faults):
        models = tmp_path / kind / "models"
        (models / "checkpoints").mkdir(parents=True, exist_ok=True)
        (models / "checkpoints" / CHECKPOINT).write_bytes(safetensors_bytes())
        server = RuntimeServer(kind, faults=RuntimeFaults(**faults), output_root=tmp_path / kind / "output",
                               models_root=models).start()
        servers.append(server)
        return server, httpx.Client(base_url=server.url + ("/v2/ep1/" if kind == "serverless" else ""))

    yield start
    for server in servers:
        server.stop()


def generate(kind, client, workflow, fake=None):
    fake = fake or FakeTime()
    return run_test_generation(kind, client, workflow, sleep=fake.sleep, clock=fake.clock)


def test_comfyui_test_generation_posts_the_graph_polls_history_and_fetches_a_png(serve):
    server, client = serve("comfyui", polls_before_done=3)
    fake = FakeTime()
    outcome = generate("comfyui", client, COMFY_WORKFLOW, fake)
    assert outcome.ok, outcome.message
    assert [a.content_type for a in outcome.outputs] == ["image/png"]
    assert len(fake.slept) == 3
    job = next(iter(server.behaviour.comfy.jobs.values()))
    assert job.graph["3"]["inputs"]["steps"] == 4, "the test inputs are applied to the graph"
    assert any(r.startswith("GET /view") for r in server.requests)


def test_comfyui_cuda_oom_is_classified_with_the_remedy(serve):
    _, client = serve("comfyui", oom=True)
    outcome = generate("comfyui", client, COMFY_WORKFLOW)
    assert not outcome.ok and outcome.cause == "cuda_oom"
    assert "KSampler" in outcome.message
    assert outcome.remedy and "retry" in outcome.remedy.lower()


def test_comfyui_missing_custom_node_is_classified(serve):
    # issue 9: a class the server lacks is custom_node_missing (it was custom_node_import), naming the class
    _, client = serve("comfyui", missing_node=CUSTOM_NODE)
    workflow = {**COMFY_WORKFLOW, "test_generation": {**COMFY_WORKFLOW["test_generation"],
                                                      "graph": sdxl_graph(sampler=CUSTOM_NODE)}}
    outcome = generate("comfyui", client, workflow)
    assert (outcome.ok, outcome.cause) == (False, "custom_node_missing")
    assert "ClownsharKSampler_Beta" in outcome.message and "pin" in (outcome.remedy or "")


def test_comfyui_missing_custom_node_the_workflow_does_not_use_is_no_failure(serve):
    _, client = serve("comfyui", missing_node=CUSTOM_NODE)
    assert generate("comfyui", client, COMFY_WORKFLOW).ok


def test_comfyui_generation_that_never_finishes_times_out_without_waiting(serve):
    _, client = serve("comfyui", never_finishes=True)
    fake = FakeTime()
    outcome = generate("comfyui", client, COMFY_WORKFLOW, fake)
    assert (outcome.ok, outcome.cause) == (False, "timeout")
    assert "120s" in outcome.message
    assert sum(fake.slept) <= 120


def test_comfyui_empty_output_fails(serve):
    _, client = serve("comfyui", empty_output=True)
    outcome = generate("comfyui", client, COMFY_WORKFLOW)
    assert (outcome.ok, outcome.cause) == (False, "empty_output")


def test_comfyui_wrong_output_type_fails(serve):
    _, client = serve("comfyui")
    workflow = {**COMFY_WORKFLOW, "test_generation": {**COMFY_WORKFLOW["test_generation"],
                                                      "expected_outputs": [{"type": "video/mp4"}]}}
    outcome = generate("comfyui", client, workflow)
    assert (outcome.ok, outcome.cause) == (False, "wrong_type")
    assert "video/mp4" in outcome.message and "image/png" in outcome.message


def test_comfyui_health_is_system_stats(serve):
    _, client = serve("comfyui")
    assert health("comfyui", client).ok
    _, down = serve("comfyui", health_down=True)
    outcome = health("comfyui", down)
    assert (outcome.ok, outcome.cause) == (False, "unhealthy") and "503" in outcome.message


def test_openai_health_models_and_completion(serve):
    _, client = serve("openai")
    assert health("openai", client).ok
    outcome = generate("openai", client, LLM_WORKFLOW)
    assert outcome.ok and "world" in outcome.message


def test_openai_model_not_listed_fails_with_the_served_models(serve):
    _, client = serve("openai", wrong_model=True)
    outcome = generate("openai", client, LLM_WORKFLOW)
    assert (outcome.ok, outcome.cause) == (False, "model_missing")
    assert "some-other/model" in outcome.message


def test_openai_empty_completion_and_oom(serve):
    _, empty = serve("openai", empty_output=True)
    assert generate("openai", empty, LLM_WORKFLOW).cause == "empty_output"
    _, oom = serve("openai", oom=True)
    assert generate("openai", oom, LLM_WORKFLOW).cause == "cuda_oom"


def test_unreachable_runtime_is_reported_not_raised():
    client = httpx.Client(base_url="http://127.0.0.1:9", timeout=2)
    outcome = health("openai", client)
    assert (outcome.ok, outcome.cause) == (False, "unreachable")


def test_serverless_runsync_falls_back_to_status_polling_until_completed(serve):
    server, client = serve("serverless", polls_before_done=2)
    fake = FakeTime()
    assert health("serverless", client).ok
    outcome = generate("serverless", client, {"id": "s", "test_generation": {"inputs": {"prompt": "x"},
                                                                            "timeout_s": 60}}, fake)
    assert outcome.ok, outcome.message
    assert sum(1 for r in server.requests if "/status/" in r) == 2


def test_serverless_failed_job_is_classified_and_no_workers_is_unhealthy(serve):
    _, client = serve("serverless", oom=True)
    outcome = generate("serverless", client, {"id": "s", "test_generation": {"inputs": {}, "timeout_s": 60}})
    assert (outcome.ok, outcome.cause) == (False, "cuda_oom")
    _, down = serve("serverless", health_down=True)
    assert health("serverless", down).cause == "no_workers"
