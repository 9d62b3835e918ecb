"""A health-check world for tests and benches: simulated hosts with runtimes, and a registry whose
deployments point at them (status health-checking)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from checkout import ROOT

from gpuharness.core.deployment import Deployment
from gpuharness.core.registry import Registry
from gpuharness.operations.guard import guard_plan
from gpuharness.operations.install import configure_script
from gpuharness.sim.comfyui import CUSTOM_NODE, safetensors_bytes
from gpuharness.sim.host import HostSpec, SimHost
from gpuharness.sim.runtimes import RuntimeFaults, RuntimeServer

CHECKS = ROOT / "checks" / "health" / "test_health.py"

MODEL = {"name": "sdxl-base", "files": [{"path": "models/checkpoints/sdxl.safetensors", "sha256": "a" * 64,
                                         "size": 6_938_078_334}], "min_vram_gb": 12, "min_driver": "550.0"}
LLM = {"name": "Qwen/Qwen2.5-0.5B-Instruct", "files": [{"path": "qwen/model.safetensors", "sha256": "b" * 64,
                                                        "size": 988_097_824}], "min_cuda": "12.1"}
CHECKPOINT = "sdxl.safetensors"


def sdxl_graph(ckpt: str = CHECKPOINT, sampler: str = "KSampler", size: int = 64) -> dict[str, Any]:
    """ComfyUI's default text-to-image graph (API format), valid against the recorded 0.8.0 catalog."""
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red cube on a table", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "3": {"class_type": sampler, "inputs": {
            "seed": 1, "steps": 20, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 1.0,
            "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "ComfyUI"}},
    }


WORKFLOW = {
    "id": "sdxl-basic", "version": 1, "runtime": "comfyui", "model": "sdxl-base", "min_cuda": "12.4",
    "test_generation": {
        "graph": sdxl_graph(), "inputs": {"3": {"steps": 4}},
        "expected_outputs": [{"type": "image/png", "min_bytes": 1000}], "timeout_s": 60},
}
#: the same graph sampling with a custom node's class (the simulated hosts have it, unless it failed to import)
CUSTOM_SAMPLER = {**WORKFLOW, "id": "sdxl-custom-sampler",
                  "test_generation": {**WORKFLOW["test_generation"], "graph": sdxl_graph(sampler=CUSTOM_NODE)}}
#: the same graph also saving a sound: its classes come from comfy_extras/nodes_audio.py, which a server without
#: torchaudio cannot import (the recorded 0.8.0 catalog lacks them)
AUDIO_CLASSES = ("EmptyLatentAudio", "VAEDecodeAudio", "SaveAudio")
WITH_AUDIO = {**WORKFLOW, "id": "sdxl-with-audio", "test_generation": {**WORKFLOW["test_generation"], "graph": {
    **sdxl_graph(),
    "10": {"class_type": "EmptyLatentAudio", "inputs": {"seconds": 10.0, "batch_size": 1}},
    "11": {"class_type": "VAEDecodeAudio", "inputs": {"samples": ["10", 0], "vae": ["4", 2]}},
    "12": {"class_type": "SaveAudio", "inputs": {"audio": ["11", 0], "filename_prefix": "audio/ComfyUI"}}}}}
SERVERLESS = {"id": "sls-image", "version": 1, "runtime": "serverless",
              "test_generation": {"inputs": {"prompt": "a red cube"}, "timeout_s": 30}}
CHAT = {"id": "chat", "version": 1, "runtime": "openai", "model": LLM["name"],
        "test_generation": {"inputs": {"prompt": "Hello", "max_tokens": 8}, "timeout_s": 60}}


def start_guard(host: SimHost, record: dict[str, Any]) -> None:
    """The shutdown guard as configure leaves it on a Vast host (its in-pod identity placed, its stop route a closed
    port), started without SSH so that the checks' connection counts stay the probe's own."""
    plan = guard_plan(Deployment.from_json(record), {"kind": "vast"})
    script = configure_script(Deployment.from_json(record).workspace, None, plan, "as recorded")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(host.root), "CONTAINER_ID": str(record["instance_id"]),
           "CONTAINER_API_KEY": "instance-key", "GPUHARNESS_GUARD_API": "http://127.0.0.1:9"}
    subprocess.run(["/bin/sh", "-c", script], cwd=host.root, env=env, check=True, capture_output=True, timeout=30)


class HealthWorld:
    """Owns the simulated hosts; `add` registers a deployment for each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.registry = Registry(root / "registry")
        self.registry.init()
        self.hosts: dict[str, SimHost] = {}
        with self.registry.update("models.json") as doc:
            doc["models"] += [MODEL, LLM]
        with self.registry.update("workflows.json") as doc:
            doc["workflows"] += [WORKFLOW, CUSTOM_SAMPLER, WITH_AUDIO, CHAT, SERVERLESS]
        with self.registry.update("policy.json") as doc:
            doc["health_timeouts"] = {"nvidia_smi_s": 1, "probe_s": 30, "connect_s": 10}
        with self.registry.update("providers.json") as doc:
            doc["providers"].append({"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"})
            doc["providers"].append({"name": "runpod-serverless", "kind": "runpod-serverless",
                                     "credential_env": "RUNPOD_API_KEY"})
        self.endpoints: dict[str, RuntimeServer] = {}

    def add(self, dep_id: str, spec: HostSpec | None = None, *, status: str = "health-checking", guard: bool = True,
            **fields: Any) -> SimHost:
        spec = spec or HostSpec()
        host = SimHost(spec, root=self.root / "hosts" / dep_id, name=dep_id).start()
        self.hosts[dep_id] = host
        if spec.runtime == "comfyui":  # the model the workflow names, installed where the server lists it
            checkpoints = host.workspace / "models" / "checkpoints"
            checkpoints.mkdir(parents=True, exist_ok=True)
            (checkpoints / CHECKPOINT).write_bytes(safetensors_bytes())
        llm = spec.runtime == "openai"
        record = {
            "id": dep_id, "provider": "vast", "instance_id": f"inst-{dep_id}", "gpu": "RTX 4090", "gpu_count": 1,
            "runtime": spec.runtime, "model": LLM["name"] if llm else "sdxl-base",
            "workflow": "chat" if llm else "sdxl-basic", "endpoint": host.endpoint, "ssh": host.ssh_block(),
            "status": status, "cost_hr": 0.4, "created_at": "2026-11-30T20:00:00Z",
            "shutdown_rule": {"idle_minutes": 30}, "service_port": host.service_port,
            "log_path": str(host.log_path), "labels": {"source": "simulator"}, **fields,
        }
        with self.registry.update("deployments.json") as doc:
            doc["deployments"].append(record)
        if guard:
            start_guard(host, record)
        return host

    def add_serverless(self, dep_id: str, faults: RuntimeFaults | None = None) -> RuntimeServer:
        """A RunPod Serverless endpoint: no host to probe, only the endpoint's health and a test job."""
        server = RuntimeServer("serverless", faults=faults or RuntimeFaults(polls_before_done=0)).start()
        self.endpoints[dep_id] = server
        record = {"id": dep_id, "provider": "runpod-serverless", "instance_id": "ep1", "runtime": "serverless",
                  "workflow": "sls-image", "endpoint": f"{server.url}/v2/ep1", "status": "health-checking",
                  "cost_hr": 0.0, "created_at": "2026-11-30T20:00:00Z", "shutdown_rule": {"idle_minutes": 5}}
        with self.registry.update("deployments.json") as doc:
            doc["deployments"].append(record)
        return server

    def deployment(self, dep_id: str) -> dict[str, Any]:
        return self.registry.deployment(dep_id).to_json()

    def install_checks(self, directory: Path) -> Path:
        target = directory / "test_health.py"
        shutil.copy(CHECKS, target)
        return target

    def close(self) -> None:
        for host in self.hosts.values():
            host.stop()
        for server in self.endpoints.values():
            server.stop()


def run_checks(pytester: Any, world: HealthWorld, *args: str, mode: str = "live") -> Any:
    """The packaged health suite copied into pytester's directory and run in-process against the world's registry;
    -vv and -rA print every outcome on a line of its own (`test_health.py::test_x[dep] PASSED`, `FAILED ...`)."""
    checks = world.install_checks(pytester.path)
    return pytester.runpytest_inprocess(str(checks), "--registry", str(world.registry.root), "--gpu-mode", mode,
                                        "-p", "no:cacheprovider", "-rA", "-vv", *args)
