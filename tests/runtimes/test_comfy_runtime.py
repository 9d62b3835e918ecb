"""The one ComfyUI client against the simulated ComfyUI (which validates with the recorded 0.8.0 catalog): the
recorded answer shapes, real PNGs of the asked size, the host faults as the real server shows them, execution
errors classified, and job inputs applied one way for the test generation and for jobs."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from checkout import ROOT
from health_world import CHECKPOINT, sdxl_graph
from PIL import Image

from gpuharness.core.deployment import Deployment
from gpuharness.diagnose import classify_text
from gpuharness.operations.comfyui_job import ComfyJobExecutor
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes import run_test_generation
from gpuharness.runtimes.comfyui.client import ComfyUI, InputError, PromptRejected, apply_inputs, job_graph
from gpuharness.sim.comfyui import CUSTOM_NODE, safetensors_bytes
from gpuharness.sim.runtimes import RuntimeFaults, RuntimeServer

EXAMPLES = json.loads((ROOT / "fixtures" / "comfyui" / "examples.json").read_text())


def workflow(graph, *, min_bytes=100, timeout_s=60):
    return {"id": "t2i", "version": 1, "runtime": "comfyui",
            "test_generation": {"graph": graph, "expected_outputs": [{"type": "image/png", "min_bytes": min_bytes}],
                                "timeout_s": timeout_s}}


@pytest.fixture
def comfy(tmp_path):
    """A simulated ComfyUI answering in-process (the runtime HTTP seam's fake), with one real checkpoint."""
    models = tmp_path / "models" / "checkpoints"
    models.mkdir(parents=True)
    (models / CHECKPOINT).write_bytes(safetensors_bytes())
    server = RuntimeServer("comfyui", faults=RuntimeFaults(polls_before_done=0), output_root=tmp_path / "output",
                           models_root=tmp_path / "models")
    http = PhaseHttp("http://comfy.invalid", transport=server.transport())
    yield server, http
    http.close()


def generate(http, wf):
    return run_test_generation("comfyui", http, wf, sleep=lambda _s: None)


def test_recorded_success_graph_writes_a_real_64x64_png_over_the_100_byte_floor(comfy):
    server, http = comfy
    outcome = generate(http, workflow(EXAMPLES["success_empty_image"]["graph"]))
    assert outcome.ok, outcome.message
    [item] = next(iter(server.behaviour.comfy.jobs.values())).entry["outputs"]["2"]["images"]
    assert item["filename"] == "rec_00001_.png" and item["type"] == "output"
    data = (server.output_root / item["filename"]).read_bytes()
    image = Image.open(io.BytesIO(data))
    assert image.size == (64, 64) and image.getpixel((0, 0)) == (0, 0, 0)
    assert len(data) >= 100


def test_a_sampled_image_has_the_latent_size_and_a_real_images_weight(comfy):
    server, http = comfy
    outcome = generate(http, workflow(sdxl_graph(size=256), min_bytes=100_000))
    assert outcome.ok, outcome.message
    assert outcome.outputs[0].size > 100_000
    name = outcome.outputs[0].name
    assert Image.open(server.output_root / name).size == (256, 256)


def test_each_run_numbers_its_file_as_comfyui_does(comfy):
    _, http = comfy
    names = [generate(http, workflow(sdxl_graph())).outputs[0].name for _ in range(2)]
    assert names == ["ComfyUI_00001_.png", "ComfyUI_00002_.png"]


def test_history_entry_has_the_recorded_shape(comfy):
    _, http = comfy
    client = ComfyUI(http)
    prompt_id = client.submit(EXAMPLES["success_empty_image"]["graph"], client_id="t")
    done = client.execution(prompt_id)
    assert done is not None and done.ok
    recorded = EXAMPLES["success_empty_image"]["history"]
    entry = http.get(f"/history/{prompt_id}").json()[prompt_id]
    assert set(entry) == set(recorded)
    assert [m[0] for m in entry["status"]["messages"]] == [m[0] for m in recorded["status"]["messages"]]
    assert len(entry["prompt"]) == len(recorded["prompt"]) and entry["prompt"][4] == ["2"]


def test_object_info_queue_and_system_stats_answer_like_the_real_server(comfy):
    _, http = comfy
    info = http.get("/object_info").json()
    assert len(info) >= 545 and info["SaveImage"]["output_node"] is True
    assert info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"][0] == [CHECKPOINT]
    assert http.get("/object_info/KSampler").json().keys() == {"KSampler"}
    assert http.get("/queue").json() == {"queue_running": [], "queue_pending": []}
    stats = http.get("/system_stats").json()
    assert stats["system"]["comfyui_version"] == "0.8.0" and stats["devices"][0]["type"] == "cuda"


def test_queue_shows_a_waiting_prompt_until_it_runs(tmp_path):
    server = RuntimeServer("comfyui", faults=RuntimeFaults(never_finishes=True))
    http = PhaseHttp("http://comfy.invalid", transport=server.transport())
    prompt_id = ComfyUI(http).submit(EXAMPLES["success_empty_image"]["graph"], client_id="t")
    running = http.get("/queue").json()["queue_running"]
    assert running[0][1] == prompt_id and running[0][4] == ["2"]


def test_the_simulator_refuses_what_the_real_server_refused():
    server = RuntimeServer("comfyui")
    http = PhaseHttp("http://comfy.invalid", transport=server.transport())
    for name, example in EXAMPLES.items():
        response = http.post("/prompt", json={"prompt": example["graph"]})
        assert response.status_code == example["prompt_status"], name
        if response.status_code == 400:
            assert response.json() == example["prompt_body"], name


def test_missing_model_host_fault_is_model_missing_naming_the_file(comfy):
    server, http = comfy
    server.faults = RuntimeFaults(missing_model=True, polls_before_done=0)
    outcome = generate(http, workflow(sdxl_graph()))
    assert (outcome.ok, outcome.cause) == (False, "model_missing")
    assert CHECKPOINT in outcome.message and "models/checkpoints/" in (outcome.remedy or "")


def test_missing_custom_node_host_fault_is_custom_node_missing_naming_the_class(comfy):
    server, http = comfy
    server.faults = RuntimeFaults(missing_node=CUSTOM_NODE, polls_before_done=0)
    outcome = generate(http, workflow(sdxl_graph(sampler=CUSTOM_NODE)))
    assert (outcome.ok, outcome.cause) == (False, "custom_node_missing")
    assert f"no node class {CUSTOM_NODE}" in outcome.message


def test_corrupt_checkpoint_fails_in_execution_as_weights_corrupt(comfy):
    server, http = comfy
    server.faults = RuntimeFaults(corrupt_checkpoint=True, polls_before_done=0)
    outcome = generate(http, workflow(sdxl_graph()))
    assert (outcome.ok, outcome.cause) == (False, "weights_corrupt")
    assert "node 4 (CheckpointLoaderSimple)" in outcome.message and "SafetensorError" in outcome.message


def test_a_truncated_checkpoint_on_disk_fails_the_way_safetensors_does(comfy, tmp_path):
    _, http = comfy
    path = tmp_path / "models" / "checkpoints" / CHECKPOINT
    path.write_bytes(path.read_bytes()[:-5])
    outcome = generate(http, workflow(sdxl_graph()))
    assert outcome.cause == "weights_corrupt" and "incomplete metadata" in outcome.message


def test_cuda_oom_happens_in_the_sampler_during_execution(comfy):
    server, http = comfy
    server.faults = RuntimeFaults(oom=True, polls_before_done=0)
    outcome = generate(http, workflow(sdxl_graph()))
    assert (outcome.ok, outcome.cause) == (False, "cuda_oom")
    assert "node 3 (KSampler)" in outcome.message


# --- execution error classification -------------------------------------------------------------------------

def test_recorded_safetensor_execution_error_is_weights_corrupt():
    entry = EXAMPLES["execution_error_corrupt_checkpoint"]["history"]
    assert classify_text(json.dumps({"x": entry})).cause == "weights_corrupt"
    error = next(m[1] for m in entry["status"]["messages"] if m[0] == "execution_error")
    assert classify_text(f"{error['exception_type']}: {error['exception_message']}").cause == "weights_corrupt"


@pytest.mark.parametrize(("exception_type", "message", "cause"), [
    ("safetensors_rust.SafetensorError", "Error while deserializing header: incomplete metadata, file not fully "
                                         "covered", "weights_corrupt"),
    ("safetensors_rust.SafetensorError", "Error while deserializing header: MetadataIncompleteBuffer",
     "weights_corrupt"),
    ("torch.OutOfMemoryError", "Allocation on device ", "cuda_oom"),
    ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                               "23.57 GiB of which 1.06 GiB is free.", "cuda_oom"),
    ("PIL.UnidentifiedImageError", "cannot identify image file '/workspace/ComfyUI/input/cat.png'", "bad_input"),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/workspace/ComfyUI/models/loras/style.safetensors'",
     "model_missing"),
    ("OSError", "[Errno 28] No space left on device", "disk_full"),
    ("RuntimeError", "CUDA error: an illegal memory access was encountered", "unknown"),
])
def test_execution_errors_are_classified(exception_type, message, cause):
    frame = {"prompt_id": "p", "node_id": "3", "node_type": "KSampler", "exception_type": exception_type,
             "exception_message": message, "traceback": [], "executed": []}
    entry = {"p": {"status": {"status_str": "error", "completed": False,
                              "messages": [["execution_error", frame]]}, "outputs": {}}}
    assert classify_text(json.dumps(entry)).cause == cause


DEPLOYMENT = Deployment.from_json({"id": "dep", "provider": "sim", "status": "ready", "ssh": {"workspace": "/w"}})


def test_a_failed_job_carries_the_cause_to_its_ledger_line(comfy):
    from gpuharness.operations.failure import classify

    server, http = comfy
    server.faults = RuntimeFaults(corrupt_checkpoint=True, polls_before_done=0)
    executor = ComfyJobExecutor(DEPLOYMENT, http=http)
    handle = executor.submit(workflow(sdxl_graph()), {}, "J-1")
    progress = executor.poll(handle)
    assert progress.state == "failed" and classify(progress.log).cause == "weights_corrupt"


def test_a_rejected_job_says_why_in_the_servers_words(comfy):
    from gpuharness.operations.failure import classify

    _, http = comfy
    executor = ComfyJobExecutor(DEPLOYMENT, http=http)
    with pytest.raises(PromptRejected) as caught:
        executor.submit(workflow(sdxl_graph(ckpt="sd_xl_base_1.0.safetensors")), {}, "J-2")
    assert caught.value.cause == "model_missing"
    assert classify(str(caught.value)).cause == "model_missing"


# --- inputs: one way for the test generation and for jobs -------------------------------------------------------

def test_inputs_address_a_node_by_id_by_dotted_name_by_parameter_or_by_a_unique_name():
    graph = sdxl_graph()
    applied = apply_inputs(graph, {"3": {"steps": 4}, "7.text": "ugly", "seed": 9, "prompt": "a cat"},
                           {"prompt": "6.text"})
    assert applied["3"]["inputs"]["steps"] == 4 and applied["3"]["inputs"]["seed"] == 9
    assert (applied["6"]["inputs"]["text"], applied["7"]["inputs"]["text"]) == ("a cat", "ugly")
    assert graph["3"]["inputs"]["steps"] == 20, "the workflow's graph is not modified"


def test_an_input_name_two_nodes_have_is_refused_naming_them():
    with pytest.raises(InputError, match="nodes 6, 7 all have it"):
        apply_inputs(sdxl_graph(), {"text": "a cat"})
    with pytest.raises(InputError, match="no node has it"):
        apply_inputs(sdxl_graph(), {"guidance": 3})


def test_job_and_test_generation_build_the_same_graph_from_the_same_inputs():
    from gpuharness.runtimes.comfyui.client import build_test_graph

    wf = {"id": "w", "graph": sdxl_graph(), "parameters": {"prompt": "6.text"},
          "test_generation": {"inputs": {"prompt": "a cat"}, "timeout_s": 5}}
    assert build_test_graph(wf) == job_graph(wf, {"prompt": "a cat"})


def test_the_real_seam_and_the_fake_answer_alike(comfy):
    server, fake = comfy
    server.start()
    try:
        with PhaseHttp(server.url) as real:
            for path in ("/object_info/SaveImage", "/queue", "/system_stats"):
                assert real.get(path).json() == fake.get(path).json(), path
            assert real.count("GET") == 3
    finally:
        server.stop()


def test_transport_failure_is_an_outcome_not_an_exception():
    http = PhaseHttp("http://127.0.0.1:9", timeout_s=2)
    outcome = generate(http, workflow(sdxl_graph()))
    assert (outcome.ok, outcome.cause) == (False, "unreachable") and "POST /prompt" in outcome.message
    assert isinstance(http.calls[0].error, str)
    with pytest.raises(httpx.HTTPError):
        http.get("/queue")
