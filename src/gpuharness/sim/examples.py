"""The simulator's example model and ComfyUI workflow: what a simulated host can install, configure and prove
ready. The demo seeds them under its own names; `sim serve --configure` adds them as `sim-*` entries."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gpuharness.sim.comfyui import NAME as COMFYUI
from gpuharness.sim.comfyui import safetensors_bytes

CHECKPOINT = "h3-mini.safetensors"
#: ComfyUI's text-to-image graph in API format, valid against the recorded ComfyUI 0.8.0 catalog (a test proves
#: it); jobs set the prompt through the workflow's `parameters` ("text" -> node 6).
GRAPH: dict[str, Any] = {
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CHECKPOINT}},
    "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 256, "height": 256, "batch_size": 1}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red cube", "clip": ["4", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry, low quality", "clip": ["4", 1]}},
    "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 1.0, "sampler_name": "euler",
                                               "scheduler": "normal", "denoise": 1.0, "model": ["4", 0],
                                               "positive": ["6", 0], "negative": ["7", 0],
                                               "latent_image": ["5", 0]}},
    "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
    "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "h3", "images": ["8", 0]}},
}
#: The names `sim serve --configure` gives them in models.json and workflows.json.
MODEL = "sim-h3-mini"
WORKFLOW = "sim-text-to-image"


def model_entry(store: Path, name: str = MODEL) -> dict[str, Any]:
    """Write the checkpoint (256 KiB of deterministic weights that load as safetensors) into store, and return
    its models.json entry (a file:// url, sha256 and size)."""
    store.mkdir(parents=True, exist_ok=True)
    weights = store / CHECKPOINT
    weights.write_bytes(safetensors_bytes(65536))
    return {"name": name, "min_vram_gb": 16, "files": [
        {"path": f"checkpoints/{CHECKPOINT}", "url": weights.resolve().as_uri(),
         "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "size": weights.stat().st_size}]}


def workflow_entry(name: str = WORKFLOW, model: str = MODEL) -> dict[str, Any]:
    """The workflows.json entry: setup steps, the graph, its prompt parameter and the test generation."""
    return {"id": name, "version": 1, "runtime": COMFYUI, "model": model, "retryable": True,
            "setup": ["mkdir -p custom_nodes", "echo 'runtime configured' > configured.txt"], "graph": GRAPH,
            "parameters": {"text": "6.text"},
            "test_generation": {"inputs": {"text": "a red cube"}, "timeout_s": 60,
                                "expected_outputs": [{"type": "image/png", "min_bytes": 100_000}]}}
