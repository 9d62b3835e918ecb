"""Jobs on an OpenAI-compatible (vLLM) deployment, end to end over real loopback HTTP and SSH: the completion is
kept as a file on the host, retrieve syncs it, server errors are classified (OOM never retried), destroy works."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import read_journal
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.destroy import destroy
from gpuharness.operations.failure import classify
from gpuharness.operations.install import configure, install
from gpuharness.operations.openai_job import answer_error, request_for
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.run import run_job
from gpuharness.sim.runtimes import RuntimeFaults

DEP = "dep_llm_01"
QWEN = "Qwen/Qwen2.5-0.5B-Instruct"  # what the simulated vLLM serves
COMPLETE = {"id": "qwen-complete", "version": 1, "runtime": "openai", "model": QWEN,
            "test_generation": {"inputs": {"prompt": "Hello", "max_tokens": 8}, "timeout_s": 60}}
CHAT = {**COMPLETE, "id": "qwen-chat", "api": "chat"}


def seed_llm(lab: SimulatedEstate) -> None:
    weights = lab.root / "model-store" / "qwen-0.5b.safetensors"
    weights.write_bytes(hashlib.sha256(b"qwen").digest() * 1024)
    with lab.registry.update("models.json") as doc:
        doc["models"].append({"name": QWEN, "min_vram_gb": 2, "files": [
            {"path": "qwen/model.safetensors", "url": weights.as_uri(),
             "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "size": weights.stat().st_size}]})
    with lab.registry.update("workflows.json") as doc:
        doc["workflows"] += [COMPLETE, CHAT]


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", sleep=lambda s: None, say=lambda line: None) as lab:
        seed_llm(lab)
        yield lab


def ready_llm(lab: SimulatedEstate) -> None:
    """Provision a vLLM image, install and configure over SSH, and pass the real health suite."""
    provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="vllm/vllm-openai:v0.6.3",
                                        cost_hr=0.4, runtime="openai", model=QWEN, workflow=COMPLETE["id"],
                                        idle_minutes=15, deployment_id=DEP), up_deadline_s=30, poll_s=0.1)
    install(lab.ctx, DEP, deadline_s=60)
    configure(lab.ctx, DEP, deadline_s=60)
    assert lab.suite("health", ["--gpu-mode", "live", "--deployment", DEP]) == 0, \
        (lab.root / "health.log").read_text()
    assert lab.registry.deployment(DEP).status == "ready"


def records(lab: SimulatedEstate) -> list[dict]:
    return list(Ledger(lab.registry.ledger_path).records())


def test_openai_job_keeps_the_completion_on_the_host_until_retrieve_syncs_it(lab, tmp_path):
    ready_llm(lab)
    host = lab.host_of(DEP)
    result = run_job(lab.ctx, DEP, inputs={"prompt": "Hello", "max_tokens": 8}, poll_s=0.01)
    assert result.status == "completed" and result.attempts == 1
    running, completed = records(lab)
    assert (running["status"], completed["status"]) == ("running", "completed")
    assert completed["cost_usd"] >= 0 and completed["duration_s"] >= 0 and completed["workflow"] == "qwen-complete"
    [artifact] = completed["artifacts"]
    assert artifact["name"] == "completion.json" and artifact["synced_at"] is None
    on_host = Path(artifact["remote_path"])
    assert on_host.is_relative_to(host.workspace)
    assert hashlib.sha256(on_host.read_bytes()).hexdigest() == artifact["sha256"]
    record = json.loads(on_host.read_text())
    assert record["text"] == " world! This is a test." and record["usage"]["completion_tokens"] == 8
    assert record["request"] == {"model": QWEN, "prompt": "Hello", "max_tokens": 8}
    assert "POST /v1/completions" in host.runtime.requests
    assert lab.registry.deployment(DEP).status == "ready"

    # destroy refuses while the completion is only on the host
    with pytest.raises(UserError, match=r"artifacts not synced off the instance: J-000001/completion\.json"):
        destroy(lab.ctx, DEP, confirm=DEP)

    synced = retrieve(lab.ctx, DEP, tmp_path / "outputs")
    [item] = synced.synced
    local = tmp_path / "outputs" / result.job_id / "completion.json"
    assert item["uri"] == local.resolve().as_uri() and json.loads(local.read_text()) == record
    assert Ledger(lab.registry.ledger_path).current(result.job_id)["artifacts"][0]["synced_at"]

    destroy(lab.ctx, DEP, confirm=DEP)
    assert lab.registry.deployment(DEP).status == "destroyed"
    assert [i.status for i in lab.sim.state.instances.values()] == ["terminated"]


def test_openai_chat_workflow_posts_chat_completions_with_the_prompt_as_a_user_message(lab):
    ready_llm(lab)
    result = run_job(lab.ctx, DEP, workflow_id="qwen-chat", inputs={"prompt": "Hi"}, poll_s=0.01)
    assert result.status == "completed"
    record = json.loads(Path(result.artifacts[0]["remote_path"]).read_text())
    assert record["api"] == "/v1/chat/completions" and record["text"] == "world! This is a test."
    assert record["request"]["messages"] == [{"role": "user", "content": "Hi"}]
    assert "POST /v1/chat/completions" in lab.host_of(DEP).runtime.requests


def test_gpuharness_run_cli_runs_a_job_on_an_openai_deployment(lab):
    ready_llm(lab)
    done = lab.cli("run", DEP, "--inputs", '{"prompt": "Hi", "max_tokens": 8}', "--poll", "0.05")
    assert done.returncode == 0, done.stderr
    last = records(lab)[-1]
    assert last["status"] == "completed" and last["artifacts"][0]["name"] == "completion.json"


def test_openai_cuda_oom_from_the_server_fails_the_job_once_and_is_never_retried(lab):
    ready_llm(lab)
    runtime = lab.host_of(DEP).runtime
    runtime.faults = RuntimeFaults(oom=True)
    before = runtime.requests.count("POST /v1/completions")
    result = run_job(lab.ctx, DEP, inputs={"prompt": "Hello"}, poll_s=0.01)
    assert result.status == "failed" and result.attempts == 1
    assert result.failure is not None and result.failure.cause == "cuda_oom" and not result.failure.retryable
    assert [(r["id"], r["status"]) for r in records(lab)] == [("J-000001", "running"), ("J-000001", "failed")]
    failed = records(lab)[-1]
    assert failed["cause"] == "cuda_oom" and "CUDA out of memory" in failed["error"] and failed["artifacts"] == []
    assert runtime.requests.count("POST /v1/completions") - before == 1
    assert lab.registry.deployment(DEP).status == "ready"
    tos = [e["to"] for e in read_journal(lab.registry.journal_path) if e["deployment"] == DEP]
    assert tos[-2:] == ["running", "ready"]

    destroy(lab.ctx, DEP, confirm=DEP)  # nothing to sync: a failed job has no artifacts
    assert lab.registry.deployment(DEP).status == "destroyed"


def test_a_completion_answer_that_does_not_decode_fails_the_job_and_nothing_is_stored(lab):
    ready_llm(lab)
    runtime = lab.host_of(DEP).runtime
    whole = json.dumps({"object": "text_completion", "choices": [{"index": 0, "text": "a red cube"}]}).encode()
    runtime.faults = RuntimeFaults(served_output=(".json", whole[:-7]))  # cut inside the answer
    result = run_job(lab.ctx, DEP, inputs={"prompt": "Hello"}, poll_s=0.01)
    assert result.status == "failed"  # retried once, as an unclassified failure is
    failed = records(lab)[-1]
    assert "completion.json: not valid JSON" in failed["error"] and failed["artifacts"] == []
    assert not list((lab.host_of(DEP).workspace / "outputs").rglob("completion.json"))


def test_openai_job_over_the_per_job_ceiling_is_cancelled_while_the_server_still_generates(lab):
    ready_llm(lab)
    with lab.registry.update("policy.json") as doc:
        doc["per_job_usd"] = 0.05
    runtime = lab.host_of(DEP).runtime
    runtime.faults = RuntimeFaults(never_finishes=True)  # the completion request hangs
    before = runtime.requests.count("POST /v1/completions")
    result = run_job(lab.ctx, DEP, inputs={"prompt": "Hello"}, poll_s=3600)  # one more poll would cost $0.40
    assert result.status == "cancelled" and result.attempts == 1
    last = records(lab)[-1]
    assert last["cause"] == "per-job-ceiling" and "per_job_usd" in last["error"] and last["artifacts"] == []
    assert runtime.requests.count("POST /v1/completions") - before == 1
    assert lab.registry.deployment(DEP).status == "ready"


@pytest.mark.parametrize(("status", "body", "cause", "words"), [
    (500, {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB.",
           "type": "InternalServerError", "param": None, "code": 500}, "cuda_oom", "CUDA out of memory"),
    (400, {"error": {"message": "This model's maximum context length is 2048 tokens.", "type": "BadRequestError",
                     "param": None, "code": 400}}, "bad_input", "maximum context length"),
    (424, {"error": "Request failed during generation: Server error: CUDA out of memory. Tried to allocate "
                    "1.00 GiB", "error_type": "generation"}, "cuda_oom", "Request failed during generation"),
    (422, {"error": "Input validation error: `max_new_tokens` must be <= 100", "error_type": "validation"},
     "bad_input", "Input validation error"),
    (200, {"object": "error", "message": "RuntimeError: CUDA error: out of memory", "code": 500}, "cuda_oom",
     "CUDA error: out of memory"),
])
def test_each_servers_error_shape_is_read_and_classified(status, body, cause, words):
    response = httpx.Response(status, json=body)
    text = answer_error(response)
    assert text is not None and text.startswith(f"HTTP {status}: ") and words in text
    assert classify(text).cause == cause
    assert classify(text).retryable is False  # the server refused the request: the same one fails the same way


@pytest.mark.parametrize(("body", "words"), [
    (b'{"object": "text_completion", "choices": [{"index": 0, "text": "a', "not valid JSON"),
    (b'{"object": "text_completion", "choices": [{"index": 0, "text": "a \xff"}]}', "not UTF-8"),
    (b'{"object": "text_completion", "choices": [], "score": NaN}', "not a finite number"),
    (b'{"object": "text_completion", "choices": [], "choices": [{"text": "x"}]}', "duplicate key"),
], ids=["cut", "not-utf-8", "nan", "repeated-key"])
def test_a_200_whose_answer_does_not_decode_fully_is_an_error(body, words):
    text = answer_error(httpx.Response(200, content=body, headers={"Content-Type": "application/json"}))
    assert text is not None and text.startswith("HTTP 200: completion.json: ") and words in text, text


def test_a_completion_answer_is_not_an_error_and_a_plain_text_traceback_is():
    ok = httpx.Response(200, json={"object": "text_completion", "choices": [{"index": 0, "text": "x"}]})
    assert answer_error(ok) is None
    page = httpx.Response(502, text="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")
    assert classify(answer_error(page) or "").cause == "cuda_oom"


def test_request_for_uses_the_deployment_model_and_refuses_an_unknown_api():
    assert request_for(COMPLETE, {"prompt": "a"}, QWEN) == ("/v1/completions", {"model": QWEN, "prompt": "a"})
    assert request_for(CHAT, {"prompt": "a", "model": "other"}, QWEN)[1] == {
        "model": "other", "messages": [{"role": "user", "content": "a"}]}
    with pytest.raises(ValueError, match="api 'embeddings'"):
        request_for({**COMPLETE, "api": "embeddings"}, {}, QWEN)
